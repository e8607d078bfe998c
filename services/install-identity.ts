import { newId } from '../core/ids';
import { generateSigningKey, signDocument, type Ed25519Jwk } from '../core/signing';
import type { Sql } from '../store/db';
import { getSetting, insertSettingOnce } from '../store/settings';

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
  private_jwk: Ed25519Jwk;
  public_jwk: Ed25519Jwk;
  created_at: string;
}

const SETTING = 'install_identity';

export async function loadInstallIdentity(sql: Sql): Promise<InstallIdentity> {
  let stored = await getSetting<StoredIdentity>(sql, SETTING);
  if (!stored) {
    const key = await generateSigningKey();
    // Two servers starting at once both try; the first write wins and both read it back.
    await insertSettingOnce(sql, SETTING, {
      install_id: newId('ins'),
      key_id: key.keyId,
      private_jwk: key.privateJwk,
      public_jwk: key.publicJwk,
      created_at: new Date().toISOString(),
    } satisfies StoredIdentity);
    stored = (await getSetting<StoredIdentity>(sql, SETTING))!;
  }
  const { install_id, key_id, private_jwk, public_jwk } = stored;
  return {
    installId: install_id,
    keyId: key_id,
    publicJwk: public_jwk,
    sign: (payload) => signDocument(payload, private_jwk, key_id),
  };
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
