import { createCipheriv, createDecipheriv, hkdfSync, randomBytes, scryptSync } from 'node:crypto';

/**
 * Sealing secrets at rest (spec part B 5.3): credential secrets, notification target secrets,
 * sealed survey answers and defaults, callback keys. AES-256-GCM under a key derived from the
 * install's `SERVICE_ENCRYPTION_KEY` and `SERVICE_ENCRYPTION_SALT`.
 *
 * Accepted settings: the key is any string of at least 32 characters, the salt any string of at
 * least 16 (characters counted as Unicode code points), neither with leading or trailing
 * whitespace, so a stray newline from a secrets file cannot quietly make one process derive a
 * different key from another. Generate them with, for example, `openssl rand -base64 48` and
 * `openssl rand -base64 24`.
 *
 * Key derivation: scrypt (N = 2^15, r = 8, p = 1) over the key's UTF-8 bytes with the salt's
 * UTF-8 bytes, to a 32-byte master secret; HKDF-SHA256 then splits that into the AES key and a
 * key-id secret under distinct labels. Why scrypt rather than HKDF alone: HKDF is meant for key
 * material that is already uniformly random, but these settings are strings an operator chooses
 * and may be a passphrase. A memory-hard KDF costs one fraction of a second at start-up (the
 * sealer is built once per process) and makes each guess at the key expensive for someone holding
 * a copy of the database. This is the shape the established tools take for an operator-set
 * "primary key plus derivation salt" (Rails' Active Record encryption derives with PBKDF2-SHA256;
 * scrypt is the memory-hard choice available in node:crypto and is what Cairn already uses for
 * passwords). The derivation parameters are fixed by the `v1` format: changing them is a new
 * format version, not a silent key change.
 *
 * Token format: `v1.<key id>.<iv>.<ciphertext and tag>` with base64url (no padding) parts. The key
 * id is the first 8 bytes (16 hex digits) of an HKDF output of the master secret: a non-secret
 * fingerprint that tells "sealed under another key or salt" (spec part B 7.2: restore the key
 * and salt it was sealed with) apart from "altered". A fresh random 12-byte IV per seal. The
 * additional authenticated data is the token's header plus the caller's context (such as
 * `survey:<template id>:<var>` or `run:<run id>:<digest>:<var>`), so a sealed value copied to
 * another place does not open there.
 */

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_ID_BYTES = 8;
const SCRYPT = { N: 2 ** 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 } as const;

export const MIN_KEY_CHARACTERS = 32;
export const MIN_SALT_CHARACTERS = 16;

export const ENCRYPTION_KEY_VARIABLE = 'SERVICE_ENCRYPTION_KEY';
export const ENCRYPTION_SALT_VARIABLE = 'SERVICE_ENCRYPTION_SALT';

export type SealErrorReason = 'malformed' | 'other_key' | 'tampered';

/** A sealed value that does not open. The message never holds plaintext or key material. */
export class SealError extends Error {
  override readonly name = 'SealError';
  constructor(
    readonly reason: SealErrorReason,
    message: string,
    /** For `other_key`: the key id the value was sealed under (a non-secret fingerprint). */
    readonly sealedKeyId?: string,
  ) {
    super(message);
  }
}

/** The encryption settings are missing half of their pair or are not in the accepted form. */
export class SealConfigError extends Error {
  override readonly name = 'SealConfigError';
  constructor(
    /** The setting at fault, such as `SERVICE_ENCRYPTION_SALT`. */
    readonly variable: string,
    message: string,
  ) {
    super(message);
  }
}

export interface Sealer {
  /** Seals `plaintext` bound to `context`; a different token each call. */
  seal(plaintext: string, context: string): string;
  /** Opens a token sealed under this key with the same `context`; throws `SealError` otherwise. */
  open(sealed: string, context: string): string;
  /** The non-secret fingerprint of this key and salt, as written in every token. */
  readonly keyId: string;
}

const B64URL = /^[A-Za-z0-9_-]+$/;
const KEY_ID = /^[0-9a-f]{16}$/;

function checkSetting(value: string, variable: string, minCharacters: number): void {
  if (typeof value !== 'string') throw new SealConfigError(variable, `${variable} must be a string`);
  if (value.trim() !== value) {
    throw new SealConfigError(variable, `${variable} must not begin or end with whitespace`);
  }
  if ([...value].length < minCharacters) {
    throw new SealConfigError(variable, `${variable} must be at least ${minCharacters} characters long`);
  }
}

function decodePart(part: string, what: string): Buffer {
  if (!B64URL.test(part)) throw malformed(`its ${what} is not base64url`);
  const bytes = Buffer.from(part, 'base64url');
  // Only the canonical spelling is accepted, so a token has exactly one text form.
  if (bytes.toString('base64url') !== part) throw malformed(`its ${what} is not canonical base64url`);
  return bytes;
}

