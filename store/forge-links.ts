import type { Db } from './db';

/** A linked forge account (schema/034). */
export interface ForgeLink {
  id: string;
  account_id: string;
  forge: string;
  forge_url: string;
  forge_user_id: string;
  login: string;
  created_at: Date;
}

/** A link under way, found by the browser's cookie. */
export interface PendingForgeLink {
  state: string;
  code_verifier: string;
  account_id: string;
  forge: string;
  expires_at: Date;
}

export async function insertPendingForgeLink(db: Db, bindingHash: Buffer, start: PendingForgeLink): Promise<void> {
  await db`DELETE FROM forge_link_starts WHERE expires_at < now()`;
  await db`
    INSERT INTO forge_link_starts (binding_hash, state, code_verifier, account_id, forge, expires_at)
    VALUES (${bindingHash}, ${start.state}, ${start.code_verifier}, ${start.account_id}, ${start.forge}, ${start.expires_at})`;
}

/** Takes the link this cookie started, deleting it in the same statement: a callback finishes it once. */
export async function takePendingForgeLink(db: Db, bindingHash: Buffer): Promise<PendingForgeLink | undefined> {
  const [row] = await db<PendingForgeLink[]>`
    DELETE FROM forge_link_starts WHERE binding_hash = ${bindingHash}
    RETURNING state, code_verifier, account_id, forge, expires_at`;
  return row;
}

export async function listForgeLinks(db: Db, accountId: string): Promise<ForgeLink[]> {
  return db<ForgeLink[]>`SELECT * FROM forge_links WHERE account_id = ${accountId} ORDER BY created_at, id`;
}

export async function forgeLinkOf(db: Db, forge: string, forgeUrl: string, forgeUserId: string): Promise<ForgeLink | undefined> {
  const [row] = await db<ForgeLink[]>`SELECT * FROM forge_links WHERE forge = ${forge} AND forge_url = ${forgeUrl} AND forge_user_id = ${forgeUserId}`;
  return row;
}

/** Records a link; undefined when that forge account is linked already (to anyone). */
export async function insertForgeLink(db: Db, link: Omit<ForgeLink, 'created_at'>): Promise<ForgeLink | undefined> {
  const [row] = await db<ForgeLink[]>`
    INSERT INTO forge_links (id, account_id, forge, forge_url, forge_user_id, login)
    VALUES (${link.id}, ${link.account_id}, ${link.forge}, ${link.forge_url}, ${link.forge_user_id}, ${link.login})
    ON CONFLICT (forge, forge_url, forge_user_id) DO NOTHING
    RETURNING *`;
  return row;
}

/** Deletes one of this account's links; the link deleted, or undefined. */
export async function deleteForgeLink(db: Db, accountId: string, id: string): Promise<ForgeLink | undefined> {
  const [row] = await db<ForgeLink[]>`DELETE FROM forge_links WHERE id = ${id} AND account_id = ${accountId} RETURNING *`;
  return row;
}
