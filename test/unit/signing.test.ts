import { createHash, createHmac, createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';
import {
  SIGNED_DOCUMENT_TYP,
  SignatureError,
  documentKeyId,
  generateSigningKey,
  jwkThumbprint,
  signDocument,
  verifyDocument,
  type SigningKey,
} from '../../core/audit/signing';

// Tokens below are forged with node:crypto, not with the code under test, so a verifier that
// merely agrees with its own signer cannot pass.

const b64 = (data: string | Buffer): string => Buffer.from(data).toString('base64url');

function forgeEd25519(header: object, payloadText: string, privateJwk: object): string {
  const input = `${b64(JSON.stringify(header))}.${b64(payloadText)}`;
  const key = createPrivateKey({ key: privateJwk as never, format: 'jwk' });
  return `${input}.${b64(sign(null, Buffer.from(input), key))}`;
}

async function refusal(promise: Promise<unknown>): Promise<SignatureError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(SignatureError);
    return error as SignatureError;
  }
  throw new Error('expected the document to be refused');
}

const document = { run_id: 'run_01', outcome: { status: 'succeeded', exit: 0 }, note: 'héllo ✓', sizes: [1, 2.5, 1e21] };
// RFC 8785: keys sorted by UTF-16 code units, no whitespace, ES number formatting.
const canonicalText = '{"note":"héllo ✓","outcome":{"exit":0,"status":"succeeded"},"run_id":"run_01","sizes":[1,2.5,1e+21]}';

let key: SigningKey;
let other: SigningKey;
let jws: string;

beforeAll(async () => {
  key = await generateSigningKey();
  other = await generateSigningKey();
  jws = await signDocument(document, key.privateJwk, key.keyId);
});

