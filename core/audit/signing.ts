import { loadJose } from '../jose';
import { createPrivateKey, createPublicKey, sign as cryptoSign, verify as cryptoVerify, type KeyObject } from 'node:crypto';
import { canonicalJson } from './canonical';

/**
 * Signed documents: receipts, bundles, anchors and licenses are compact JWS (RFC 7515) signed with
 * Ed25519 (RFC 8037, `alg: EdDSA`), whose payload is the RFC 8785 canonical JSON of a JSON object.
 *
 * Protected header, exactly `{alg: "EdDSA", kid, typ: "cairn-document+jws"}`:
 * - `kid` is the RFC 7638 SHA-256 thumbprint (base64url) of the signing key's public JWK, so a key
 *   names itself and a verifier can tell "signed by another key" from "tampered with";
 * - `typ` marks the token as a Cairn document so it is never mistaken for a JWT or another
 *   protocol's JWS signed by the same key.
 *
 * Verification trusts nothing it is handed: the alg is EdDSA or refused (no `none`, no HMAC with a
 * public key as the secret), no header parameter beyond the three is accepted, every segment must
 * be canonical base64url (so no unused bits can change unnoticed), and the signed payload must be
 * byte-for-byte the canonical form of the object it parses to, so a verified document has exactly
 * one serialisation and two verifiers can never disagree about what was signed.
 *
 * `jose` makes keys and names them (RFC 7638 thumbprints); it is an ECMAScript module only, which
 * this CommonJS project loads with `import()`, once, on first use. The Ed25519 operation itself
 * runs on node:crypto over the JWS signing input: a bundle's payload is tens of megabytes, which
 * node:crypto signs in a fraction of a second where jose's portable base64url takes seconds.
 * Canonical JSON is Cairn's one serializer, core/canonical.ts.
 */


/** The one signature algorithm Cairn signs and accepts. */
export const SIGNING_ALG = 'EdDSA';
/** The `typ` header of every Cairn signed document. */
export const SIGNED_DOCUMENT_TYP = 'cairn-document+jws';

/** An Ed25519 key as a JWK (RFC 8037). `d` is present only on a private key. */
export interface Ed25519Jwk {
  kty: 'OKP';
  crv: 'Ed25519';
  x: string;
  d?: string;
  kid?: string;
  alg?: 'EdDSA';
  use?: 'sig';
}

export interface SigningKey {
  /** Keep secret; holds `d`. */
  privateJwk: Ed25519Jwk;
  /** Safe to publish (seal document, JWKS); carries `kid`, `alg` and `use`. */
  publicJwk: Ed25519Jwk;
  /** RFC 7638 SHA-256 thumbprint of the public key, base64url. */
  keyId: string;
}

/** Why a document could not be signed or verified; `reason` lets callers say where it failed. */
export type SignatureFailure =
  | 'malformed' // not a compact JWS, bad base64url, header not JSON
  | 'algorithm' // alg other than EdDSA
  | 'type' // typ other than ours
  | 'header' // a header parameter we never write (crit, b64, jku, ...)
  | 'key_id' // kid missing or not the given key's thumbprint
  | 'key' // the key itself is not a usable Ed25519 JWK
  | 'signature' // the signature does not verify
  | 'payload'; // payload not a JSON object in canonical form

export class SignatureError extends Error {
  constructor(
    readonly reason: SignatureFailure,
    message: string,
  ) {
    super(message);
    this.name = 'SignatureError';
  }
}

const BASE64URL = /^[A-Za-z0-9_-]*$/;
const ED25519_KEY_BYTES = 32;
const ALLOWED_HEADER = new Set(['alg', 'kid', 'typ']);
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** A new Ed25519 key pair, named by its thumbprint. */
export async function generateSigningKey(): Promise<SigningKey> {
  const j = await loadJose();
  const { privateKey } = await j.generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  const exported = await j.exportJWK(privateKey);
  const privateJwk = checkJwk(exported, 'private');
  const keyId = await thumbprint(privateJwk);
  return {
    privateJwk: { kty: 'OKP', crv: 'Ed25519', x: privateJwk.x, d: privateJwk.d },
    publicJwk: { kty: 'OKP', crv: 'Ed25519', x: privateJwk.x, kid: keyId, alg: 'EdDSA', use: 'sig' },
    keyId,
  };
}

