import { createHash, hash as oneShotHash } from 'node:crypto';

type Input = string | Uint8Array;

/**
 * Whether the one-shot `crypto.hash` is usable: it skips building a Hash object, several times
 * faster on the small inputs chains and trees hash; probed once because early Node 20 lacks it.
 */
const oneShot: boolean = (() => {
  try {
    return typeof oneShotHash === 'function' && oneShotHash('sha256', 'abc', 'hex') === createHash('sha256').update('abc').digest('hex');
  } catch {
    return false;
  }
})();

/** SHA-256 of UTF-8 text or bytes. */
export const sha256: (data: Input) => Buffer = oneShot
  ? (data) => oneShotHash('sha256', data, 'buffer')
  : (data) => createHash('sha256').update(data).digest();

/** Lowercase hex SHA-256 of UTF-8 text or bytes. */
export const sha256Hex: (data: Input) => string = oneShot
  ? (data) => oneShotHash('sha256', data, 'hex')
  : (data) => createHash('sha256').update(data).digest('hex');

/**
 * SHA-256 as a 32-character binary (latin1) string. Where many small hashes feed one another (a
 * Merkle tree), a string result costs a fifth of a Buffer result, whose allocation outweighs the
 * hash itself.
 */
export const sha256Binary: (data: Input) => string = oneShot
  ? (data) => oneShotHash('sha256', data, 'binary')
  : (data) => createHash('sha256').update(data).digest('binary');