const malformed = (why: string) => new SealError('malformed', `the sealed value is malformed: ${why}`);

function checkContext(context: string): void {
  if (typeof context !== 'string' || context === '') throw new TypeError('a sealing context must be a non-empty string');
}

/** The key id a token names, or undefined when the text is not a sealed token of a known version. */
export function sealedKeyId(sealed: string): string | undefined {
  if (typeof sealed !== 'string') return undefined;
  const parts = sealed.split('.');
  return parts.length === 4 && parts[0] === VERSION && KEY_ID.test(parts[1]) ? parts[1] : undefined;
}

/** Builds a sealer from the install's key and salt; throws `SealConfigError` for a bad setting. */
export function createSealer(settings: { key: string; salt: string }): Sealer {
  checkSetting(settings.key, ENCRYPTION_KEY_VARIABLE, MIN_KEY_CHARACTERS);
  checkSetting(settings.salt, ENCRYPTION_SALT_VARIABLE, MIN_SALT_CHARACTERS);

  const master = scryptSync(Buffer.from(settings.key, 'utf8'), Buffer.from(settings.salt, 'utf8'), 32, SCRYPT);
  const aesKey = Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), 'cairn seal v1 aes-256-gcm key', 32));
  const keyId = Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), 'cairn seal v1 key id', KEY_ID_BYTES)).toString('hex');
  master.fill(0);

  const header = `${VERSION}.${keyId}`;
  const aad = (context: string) => Buffer.from(`${header}\u0000${context}`, 'utf8');

  return {
    keyId,

    seal(plaintext: string, context: string): string {
      if (typeof plaintext !== 'string') throw new TypeError('only a string can be sealed');
      checkContext(context);
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', aesKey, iv, { authTagLength: TAG_BYTES });
      cipher.setAAD(aad(context));
      const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
      return `${header}.${iv.toString('base64url')}.${body.toString('base64url')}`;
    },

    open(sealed: string, context: string): string {
      checkContext(context);
      if (typeof sealed !== 'string') throw malformed('it is not text');
      const parts = sealed.split('.');
      if (parts.length !== 4) throw malformed('it does not have four dot-separated parts');
      const [version, sealedId, ivText, bodyText] = parts;
      if (version !== VERSION) throw malformed('its format version is not v1');
      if (!KEY_ID.test(sealedId)) throw malformed('its key id is not 16 hex digits');
      const iv = decodePart(ivText, 'IV');
      if (iv.length !== IV_BYTES) throw malformed(`its IV is not ${IV_BYTES} bytes`);
      const body = decodePart(bodyText, 'ciphertext');
      if (body.length < TAG_BYTES) throw malformed('it is too short to hold an authentication tag');
      if (sealedId !== keyId) {
        throw new SealError(
          'other_key',
          `the sealed value was sealed under another encryption key and salt (key id ${sealedId}; this server's key id is ${keyId})`,
          sealedId,
        );
      }
      const decipher = createDecipheriv('aes-256-gcm', aesKey, iv, { authTagLength: TAG_BYTES });
      decipher.setAAD(aad(context));
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
      let plaintext: Buffer;
      try {
        plaintext = Buffer.concat([decipher.update(body.subarray(0, body.length - TAG_BYTES)), decipher.final()]);
      } catch {
        throw new SealError('tampered', 'the sealed value failed authentication: it was altered or belongs to another place');
      }
      return plaintext.toString('utf8');
    },
  };
}

/**
 * The sealer the environment configures, or undefined when neither setting is set (an empty value
 * counts as unset). Only one of the pair, or one not in the accepted form, throws
 * `SealConfigError` naming the variable.
 */
export function sealerFromEnvironment(env: Record<string, string | undefined> = process.env): Sealer | undefined {
  const key = env[ENCRYPTION_KEY_VARIABLE] || undefined;
  const salt = env[ENCRYPTION_SALT_VARIABLE] || undefined;
  if (key === undefined && salt === undefined) return undefined;
  if (key === undefined) {
    throw new SealConfigError(ENCRYPTION_KEY_VARIABLE, `${ENCRYPTION_SALT_VARIABLE} is set but ${ENCRYPTION_KEY_VARIABLE} is not; set both or neither`);
  }
  if (salt === undefined) {
    throw new SealConfigError(ENCRYPTION_SALT_VARIABLE, `${ENCRYPTION_KEY_VARIABLE} is set but ${ENCRYPTION_SALT_VARIABLE} is not; set both or neither`);
  }
  return createSealer({ key, salt });
}