/** RFC 7638 SHA-256 thumbprint (base64url) of an Ed25519 JWK, public or private. */
export async function jwkThumbprint(jwk: object): Promise<string> {
  return thumbprint(checkJwk(jwk, 'public or private'));
}

/** RFC 8785 canonical JSON of a JSON object; refuses values JSON cannot carry exactly. */
function canonicalPayload(payload: object): string {
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) {
    throw new SignatureError('payload', 'a signed document must be a JSON object');
  }
  try {
    return canonicalJson(payload);
  } catch (error) {
    throw new SignatureError('payload', `the document cannot be written as canonical JSON: ${(error as Error).message}`);
  }
}

/** Signs the canonical JSON of `payload` with an Ed25519 private key whose thumbprint is `keyId`. */
export async function signDocument(payload: object, privateJwk: object, keyId: string): Promise<string> {
  const jwk = checkJwk(privateJwk, 'private');
  const actualKeyId = await thumbprint(jwk);
  // A mismatched kid would produce documents no verifier accepts; refuse now rather than later.
  if (keyId !== actualKeyId) {
    throw new SignatureError('key_id', `key id ${JSON.stringify(keyId)} is not the signing key's thumbprint (${actualKeyId})`);
  }
  const text = canonicalPayload(payload);
  const key = keyObject(jwk, 'private');
  const header = Buffer.from(JSON.stringify({ alg: SIGNING_ALG, kid: keyId, typ: SIGNED_DOCUMENT_TYP })).toString('base64url');
  const signingInput = `${header}.${Buffer.from(text, 'utf8').toString('base64url')}`;
  return `${signingInput}.${cryptoSign(null, Buffer.from(signingInput, 'ascii'), key).toString('base64url')}`;
}

/**
 * Verifies a compact JWS against one Ed25519 public key and returns its payload and key id.
 * Throws a `SignatureError` naming the first check that failed.
 */
export async function verifyDocument(jws: string, publicJwk: object): Promise<{ payload: Record<string, unknown>; keyId: string }> {
  const jwk = checkJwk(publicJwk, 'public');
  if (typeof jws !== 'string') throw new SignatureError('malformed', 'a signed document must be a string');
  const segments = jws.split('.');
  if (segments.length !== 3) {
    throw new SignatureError('malformed', `a signed document is three base64url segments joined by '.', found ${segments.length}`);
  }
  const [headerPart, payloadPart, signaturePart] = segments as [string, string, string];
  const headerBytes = decodeSegment(headerPart, 'header');
  const payloadBytes = decodeSegment(payloadPart, 'payload');
  decodeSegment(signaturePart, 'signature');

  const header = parseJsonObject(headerBytes, 'malformed', 'header');
  if (header.alg !== SIGNING_ALG) {
    throw new SignatureError('algorithm', `algorithm ${JSON.stringify(header.alg ?? null)} is not accepted; only ${SIGNING_ALG} is`);
  }
  if (header.typ !== SIGNED_DOCUMENT_TYP) {
    throw new SignatureError('type', `type ${JSON.stringify(header.typ ?? null)} is not a Cairn signed document (${SIGNED_DOCUMENT_TYP})`);
  }
  const extra = Object.keys(header).filter((name) => !ALLOWED_HEADER.has(name));
  if (extra.length > 0) {
    throw new SignatureError('header', `unexpected header parameter ${extra.map((n) => JSON.stringify(n)).join(', ')}`);
  }
  if (typeof header.kid !== 'string' || header.kid === '') {
    throw new SignatureError('key_id', 'the header names no key id (kid)');
  }
  const keyId = await thumbprint(jwk);
  if (header.kid !== keyId) {
    throw new SignatureError('key_id', `the document names signing key ${JSON.stringify(header.kid)}, not the given key ${keyId}`);
  }

  const key = keyObject(jwk, 'public');
  const signingInput = Buffer.from(jws.slice(0, headerPart.length + 1 + payloadPart.length), 'ascii');
  if (!cryptoVerify(null, signingInput, key, Buffer.from(signaturePart, 'base64url'))) {
    throw new SignatureError('signature', `the signature does not verify with key ${keyId}`);
  }

  // Signed, but only one serialisation of a document is ever valid.
  const payload = parseJsonObject(payloadBytes, 'payload', 'payload');
  const canonical = canonicalPayload(payload);
  if (!Buffer.from(canonical, 'utf8').equals(payloadBytes)) {
    throw new SignatureError('payload', 'the signed payload is not in RFC 8785 canonical form');
  }
  return { payload, keyId };
}

