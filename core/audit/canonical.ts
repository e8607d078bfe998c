import { formatFieldPath } from '../field-path';

/**
 * RFC 8785 (JSON Canonicalization Scheme) for the values Cairn hashes: audit chain entries and
 * reason commitments. The output is the same, byte for byte, as the `canonicalize` package's, and
 * test/unit/audit-chain.test.ts checks that against the package itself.
 *
 * Why not call the package: `canonicalize` 4 is ESM-only and exports only an `import` condition,
 * so `require('canonicalize')` fails to resolve in this CommonJS project; a `require` of its file
 * works only where Node can require ES modules (20.19 and later), and never inside Jest on Node 20
 * (Jest supports that from Node 24.9). An audit hash must come out the same in the server, the
 * offline verifier and the tests, so there is one serializer, here, and the package is its oracle.
 *
 * RFC 8785 was written around ECMAScript: numbers are serialized as `Number.prototype.toString`
 * does (so `JSON.stringify` of a finite number is exactly right, `-0` included), strings are
 * escaped as `JSON.stringify` escapes them, and object keys are sorted by UTF-16 code units, which
 * is what `Array.prototype.sort` does with no comparator.
 */

/** A value that has no RFC 8785 form; `path` names where it sits (`body.items[2]`, or `` for the top). */
export class CanonicalJsonError extends Error {
  constructor(
    message: string,
    readonly details: { path: string; type: string },
  ) {
    super(message);
    this.name = 'CanonicalJsonError';
  }
}

// Built-ins the hot path uses, bound once: inside a vm context (Jest's test environment) every
// lookup of a global such as `JSON` or `Array` goes through the context's interceptors, which
// made canonicalization four times slower there.
const stringify = JSON.stringify;
const isArray = Array.isArray;
const isFiniteNumber = Number.isFinite;
const keysOf = Object.keys;
const objectToString = Object.prototype.toString;
const tagOf = (value: object): string => objectToString.call(value);

// With the `u` flag a well-formed surrogate pair is one code point, so this finds lone halves only.
const LONE_SURROGATE = /\p{Cs}/u;

// String.prototype.isWellFormed (ES2024) is native and twice as fast as the regex; older runtimes lack it.
const isWellFormed: (text: string) => boolean =
  typeof (String.prototype as { isWellFormed?: unknown }).isWellFormed === 'function'
    ? (text) => (text as unknown as { isWellFormed(): boolean }).isWellFormed()
    : (text) => !LONE_SURROGATE.test(text);

/** The UTF-16 index of the first lone surrogate in `text`, or -1 when it is well-formed Unicode. */
export function findLoneSurrogate(text: string): number {
  return text.search(LONE_SURROGATE);
}

/**
 * The RFC 8785 canonical JSON text of `value`.
 *
 * Refused with a `CanonicalJsonError` naming the path: `undefined` at the top, functions, symbols,
 * BigInt, NaN and the infinities, strings or keys holding a lone surrogate (RFC 8785 works on
 * I-JSON, which has none), cycles, and objects that are not data (Map, Set, RegExp, typed arrays:
 * JSON would silently turn them into `{}`). An object property holding `undefined` is left out and
 * an `undefined` array element becomes `null`, as in JSON, so a value read back from a JSON column
 * canonicalizes the same as the one that was written. `toJSON` is honoured (a Date becomes its ISO
 * string), as JSON.stringify and the package do.
 */
export function canonicalJson(value: unknown): string {
  if (value === undefined) throw refusal('undefined', 'undefined', []);
  return serialize(value, [], []);
}

export { sha256Hex } from '../sha256';

/**
 * Text already in RFC 8785 form, written as it is wherever it sits in a value. A large document
 * (an audit bundle) can then carry the canonical text its parts were stored as instead of
 * serializing them again. Whoever makes one vouches that `text` is canonical JSON.
 */
export class CanonicalText {
  constructor(readonly text: string) {}
}