describe('generateSigningKey', () => {
  test('key id is the RFC 7638 SHA-256 thumbprint of the public key', async () => {
    const { x } = key.publicJwk;
    const expected = createHash('sha256').update(`{"crv":"Ed25519","kty":"OKP","x":"${x}"}`).digest('base64url');
    expect(key.keyId).toBe(expected);
    expect(key.publicJwk).toEqual({ kty: 'OKP', crv: 'Ed25519', x, kid: key.keyId, alg: 'EdDSA', use: 'sig' });
    expect(key.privateJwk.d).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(other.keyId).not.toBe(key.keyId);
  });

  test('thumbprint matches the RFC 8037 appendix A.3 example', async () => {
    const rfcKey = { kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo' };
    expect(await jwkThumbprint(rfcKey)).toBe('kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k');
  });
});

describe('signDocument and verifyDocument', () => {
  test('round trip returns the document and the key id', async () => {
    const result = await verifyDocument(jws, key.publicJwk);
    expect(result).toEqual({ payload: document, keyId: key.keyId });
  });

  test('header is exactly alg EdDSA, kid and the Cairn typ; payload is the canonical JSON', () => {
    const [header, payload] = jws.split('.') as [string, string, string];
    expect(JSON.parse(Buffer.from(header, 'base64url').toString())).toEqual({ alg: 'EdDSA', kid: key.keyId, typ: SIGNED_DOCUMENT_TYP });
    expect(SIGNED_DOCUMENT_TYP).toBe('cairn-document+jws');
    expect(Buffer.from(payload, 'base64url').toString('utf8')).toBe(canonicalText);
    expect(documentKeyId(jws)).toBe(key.keyId);
  });

  test('the signature is plain Ed25519 over the signing input, checkable without jose', () => {
    const [header, payload, signature] = jws.split('.') as [string, string, string];
    const publicKey = createPublicKey({ key: key.publicJwk as never, format: 'jwk' });
    expect(verify(null, Buffer.from(`${header}.${payload}`), publicKey, Buffer.from(signature, 'base64url'))).toBe(true);
  });

  test('a standard JOSE library (jose) accepts the document and reads the same payload', async () => {
    const jose = await import('jose');
    const publicKey = await jose.importJWK(key.publicJwk as never, 'EdDSA');
    const { payload, protectedHeader } = await jose.compactVerify(jws, publicKey, { algorithms: ['EdDSA'] });
    expect(new TextDecoder().decode(payload)).toBe(canonicalText);
    expect(protectedHeader).toEqual({ alg: 'EdDSA', kid: key.keyId, typ: SIGNED_DOCUMENT_TYP });
  });

  test('key order of the input does not change the signed document', async () => {
    const reordered = { sizes: [1, 2.5, 1e21], run_id: 'run_01', note: 'héllo ✓', outcome: { exit: 0, status: 'succeeded' } };
    // Ed25519 is deterministic, so equal canonical bytes give an equal token.
    expect(await signDocument(reordered, key.privateJwk, key.keyId)).toBe(jws);
  });

  test('a one-character change anywhere in the token is refused', async () => {
    const accepted: number[] = [];
    for (let i = 0; i < jws.length; i++) {
      const replacement = jws[i] === 'A' ? 'B' : 'A';
      const tampered = jws.slice(0, i) + replacement + jws.slice(i + 1);
      try {
        await verifyDocument(tampered, key.publicJwk);
        accepted.push(i);
      } catch (error) {
        expect(error).toBeInstanceOf(SignatureError);
      }
    }
    expect(accepted).toEqual([]);
  });

  test('changing only the unused bits of the last signature character is refused', async () => {
    // 64 signature bytes leave 4 unused bits in the last base64url character.
    const last = jws[jws.length - 1]!;
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const index = alphabet.indexOf(last);
    const sibling = alphabet[(index & ~0b1111) | ((index + 1) & 0b1111)]!;
    const tampered = jws.slice(0, -1) + sibling;
    expect(Buffer.from(tampered.split('.')[2]!, 'base64url')).toEqual(Buffer.from(jws.split('.')[2]!, 'base64url'));
    const error = await refusal(verifyDocument(tampered, key.publicJwk));
    expect(error.reason).toBe('malformed');
    expect(error.message).toMatch(/signature segment is not canonical base64url/);
  });

  test.each([
    ['different key order', '{"run_id":"run_01","note":"héllo ✓","outcome":{"exit":0,"status":"succeeded"},"sizes":[1,2.5,1e+21]}'],
    ['added whitespace', JSON.stringify(JSON.parse(canonicalText), null, 2)],
    ['a different number spelling', canonicalText.replace('1e+21', '1000000000000000000000')],
    ['an escaped character', canonicalText.replace('é', '\\u00e9')],
  ])('a correctly signed payload re-serialised with %s is refused', async (_what, payloadText) => {
    expect(JSON.parse(payloadText)).toEqual(JSON.parse(canonicalText));
    const forged = forgeEd25519({ alg: 'EdDSA', kid: key.keyId, typ: SIGNED_DOCUMENT_TYP }, payloadText, key.privateJwk);
    const error = await refusal(verifyDocument(forged, key.publicJwk));
    expect(error.reason).toBe('payload');
    expect(error.message).toMatch(/not in RFC 8785 canonical form/);
  });

  test('the forger itself is sound: the canonical payload forged the same way verifies', async () => {
    const forged = forgeEd25519({ alg: 'EdDSA', kid: key.keyId, typ: SIGNED_DOCUMENT_TYP }, canonicalText, key.privateJwk);
    expect(forged).toBe(jws);
    await expect(verifyDocument(forged, key.publicJwk)).resolves.toEqual({ payload: document, keyId: key.keyId });
  });

  test('an unsigned token (alg none) is refused', async () => {
    const unsigned = `${b64(JSON.stringify({ alg: 'none', kid: key.keyId, typ: SIGNED_DOCUMENT_TYP }))}.${b64(canonicalText)}`;
    const empty = await refusal(verifyDocument(`${unsigned}.`, key.publicJwk));
    expect(empty.message).toBe('the signature segment is empty');
    // Even with some signature attached, alg none is refused for what it is.
    const error = await refusal(verifyDocument(`${unsigned}.${jws.split('.')[2]}`, key.publicJwk));
    expect(error.reason).toBe('algorithm');
    expect(error.message).toBe('algorithm "none" is not accepted; only EdDSA is');
  });

  test('an HS256 token keyed with the public key bytes is refused', async () => {
    const input = `${b64(JSON.stringify({ alg: 'HS256', kid: key.keyId, typ: SIGNED_DOCUMENT_TYP }))}.${b64(canonicalText)}`;
    for (const secret of [Buffer.from(key.publicJwk.x, 'base64url'), Buffer.from(JSON.stringify(key.publicJwk))]) {
      const token = `${input}.${b64(createHmac('sha256', secret).update(input).digest())}`;
      const error = await refusal(verifyDocument(token, key.publicJwk));
      expect(error.reason).toBe('algorithm');
      expect(error.message).toMatch(/"HS256" is not accepted/);
    }
  });

  test('the fully-specified Ed25519 alg name is refused too: EdDSA only', async () => {
    const forged = forgeEd25519({ alg: 'Ed25519', kid: key.keyId, typ: SIGNED_DOCUMENT_TYP }, canonicalText, key.privateJwk);
    expect((await refusal(verifyDocument(forged, key.publicJwk))).reason).toBe('algorithm');
  });

  test('a wrong or missing kid is refused, even when the signature is good', async () => {
    const wrong = forgeEd25519({ alg: 'EdDSA', kid: other.keyId, typ: SIGNED_DOCUMENT_TYP }, canonicalText, key.privateJwk);
    const error = await refusal(verifyDocument(wrong, key.publicJwk));
    expect(error.reason).toBe('key_id');
    expect(error.message).toContain(other.keyId);

    const missing = forgeEd25519({ alg: 'EdDSA', typ: SIGNED_DOCUMENT_TYP }, canonicalText, key.privateJwk);
    expect((await refusal(verifyDocument(missing, key.publicJwk))).message).toMatch(/names no key id/);
  });

  test('a document signed by a different key is refused', async () => {
    const error = await refusal(verifyDocument(jws, other.publicJwk));
    expect(error.reason).toBe('key_id');
    expect(error.message).toBe(`the document names signing key "${key.keyId}", not the given key ${other.keyId}`);

    // Claiming the other key's id does not help: the signature is then checked and fails.
    const claimed = forgeEd25519({ alg: 'EdDSA', kid: other.keyId, typ: SIGNED_DOCUMENT_TYP }, canonicalText, key.privateJwk);
    const forged = await refusal(verifyDocument(claimed, other.publicJwk));
    expect(forged.reason).toBe('signature');
    expect(forged.message).toMatch(/signature does not verify/);
  });

  test('another typ and unexpected header parameters are refused', async () => {
    const jwt = forgeEd25519({ alg: 'EdDSA', kid: key.keyId, typ: 'JWT' }, canonicalText, key.privateJwk);
    expect((await refusal(verifyDocument(jwt, key.publicJwk))).reason).toBe('type');
    const crit = forgeEd25519({ alg: 'EdDSA', kid: key.keyId, typ: SIGNED_DOCUMENT_TYP, b64: false, crit: ['b64'] }, canonicalText, key.privateJwk);
    const error = await refusal(verifyDocument(crit, key.publicJwk));
    expect(error.reason).toBe('header');
    expect(error.message).toBe('unexpected header parameter "b64", "crit"');
  });

  test.each([
    ['', /three base64url segments/],
    ['not a token', /three base64url segments/],
    ['a.b', /three base64url segments/],
    ['a.b.c.d', /three base64url segments/],
    ['e30.e30.e30 ', /signature segment is not base64url/],
    ['!!.e30.AA', /header segment is not base64url/],
    [`${b64('not json')}.e30.AA`, /header is not UTF-8 JSON/],
    [`${b64('[]')}.e30.AA`, /header is not a JSON object/],
  ])('garbage %j is refused as malformed', async (token, message) => {
    const error = await refusal(verifyDocument(token, key.publicJwk));
    expect(error.reason).toBe('malformed');
    expect(error.message).toMatch(message);
  });

  test('a payload that is not a JSON object is refused, even when signed', async () => {
    const header = { alg: 'EdDSA', kid: key.keyId, typ: SIGNED_DOCUMENT_TYP };
    for (const text of ['[1,2]', '"text"', '{"a":1,"a":1}']) {
      const error = await refusal(verifyDocument(forgeEd25519(header, text, key.privateJwk), key.publicJwk));
      expect(error.reason).toBe('payload');
    }
    await expect(signDocument([1, 2], key.privateJwk, key.keyId)).rejects.toThrow('a signed document must be a JSON object');
    await expect(signDocument({ n: Number.NaN }, key.privateJwk, key.keyId)).rejects.toThrow(/cannot be written as canonical JSON/);
  });

  test('keys: signing with a key id that is not the key, verifying with a private or non-Ed25519 key', async () => {
    const mismatch = await refusal(signDocument(document, key.privateJwk, other.keyId));
    expect(mismatch.reason).toBe('key_id');
    expect(mismatch.message).toContain("is not the signing key's thumbprint");

    const privateAsPublic = await refusal(verifyDocument(jws, key.privateJwk));
    expect(privateAsPublic.message).toBe('a private key was given where a public key is expected');

    const ecKey = { kty: 'EC', crv: 'P-256', x: key.publicJwk.x, y: key.publicJwk.x };
    expect((await refusal(verifyDocument(jws, ecKey))).message).toMatch(/not an Ed25519 key/);
    expect((await refusal(signDocument(document, key.publicJwk, key.keyId))).message).toMatch(/private key's d is missing/);
  });
});
