import {
  createSealer,
  ENCRYPTION_KEY_VARIABLE,
  ENCRYPTION_SALT_VARIABLE,
  SealConfigError,
  SealError,
  sealedKeyId,
  sealerFromEnvironment,
} from '../../core/credentials/seal';

// Fixtures only: shaped like real settings, never used anywhere else.
const KEY = 'k3y-material-for-unit-tests-0123456789abcdef';
const SALT = 'salt-for-unit-tests-0123';
const OTHER_KEY = 'another-key-material-for-unit-tests-0123456789';
const OTHER_SALT = 'another-salt-for-unit-tests';

// Key derivation is deliberately slow (scrypt), so the sealers are built once.
const sealer = createSealer({ key: KEY, salt: SALT });
const sameKey = createSealer({ key: KEY, salt: SALT });
const otherKey = createSealer({ key: OTHER_KEY, salt: SALT });
const otherSalt = createSealer({ key: KEY, salt: OTHER_SALT });

const CONTEXT = 'survey:tpl_01:db_password';

function reasonOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof SealError) return err.reason;
    throw err;
  }
  return undefined;
}

function errorOf(fn: () => unknown): Error {
  try {
    fn();
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a throw');
}

/** The token with one character of its ciphertext part changed to another base64url character. */
function flipCiphertextChar(token: string, at: number): string {
  const parts = token.split('.');
  const body = parts[3];
  const i = at < 0 ? body.length + at : at;
  const replacement = body[i] === 'A' ? 'B' : 'A';
  parts[3] = body.slice(0, i) + replacement + body.slice(i + 1);
  return parts.join('.');
}

describe('round trip', () => {
  test.each([
    ['ascii', 'hunter2'],
    ['empty string', ''],
    ['unicode', 'pässwörd 日本語 🔐 \u0000 end'],
    ['multiline', 'line one\nline two\r\n'],
    ['long', 'x'.repeat(100_000)],
    ['looks like a token', 'v1.0123456789abcdef.AAAA.BBBB'],
  ])('%s opens to the same text', (_name, plaintext) => {
    const token = sealer.seal(plaintext, CONTEXT);
    expect(sealer.open(token, CONTEXT)).toBe(plaintext);
  });

  test('another sealer built from the same key and salt opens it (the derivation is deterministic)', () => {
    expect(sameKey.keyId).toBe(sealer.keyId);
    expect(sameKey.open(sealer.seal('shared', CONTEXT), CONTEXT)).toBe('shared');
  });

  test('the token is self-describing: v1.<key id>.<iv>.<ciphertext and tag>', () => {
    const token = sealer.seal('abc', CONTEXT);
    const parts = token.split('.');
    expect(parts).toHaveLength(4);
    expect(parts[0]).toBe('v1');
    expect(parts[1]).toBe(sealer.keyId);
    expect(Buffer.from(parts[2], 'base64url')).toHaveLength(12);
    // 3 bytes of ciphertext plus a 16-byte tag.
    expect(Buffer.from(parts[3], 'base64url')).toHaveLength(19);
    expect(token).toMatch(/^v1\.[0-9a-f]{16}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(sealedKeyId(token)).toBe(sealer.keyId);
  });

  test('every seal uses a fresh IV, so the same plaintext never seals the same way', () => {
    const tokens = Array.from({ length: 50 }, () => sealer.seal('same', CONTEXT));
    expect(new Set(tokens).size).toBe(50);
    expect(new Set(tokens.map((t) => t.split('.')[2])).size).toBe(50);
  });

  test('the sealed text never contains the plaintext', () => {
    for (const plaintext of ['hunter2hunter2', 'correct-horse-battery-staple', 'AAAAAAAAAAAAAAAA', 'c2VjcmV0']) {
      const token = sealer.seal(plaintext, CONTEXT);
      expect(token).not.toContain(plaintext);
      expect(token).not.toContain(Buffer.from(plaintext).toString('base64url'));
      expect(token).not.toContain(Buffer.from(plaintext).toString('hex'));
    }
  });
});

describe('key id', () => {
  test('is a short non-secret fingerprint that changes with the key or the salt', () => {
    expect(sealer.keyId).toMatch(/^[0-9a-f]{16}$/);
    expect(otherKey.keyId).not.toBe(sealer.keyId);
    expect(otherSalt.keyId).not.toBe(sealer.keyId);
    expect(sealer.keyId).not.toContain(KEY.slice(0, 8));
  });

  test('sealedKeyId reads a token header and nothing else', () => {
    expect(sealedKeyId('v1.0123456789abcdef.x.y')).toBe('0123456789abcdef');
    expect(sealedKeyId('v2.0123456789abcdef.x.y')).toBeUndefined();
    expect(sealedKeyId('plain text')).toBeUndefined();
    expect(sealedKeyId(42 as unknown as string)).toBeUndefined();
  });
});

describe('open refuses', () => {
  const token = sealer.seal('the secret', CONTEXT);

  test('another context as tampered: a sealed value cannot be moved to another place', () => {
    expect(reasonOf(() => sealer.open(token, 'survey:tpl_01:other_var'))).toBe('tampered');
    expect(reasonOf(() => sealer.open(token, 'survey:tpl_02:db_password'))).toBe('tampered');
    expect(reasonOf(() => sealer.open(token, `${CONTEXT} `))).toBe('tampered');
  });

  test('a value sealed under another key as other_key, naming both key ids', () => {
    const err = errorOf(() => otherKey.open(token, CONTEXT)) as SealError;
    expect(err).toBeInstanceOf(SealError);
    expect(err.reason).toBe('other_key');
    expect(err.sealedKeyId).toBe(sealer.keyId);
    expect(err.message).toContain(sealer.keyId);
    expect(err.message).toContain(otherKey.keyId);
  });

  test('a value sealed under another salt as other_key', () => {
    expect(reasonOf(() => otherSalt.open(token, CONTEXT))).toBe('other_key');
  });

  test('a key id rewritten to the opener\'s as tampered (the wrong key cannot open it)', () => {
    const forged = token.replace(sealer.keyId, otherKey.keyId);
    expect(reasonOf(() => otherKey.open(forged, CONTEXT))).toBe('tampered');
  });

  test.each([
    ['first ciphertext character', 0],
    ['a middle character', 5],
    ['a character of the tag', -3],
  ])('a flipped %s as tampered', (_name, at) => {
    expect(reasonOf(() => sealer.open(flipCiphertextChar(token, at as number), CONTEXT))).toBe('tampered');
  });

  test('a flipped IV as tampered', () => {
    const parts = token.split('.');
    const iv = Buffer.from(parts[2], 'base64url');
    iv[0] ^= 0x01;
    parts[2] = iv.toString('base64url');
    expect(reasonOf(() => sealer.open(parts.join('.'), CONTEXT))).toBe('tampered');
  });

  test('a ciphertext swapped in from another token as tampered', () => {
    const other = sealer.seal('another secret', CONTEXT).split('.');
    const parts = token.split('.');
    parts[3] = other[3];
    expect(reasonOf(() => sealer.open(parts.join('.'), CONTEXT))).toBe('tampered');
  });

  const [, id, iv, body] = token.split('.');
  test.each([
    ['empty', ''],
    ['garbage', 'not a sealed value'],
    ['plaintext', 'the secret'],
    ['three parts', `v1.${id}.${iv}`],
    ['five parts', `${token}.x`],
    ['another version', `v2.${id}.${iv}.${body}`],
    ['a bad key id', `v1.XYZ.${iv}.${body}`],
    ['a short key id', `v1.${id.slice(0, 8)}.${iv}.${body}`],
    ['an IV that is not base64url', `v1.${id}.${iv.slice(0, -1)}+.${body}`],
    ['an IV of the wrong length', `v1.${id}.${Buffer.alloc(16).toString('base64url')}.${body}`],
    ['an empty IV', `v1.${id}..${body}`],
    ['padded base64', `v1.${id}.${iv}.${body}==`],
    ['an empty ciphertext', `v1.${id}.${iv}.`],
    ['a body shorter than the tag', `v1.${id}.${iv}.${body.slice(0, 10)}`],
    ['truncated mid-token', token.slice(0, 30)],
  ])('%s as malformed', (_name, text) => {
    expect(reasonOf(() => sealer.open(text, CONTEXT))).toBe('malformed');
  });

  test('a truncated body that still holds a tag as tampered', () => {
    const parts = token.split('.');
    parts[3] = Buffer.from(parts[3], 'base64url').subarray(1).toString('base64url');
    expect(reasonOf(() => sealer.open(parts.join('.'), CONTEXT))).toBe('tampered');
  });

  test('a non-string as malformed', () => {
    expect(reasonOf(() => sealer.open(undefined as unknown as string, CONTEXT))).toBe('malformed');
  });

  test('no error message holds the plaintext or the key material', () => {
    const secret = 'very-secret-value-123';
    const sealed = sealer.seal(secret, CONTEXT);
    const errors = [
      errorOf(() => sealer.open(sealed, 'wrong')),
      errorOf(() => otherKey.open(sealed, CONTEXT)),
      errorOf(() => sealer.open(sealed.slice(0, -40), CONTEXT)),
      errorOf(() => sealer.open(flipCiphertextChar(sealed, 2), CONTEXT)),
    ];
    for (const err of errors) {
      expect(err).toBeInstanceOf(SealError);
      for (const text of [err.message, String(err.stack), JSON.stringify(err)]) {
        expect(text).not.toContain(secret);
        expect(text).not.toContain(KEY);
        expect(text).not.toContain(SALT);
        expect(text).not.toContain(OTHER_KEY);
      }
    }
  });
});

describe('context and input checks', () => {
  test('an empty or non-string context is a programming error, not a seal', () => {
    expect(() => sealer.seal('x', '')).toThrow(TypeError);
    expect(() => sealer.open(sealer.seal('x', 'c'), '')).toThrow(TypeError);
    expect(() => sealer.seal('x', undefined as unknown as string)).toThrow(TypeError);
  });

  test('only strings are sealed', () => {
    expect(() => sealer.seal(42 as unknown as string, CONTEXT)).toThrow(TypeError);
  });
});

describe('createSealer settings', () => {
  test.each([
    ['a key under 32 characters', { key: 'k'.repeat(31), salt: SALT }, ENCRYPTION_KEY_VARIABLE, /at least 32/],
    ['a salt under 16 characters', { key: KEY, salt: 's'.repeat(15) }, ENCRYPTION_SALT_VARIABLE, /at least 16/],
    ['a key with a trailing newline', { key: `${KEY}\n`, salt: SALT }, ENCRYPTION_KEY_VARIABLE, /whitespace/],
    ['a salt with a leading space', { key: KEY, salt: ` ${SALT}` }, ENCRYPTION_SALT_VARIABLE, /whitespace/],
    // 31 code points, 62 UTF-16 units: length is counted in characters, not code units.
    ['a key of 31 astral characters', { key: '🔑'.repeat(31), salt: SALT }, ENCRYPTION_KEY_VARIABLE, /at least 32/],
  ])('refuses %s, naming the variable', (_name, settings, variable, pattern) => {
    const err = errorOf(() => createSealer(settings)) as SealConfigError;
    expect(err).toBeInstanceOf(SealConfigError);
    expect(err.variable).toBe(variable);
    expect(err.message).toContain(variable);
    expect(err.message).toMatch(pattern);
    expect(err.message).not.toContain(settings.key.trim());
  });
});

describe('sealerFromEnvironment', () => {
  test('neither set (or both empty) is no sealer', () => {
    expect(sealerFromEnvironment({})).toBeUndefined();
    expect(sealerFromEnvironment({ [ENCRYPTION_KEY_VARIABLE]: '', [ENCRYPTION_SALT_VARIABLE]: '' })).toBeUndefined();
    expect(sealerFromEnvironment({ UNRELATED: 'x' })).toBeUndefined();
  });

  test('both set is the sealer for that key and salt', () => {
    const fromEnv = sealerFromEnvironment({ [ENCRYPTION_KEY_VARIABLE]: KEY, [ENCRYPTION_SALT_VARIABLE]: SALT });
    expect(fromEnv?.keyId).toBe(sealer.keyId);
    expect(fromEnv?.open(sealer.seal('from env', CONTEXT), CONTEXT)).toBe('from env');
  });

  test.each([
    ['only the key', { [ENCRYPTION_KEY_VARIABLE]: KEY }, ENCRYPTION_SALT_VARIABLE],
    ['only the key, the salt empty', { [ENCRYPTION_KEY_VARIABLE]: KEY, [ENCRYPTION_SALT_VARIABLE]: '' }, ENCRYPTION_SALT_VARIABLE],
    ['only the salt', { [ENCRYPTION_SALT_VARIABLE]: SALT }, ENCRYPTION_KEY_VARIABLE],
    ['a short key', { [ENCRYPTION_KEY_VARIABLE]: 'short', [ENCRYPTION_SALT_VARIABLE]: SALT }, ENCRYPTION_KEY_VARIABLE],
    ['a short salt', { [ENCRYPTION_KEY_VARIABLE]: KEY, [ENCRYPTION_SALT_VARIABLE]: 'short' }, ENCRYPTION_SALT_VARIABLE],
  ])('a half-configured pair (%s) throws naming the variable', (_name, env, variable) => {
    const err = errorOf(() => sealerFromEnvironment(env)) as SealConfigError;
    expect(err).toBeInstanceOf(SealConfigError);
    expect(err.variable).toBe(variable);
    expect(err.message).toContain(variable);
    expect(err.message).not.toContain(KEY);
    expect(err.message).not.toContain(SALT);
  });
});