// `path` and `open` (the objects being serialized, outermost first) are stacks pushed and popped
// around each child, so nothing is allocated per node unless a value is refused; a refusal
// abandons the whole call, so they need no unwinding.
function serialize(value: unknown, path: PropertyKey[], open: object[]): string {
  switch (typeof value) {
    case 'string':
      if (!isWellFormed(value)) throw refusal('a string with a lone surrogate', 'lone surrogate', path);
      return stringify(value);
    case 'number':
      if (!isFiniteNumber(value)) throw refusal(String(value), String(value), path);
      return stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      return value === null ? 'null' : serializeObject(value, path, open);
    default:
      // undefined is handled by the callers, where JSON gives it a meaning; bigint, symbol, function.
      throw refusal(typeof value === 'bigint' ? 'a BigInt' : `a ${typeof value}`, typeof value, path);
  }
}

function serializeObject(value: object, path: PropertyKey[], open: object[]): string {
  // A linear scan: JSON data is shallow, and for a few levels this beats a Set.
  if (open.includes(value)) throw refusal('a circular reference', 'circular', path);
  if (value instanceof CanonicalText) return value.text;
  open.push(value);
  let text: string;
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') {
    const replaced: unknown = toJSON.call(value);
    if (replaced === undefined) throw refusal('an object whose toJSON returns undefined', 'undefined', path);
    text = serialize(replaced, path, open);
  } else if (isArray(value)) {
    text = serializeArray(value, path, open);
  } else {
    // The tag check works across realms (Jest runs tests in a vm context), unlike a prototype check.
    const tag = tagOf(value);
    if (tag !== '[object Object]') throw refusal(`a ${tag.slice(8, -1)}, not plain data`, tag.slice(8, -1), path);
    text = serializeRecord(value as Record<string, unknown>, path, open);
  }
  open.pop();
  return text;
}

function serializeArray(items: readonly unknown[], path: PropertyKey[], open: object[]): string {
  // JSON.stringify writes an array of such leaves exactly as the loop below would, in one native
  // call: a bundle's 100,000 entry hashes in a seventh of the time.
  if (holdsOnlyCanonicalLeaves(items)) return stringify(items);
  let out = '[';
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    if (i > 0) out += ',';
    path.push(i);
    out += item === undefined ? 'null' : serialize(item, path, open);
    path.pop();
  }
  return out + ']';
}

/**
 * Whether every element is a leaf JSON.stringify writes in RFC 8785 form: a well-formed string,
 * a finite number, a boolean or null. Anything else (a hole, undefined, an object, a value to
 * refuse) takes the element-by-element path, which knows where a refused value sits.
 */
function holdsOnlyCanonicalLeaves(items: readonly unknown[]): boolean {
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    switch (typeof item) {
      case 'string':
        if (!isWellFormed(item)) return false;
        break;
      case 'number':
        if (!isFiniteNumber(item)) return false;
        break;
      case 'boolean':
        break;
      case 'object':
        if (item !== null) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

function serializeRecord(record: Record<string, unknown>, path: PropertyKey[], open: object[]): string {
  // No comparator: sort compares UTF-16 code units, the order RFC 8785 section 3.2.3 asks for.
  const keys = keysOf(record).sort();
  let out = '{';
  let first = true;
  for (const key of keys) {
    const child = record[key];
    if (child === undefined) continue;
    path.push(key);
    if (!isWellFormed(key)) throw refusal('a key with a lone surrogate', 'lone surrogate', path);
    const text = serialize(child, path, open);
    path.pop();
    out += (first ? '' : ',') + stringify(key) + ':' + text;
    first = false;
  }
  return out + '}';
}

function refusal(what: string, type: string, path: readonly PropertyKey[]): CanonicalJsonError {
  const where = path.length === 0 ? 'the value' : formatFieldPath(path);
  return new CanonicalJsonError(`${where} is ${what}, which RFC 8785 canonical JSON cannot represent`, {
    path: formatFieldPath(path),
    type,
  });
}
