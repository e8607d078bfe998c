import type { FederationKey, FederationKeyState, PublicJwk } from '../core/federation/keys';
import type { Db } from './db';

/** Federation signing keys (schema/031_federation.sql). The sealed private half is read only by `signingKeyRow`. */

const COLUMNS = ['id', 'public_jwk', 'state', 'created_at', 'activated_at', 'retired_at', 'removed_at'];

/** Every key, oldest first; with `states`, only keys in them. */
export async function listFederationKeys(db: Db, states?: readonly FederationKeyState[]): Promise<FederationKey[]> {
  const where = states ? db`WHERE state = ANY(${states as string[]})` : db``;
  return db<FederationKey[]>`SELECT ${db(COLUMNS)} FROM federation_keys ${where} ORDER BY created_at, id`;
}

/** The key that signs now, with its sealed private half; undefined when none does. */
export async function signingKeyRow(db: Db): Promise<(FederationKey & { private_jwk_sealed: string }) | undefined> {
  const [row] = await db<(FederationKey & { private_jwk_sealed: string })[]>`
    SELECT ${db(COLUMNS)}, private_jwk_sealed FROM federation_keys WHERE state = 'signing'`;
  return row;
}

export async function insertFederationKey(
  db: Db,
  key: { id: string; public_jwk: PublicJwk; private_jwk_sealed: string; state: 'next' | 'signing'; at: Date },
): Promise<void> {
  await db`
    INSERT INTO federation_keys (id, public_jwk, private_jwk_sealed, state, created_at, activated_at)
    VALUES (${key.id}, ${db.json(key.public_jwk as never)}, ${key.private_jwk_sealed}, ${key.state}, ${key.at},
            ${key.state === 'signing' ? key.at : null})`;
}

/** The signing key stops signing (it stays published); true when it was signing. */
export async function retireKey(db: Db, id: string, at: Date): Promise<boolean> {
  const rows = await db`UPDATE federation_keys SET state = 'retired', retired_at = ${at} WHERE id = ${id} AND state = 'signing' RETURNING id`;
  return rows.length > 0;
}

/** A key published ahead starts signing; true when it was waiting. */
export async function activateKey(db: Db, id: string, at: Date): Promise<boolean> {
  const rows = await db`UPDATE federation_keys SET state = 'signing', activated_at = ${at} WHERE id = ${id} AND state = 'next' RETURNING id`;
  return rows.length > 0;
}

/**
 * Keys leave the published set, their private halves erased: those named (when still in one of
 * `from`), or with `except`, every key not yet removed but that one. A key that signed and never retired is given
 * its retirement time too. Answers the ids removed.
 */
export async function removeKeys(db: Db, at: Date, which: { ids: string[]; from: FederationKeyState[] } | { except: string }): Promise<string[]> {
  const where = 'ids' in which ? db`id = ANY(${which.ids}) AND state = ANY(${which.from})` : db`id <> ${which.except} AND state <> 'removed'`;
  const rows = await db<{ id: string }[]>`
    UPDATE federation_keys
       SET state = 'removed', removed_at = ${at}, private_jwk_sealed = NULL,
           retired_at = CASE WHEN activated_at IS NOT NULL THEN COALESCE(retired_at, ${at}) END
     WHERE ${where}
    RETURNING id`;
  return rows.map((r) => r.id);
}
