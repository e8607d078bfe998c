import type { Context, Next } from 'koa';
import { badRequest } from '../../core/errors';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The raw bytes a request target stands for, with %XX escapes decoded. */
function targetBytes(target: string): Buffer {
  const bytes: number[] = [];
  for (let i = 0; i < target.length; i++) {
    const ch = target.charCodeAt(i);
    if (ch === 0x25 && /^[0-9a-fA-F]{2}$/.test(target.slice(i + 1, i + 3))) {
      bytes.push(parseInt(target.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(...Buffer.from(target[i], 'latin1'));
    }
  }
  return Buffer.from(bytes);
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
    try {
      utf8.decode(bytes);
    } catch {
      throw badRequest(`the request ${name} is not valid UTF-8`);
    }
  }
  await next();
}
