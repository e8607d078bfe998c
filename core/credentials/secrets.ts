import { randomBytes, scrypt as scryptCallback, timingSafeEqual } from 'node:crypto';
import { sha256 } from '../sha256';
import { promisify } from 'node:util';

const scrypt = promisify(scryptCallback) as (password: string, salt: Buffer, keylen: number) => Promise<Buffer>;

/** A bearer secret: 32 random bytes, prefixed so a leaked one is recognisable in a scan. */
export function newBearerSecret(): string {
  return `cairn_${randomBytes(32).toString('base64url')}`;
}

/** Bearer secrets are high-entropy, so a plain SHA-256 is the right storage hash (no salt or stretching needed). */
export function hashBearerSecret(secret: string): Buffer {
  return sha256(secret);
}

const SCRYPT_KEYLEN = 32;

/** Passwords are low-entropy: scrypt with a per-password salt, stored as `scrypt$<salt>$<hash>`. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scrypt(password, salt, SCRYPT_KEYLEN);
  return `scrypt$${salt.toString('base64')}$${hash.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  const [scheme, salt, hash] = (stored ?? '').split('$');
  if (scheme !== 'scrypt' || !salt || !hash) {
    // Spend the same work as a real check, so a missing account is not told apart by timing.
    await scrypt(password, Buffer.alloc(16), SCRYPT_KEYLEN);
    return false;
  }
  const expected = Buffer.from(hash, 'base64');
  const actual = await scrypt(password, Buffer.from(salt, 'base64'), expected.length);
  return timingSafeEqual(expected, actual);
}
