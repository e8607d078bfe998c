import { SIGNING_KEY_CONTEXT } from '../../core/credentials/seal-contexts';
import { newId } from '../../core/ids';
import { sealedValueFault } from '../../core/runs/run-secrets';
import type { Sealer } from '../../core/credentials/seal';
import { generateSigningKey, signDocument, type Ed25519Jwk } from '../../core/audit/signing';
import type { Sql } from '../../store/db';
import { getSetting, insertSettingOnce, replaceSetting } from '../../store/settings';

/**
 * The install's name and signing key: made on first start, kept in PostgreSQL so every server
 * of the install signs with the same key, and published (public half only) in the seal document.
 */
export interface InstallIdentity {
  installId: string;
  keyId: string;
  publicJwk: Ed25519Jwk;
  /** Signs a Cairn document (compact JWS over canonical JSON) with the install's key. */
  sign(payload: object): Promise<string>;
}

interface StoredIdentity {
  install_id: string;
  key_id: string;
  /** The private key in clear: only on an install without an encryption key. */
  private_jwk?: Ed25519Jwk;
  /** The private key sealed under the install's encryption key and salt. */
  private_jwk_sealed?: string;
  public_jwk: Ed25519Jwk;
  created_at: string;
}

/** The identity could not be loaded as configured; the message names the fix. */
export class InstallIdentityError extends Error {}

const SETTING = 'install_identity';

/** The stored form of a private key: sealed when the install has an encryption key. */
function storedPrivateKey(sealer: Sealer | undefined, jwk: Ed25519Jwk): Pick<StoredIdentity, 'private_jwk' | 'private_jwk_sealed'> {
  return sealer ? { private_jwk_sealed: sealer.seal(JSON.stringify(jwk), SIGNING_KEY_CONTEXT) } : { private_jwk: jwk };
}

function openPrivateKey(sealer: Sealer | undefined, stored: StoredIdentity): Ed25519Jwk {
  if (stored.private_jwk) return stored.private_jwk;
  try {
    if (!sealer) throw new Error('no key');
    return JSON.parse(sealer.open(stored.private_jwk_sealed!, SIGNING_KEY_CONTEXT)) as Ed25519Jwk;
  } catch (err) {
    throw new InstallIdentityError(sealedValueFault("the install's audit signing key", sealer, sealer ? err : undefined));
  }
}

/**
 * Loads (or on first start makes) the install's identity. With an encryption key the private key
 * is kept sealed, so reading the database is not enough to sign as the install; a key stored in
 * clear by an install that had none is sealed on the first start that has one.
 */
export async function loadInstallIdentity(sql: Sql, sealer: Sealer | undefined): Promise<InstallIdentity> {
  let stored = await getSetting<StoredIdentity>(sql, SETTING);
  if (!stored) {
    const key = await generateSigningKey();
    // Two servers starting at once both try; the first write wins and both read it back.
    await insertSettingOnce(sql, SETTING, {
      install_id: newId('ins'),
      key_id: key.keyId,
      ...storedPrivateKey(sealer, key.privateJwk),
      public_jwk: key.publicJwk,
      created_at: new Date().toISOString(),
    } satisfies StoredIdentity);
    stored = (await getSetting<StoredIdentity>(sql, SETTING))!;
  }
  const privateJwk = openPrivateKey(sealer, stored);
  if (sealer && stored.private_jwk) {
    const { private_jwk: _clear, ...rest } = stored;
    await replaceSetting(sql, SETTING, { ...rest, ...storedPrivateKey(sealer, privateJwk) });
  }
  const { install_id, key_id, public_jwk } = stored;
  return {
    installId: install_id,
    keyId: key_id,
    publicJwk: public_jwk,
    sign: (payload) => signDocument(payload, privateJwk, key_id),
  };
}

/**
 * The install's id alone, without opening the signing key: what a worker needs to check a license
 * bound to the install. Undefined until a server has started once and made the identity.
 */
export async function readInstallId(sql: Sql): Promise<string | undefined> {
  return (await getSetting<StoredIdentity>(sql, SETTING))?.install_id;
}

/**
 * How the install's signing key is kept, without opening it: `sealed` under the encryption key,
 * `clear` (an install without one), or `missing` before a server has started once.
 */
export async function signingKeyStorage(sql: Sql): Promise<'sealed' | 'clear' | 'missing'> {
  const stored = await getSetting<StoredIdentity>(sql, SETTING);
  if (!stored) return 'missing';
  return stored.private_jwk_sealed !== undefined && stored.private_jwk === undefined ? 'sealed' : 'clear';
}

/** The public seal document (spec part A 1.1 rule 3): what a relying party pins to verify offline. */
export function sealDocument(identity: InstallIdentity) {
  return {
    service: 'cairn',
    install_id: identity.installId,
    key_id: identity.keyId,
    keys: [identity.publicJwk],
    signature: { alg: 'EdDSA', typ: 'cairn-document+jws', payload: 'RFC 8785 canonical JSON' },
    audit_chain: {
      entry_hash: 'hex SHA-256 of the RFC 8785 canonical JSON of the entry without its hash',
      merkle_tree: 'RFC 9162 over leaves SHA-256(0x00 || entry hash bytes)',
      reason_commitment: 'sha256: + hex SHA-256 of canonical JSON {event, random, reason}',
    },
  };
}
