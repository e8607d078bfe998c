import { isUtf8 } from 'node:buffer';
import { formatFieldPath } from './field-path';

/**
 * One linear pass over a JSON text, before JSON.parse, for what JSON.parse lets through silently
 * or what breaks later: nesting deeper than a bound (every recursive walk after the parse would
 * risk the stack), NUL characters and lone UTF-16 surrogates (PostgreSQL and RFC 8785 canonical
 * JSON refuse them), bytes that were not UTF-8, a key given twice in one object (JSON.parse keeps
 * the last), `__proto__` keys (copying an object drops them) and numbers past the range of a
 * double (JSON.parse makes them Infinity). Each fault names its field the way errors do.
 *
 * The scan follows JSON's structure but does not check its grammar: on text that is not JSON it
 * stops without a fault, and JSON.parse, which runs next, says where the text goes wrong. It
 * allocates only the keys it compares and one Set per level of nesting.
 */

/** How deep objects and arrays may nest in a request body. */
export const MAX_JSON_DEPTH = 64;

export type JsonFaultKind = 'too_deep' | 'nul' | 'lone_surrogate' | 'invalid_utf8' | 'duplicate_key' | 'proto_key' | 'number_out_of_range';

export interface JsonFault {
  kind: JsonFaultKind;
  /** The field at fault, `steps[1].name` style; `(body)` for the whole body. */
  field: string;
  message: string;
}

/** Marks each invalid UTF-8 sequence in decoded text: a lone surrogate, which valid UTF-8 never decodes to. */
const INVALID_UTF8_MARK = '\udc80';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LETTER_U = 0x75;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;
const MINUS = 0x2d;

const isHigh = (unit: number) => unit >= 0xd800 && unit <= 0xdbff;
const isLow = (unit: number) => unit >= 0xdc00 && unit <= 0xdfff;

/**
 * The text of a UTF-8 request body, without a leading byte order mark. Each invalid sequence
 * becomes a lone surrogate, which the scan reports as invalid UTF-8 naming the field it sits in,
 * where a lenient decode would have stored U+FFFD in its place without a word.
 */
