import { isUtf8 } from 'node:buffer';
import type { Context, Next } from 'koa';
import { badRequest } from '../../core/errors';

/** The value of an ASCII hex digit, or -1. */
function hexValue(byte: number): number {
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  const lower = byte | 0x20;
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x61 + 10 : -1;
}

/**
 * The raw bytes a request target stands for, with %XX escapes decoded. Node hands the target over
 * as latin1, one character a byte, so its bytes are one conversion away; a target without escapes
 * is those bytes as they are (this runs for every request).
 */
export function targetBytes(target: string): Buffer {
  const raw = Buffer.from(target, 'latin1');
  if (!raw.includes(0x25)) return raw;
  const bytes = Buffer.allocUnsafe(raw.length);
  let length = 0;
  for (let i = 0; i < raw.length; i++) {
    const high = raw[i] === 0x25 && i + 2 < raw.length ? hexValue(raw[i + 1]) : -1;
    const low = high >= 0 ? hexValue(raw[i + 2]) : -1;
    if (low >= 0) {
      bytes[length++] = high * 16 + low;
      i += 2;
    } else {
      bytes[length++] = raw[i];
    }
  }
  return bytes.subarray(0, length);
}

/** Refuses a path or query holding NUL or invalid UTF-8 before any route sees it. */
export async function requestTargetHygiene(ctx: Context, next: Next): Promise<void> {
  const target = ctx.req.url ?? '/';
  const mark = target.indexOf('?');
  const parts: [string, string][] = [
    ['path', mark < 0 ? target : target.slice(0, mark)],
    ['query', mark < 0 ? '' : target.slice(mark + 1)],
  ];
  for (const [name, text] of parts) {
    const bytes = targetBytes(text);
    if (bytes.includes(0)) throw badRequest(`the request ${name} holds a NUL character`);
    if (!isUtf8(bytes)) throw badRequest(`the request ${name} is not valid UTF-8`);
  }
  await next();
}