/**
 * The key id a document claims, without verifying anything: for choosing among trusted keys and
 * for messages. `undefined` when the text is not a JWS with a string `kid`.
 */
export function documentKeyId(jws: string): string | undefined {
  if (typeof jws !== 'string') return undefined;
  const headerPart = jws.split('.')[0] ?? '';
  try {
    const header = parseJsonObject(decodeSegment(headerPart, 'header'), 'malformed', 'header');
    return typeof header.kid === 'string' ? header.kid : undefined;
  } catch {
    return undefined;
  }
}

function decodeSegment(segment: string, name: string): Buffer {
  // Buffer's decoder skips characters it does not know and ignores unused trailing bits, so check
  // the alphabet and that re-encoding gives the same text.
  if (!BASE64URL.test(segment)) throw new SignatureError('malformed', `the ${name} segment is not base64url`);
  if (segment === '') throw new SignatureError('malformed', `the ${name} segment is empty`);
  const bytes = Buffer.from(segment, 'base64url');
  if (bytes.toString('base64url') !== segment) {
    throw new SignatureError('malformed', `the ${name} segment is not canonical base64url`);
  }
  return bytes;
}

function parseJsonObject(bytes: Buffer, reason: SignatureFailure, name: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(strictUtf8.decode(bytes));
  } catch {
    throw new SignatureError(reason, `the ${name} is not UTF-8 JSON`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new SignatureError(reason, `the ${name} is not a JSON object`);
  }
  return value as Record<string, unknown>;
}

function checkJwk(value: unknown, kind: 'public' | 'private' | 'public or private'): Ed25519Jwk {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new SignatureError('key', `the ${kind} key is not a JWK object`);
  }
  const jwk = value as Record<string, unknown>;
  if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519') {
    throw new SignatureError('key', `the ${kind} key is not an Ed25519 key (kty OKP, crv Ed25519)`);
  }
  if (!isKeyBytes(jwk.x)) throw new SignatureError('key', `the ${kind} key's x is not 32 bytes of base64url`);
  if (kind === 'private' && !isKeyBytes(jwk.d)) {
    throw new SignatureError('key', "the private key's d is missing or not 32 bytes of base64url");
  }
  // A private key in a trust list is a leak waiting to happen; make the caller pass the public half.
  if (kind === 'public' && jwk.d !== undefined) {
    throw new SignatureError('key', 'a private key was given where a public key is expected');
  }
  return { kty: 'OKP', crv: 'Ed25519', x: jwk.x as string, ...(typeof jwk.d === 'string' ? { d: jwk.d } : {}) };
}

function isKeyBytes(value: unknown): value is string {
  return (
    typeof value === 'string' &&
    BASE64URL.test(value) &&
    Buffer.from(value, 'base64url').length === ED25519_KEY_BYTES &&
    Buffer.from(value, 'base64url').toString('base64url') === value
  );
}

async function thumbprint(jwk: Ed25519Jwk): Promise<string> {
  const j = await loadJose();
  return j.calculateJwkThumbprint({ kty: jwk.kty, crv: jwk.crv, x: jwk.x }, 'sha256');
}

function keyObject(jwk: Ed25519Jwk, kind: 'public' | 'private'): KeyObject {
  try {
    const material = { key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, ...(kind === 'private' ? { d: jwk.d } : {}) }, format: 'jwk' as const };
    return kind === 'private' ? createPrivateKey(material) : createPublicKey(material);
  } catch (error) {
    throw new SignatureError('key', `the key cannot be used for Ed25519: ${(error as Error).message}`);
  }
}