export function decodeJsonBytes(bytes: Buffer): string {
  const text = isUtf8(bytes) ? bytes.toString('utf8') : decodeMarkingInvalid(bytes);
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

function decodeMarkingInvalid(bytes: Buffer): string {
  let out = '';
  let start = 0;
  let i = 0;
  while (i < bytes.length) {
    if (bytes[i] < 0x80) {
      i++;
      continue;
    }
    const length = utf8SequenceLength(bytes, i);
    if (length > 0) {
      i += length;
      continue;
    }
    out += bytes.toString('utf8', start, i) + INVALID_UTF8_MARK;
    start = ++i;
  }
  return out + bytes.toString('utf8', start, bytes.length);
}

/** The length of the well-formed UTF-8 sequence at `i` (RFC 3629: no overlongs, surrogates or code points past U+10FFFF), or 0. */
function utf8SequenceLength(bytes: Buffer, i: number): number {
  const lead = bytes[i];
  let trailing: number;
  let low = 0x80;
  let high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) trailing = 1;
  else if (lead >= 0xe0 && lead <= 0xef) {
    trailing = 2;
    if (lead === 0xe0) low = 0xa0;
    if (lead === 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    trailing = 3;
    if (lead === 0xf0) low = 0x90;
    if (lead === 0xf4) high = 0x8f;
  } else return 0;
  if (i + trailing >= bytes.length) return 0;
  if (bytes[i + 1] < low || bytes[i + 1] > high) return 0;
  for (let k = 2; k <= trailing; k++) {
    if (bytes[i + k] < 0x80 || bytes[i + k] > 0xbf) return 0;
  }
  return trailing + 1;
}

/** The code unit four hex digits at `i` spell, or -1. */
function hexUnit(text: string, i: number): number {
  let unit = 0;
  for (let k = i; k < i + 4; k++) {
    const c = text.charCodeAt(k);
    const digit = c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : c >= 0x41 && c <= 0x46 ? c - 0x37 : -1;
    if (digit < 0) return -1;
    unit = unit * 16 + digit;
  }
  return unit;
}

/** The first fault in `text`, or undefined when there is none (or the text is not JSON). */
export function scanJsonText(text: string, maxDepth = MAX_JSON_DEPTH): JsonFault | undefined {
  const n = text.length;
  // path[d - 1] is the key or index being read in the container at depth d.
  const path: (string | number)[] = [];
  const isArray = new Uint8Array(maxDepth + 1);
  const keysSeen: Set<string>[] = [];
  let depth = 0;
  let expectKey = false;

  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);

    if (c === QUOTE) {
      let fault: JsonFaultKind | undefined;
      let escaped = false;
      let j = i + 1;
      for (;;) {
        if (j >= n) return undefined;
        const unit = text.charCodeAt(j);
        if (unit === QUOTE) break;
        if (unit === BACKSLASH) {
          escaped = true;
          if (text.charCodeAt(j + 1) !== LETTER_U) {
            j += 2;
            continue;
          }
          const code = hexUnit(text, j + 2);
          if (code < 0) return undefined;
          j += 6;
          if (code === 0) fault ??= 'nul';
          else if (isHigh(code)) {
            if (text.charCodeAt(j) === BACKSLASH && text.charCodeAt(j + 1) === LETTER_U && isLow(hexUnit(text, j + 2))) j += 6;
            else fault ??= 'lone_surrogate';
          } else if (isLow(code)) fault ??= 'lone_surrogate';
          continue;
        }
        if (unit >= 0xd800 && unit <= 0xdfff) {
          // Decoded UTF-8 holds surrogates only in pairs; anything else is an invalid sequence's mark.
          if (isHigh(unit) && isLow(text.charCodeAt(j + 1))) {
            j += 2;
            continue;
          }
          fault ??= 'invalid_utf8';
        }
        j++;
      }

      if (expectKey) {
        let key: string;
        try {
          key = escaped ? (JSON.parse(text.slice(i, j + 1)) as string) : text.slice(i + 1, j);
        } catch {
          return undefined;
        }
        path[depth - 1] = key;
        if (fault) return faultAt(fault, path, depth, maxDepth);
        if (key === '__proto__') return faultAt('proto_key', path, depth, maxDepth);
        const seen = keysSeen[depth];
        if (seen.has(key)) return faultAt('duplicate_key', path, depth, maxDepth);
        seen.add(key);
        expectKey = false;
      } else if (fault) {
        return faultAt(fault, path, depth, maxDepth);
      }
      i = j;
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (depth === maxDepth) return faultAt('too_deep', path, depth, maxDepth);
      depth++;
      if (c === OPEN_ARRAY) {
        isArray[depth] = 1;
        path[depth - 1] = 0;
        expectKey = false;
      } else {
        isArray[depth] = 0;
        (keysSeen[depth] ??= new Set()).clear();
        expectKey = true;
      }
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      if (depth === 0 || isArray[depth] !== (c === CLOSE_ARRAY ? 1 : 0)) return undefined;
      depth--;
      expectKey = false;
    } else if (c === COMMA) {
      if (depth === 0) return undefined;
      if (isArray[depth]) path[depth - 1] = (path[depth - 1] as number) + 1;
      else expectKey = true;
    } else if (c === MINUS || (c >= 0x30 && c <= 0x39)) {
      let j = i + 1;
      let exponent = false;
      for (; j < n; j++) {
        const d = text.charCodeAt(j);
        if (d === 0x65 || d === 0x45) exponent = true;
        else if (!((d >= 0x30 && d <= 0x39) || d === 0x2e || d === 0x2b || d === MINUS)) break;
      }
      // Only an exponent or more than 308 digits can pass the largest double.
      if (exponent || j - i > 308) {
        const value = Number(text.slice(i, j));
        if (value === Infinity || value === -Infinity) return faultAt('number_out_of_range', path, depth, maxDepth);
      }
      i = j - 1;
    }
    // Whitespace, colons and literals are JSON.parse's to judge.
  }
  return undefined;
}

const LONE_SURROGATES = /\p{Cs}/gu;

function faultAt(kind: JsonFaultKind, path: (string | number)[], depth: number, maxDepth: number): JsonFault {
  // A key at fault may hold a lone surrogate: shown as U+FFFD so the answer stays well-formed text.
  const field = formatFieldPath(path.slice(0, depth)).replace(LONE_SURROGATES, '\ufffd') || '(body)';
  return { kind, field, message: FAULT_MESSAGES[kind](field, maxDepth) };
}

const FAULT_MESSAGES: Record<JsonFaultKind, (field: string, maxDepth: number) => string> = {
  too_deep: (field, maxDepth) => `${field} is nested more than ${maxDepth} levels deep`,
  nul: (field) => `${field} holds a NUL character`,
  lone_surrogate: (field) => `${field} holds a lone surrogate (a \\ud800-\\udfff escape without its pair), which is not Unicode text`,
  invalid_utf8: (field) => `${field} holds bytes that are not valid UTF-8`,
  duplicate_key: (field) => `${field} is given more than once`,
  proto_key: (field) => `${field}: a key named __proto__ is not accepted`,
  number_out_of_range: (field) => `${field} is a number too large to represent`,
};
