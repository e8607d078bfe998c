import { type Db, type Page, type PageRequest, readPage } from './db';
import type { Account } from './accounts';

export type TokenKind = 'user' | 'agent' | 'session';

export interface Token {
  id: string;
  account_id: string;
  name: string;
  kind: TokenKind;
  created_by: string;
  created_by_type: string;
  created_at: Date;
  expires_at: Date | null;
  last_used_at: Date | null;
}

const COLUMNS = ['id', 'account_id', 'name', 'kind', 'created_by', 'created_by_type', 'created_at', 'expires_at', 'last_used_at'];

export async function createToken(
  db: Db,
  token: Omit<Token, 'created_at' | 'last_used_at'> & { secret_hash: Buffer },
): Promise<Token> {
  const [row] = await db<Token[]>`
    INSERT INTO tokens (id, account_id, name, kind, secret_hash, created_by, created_by_type, expires_at)
    VALUES (${token.id}, ${token.account_id}, ${token.name}, ${token.kind}, ${token.secret_hash},
            ${token.created_by}, ${token.created_by_type}, ${token.expires_at})
    RETURNING ${db(COLUMNS)}`;
  return row;
}

export async function getToken(db: Db, id: string): Promise<Token | undefined> {
  const [row] = await db<Token[]>`SELECT ${db(COLUMNS)} FROM tokens WHERE id = ${id}`;
  return row;
}

export interface Caller {
  token: Token;
  account: Account;
}

/** Whether the caller acts as an agent (an agent token) or as a person (a user or session token). */
export function actorKindOf(caller: Caller): 'agent' | 'user' {
  return caller.token.kind === 'agent' ? 'agent' : 'user';
}

/** The live token with this secret hash and its account; expired tokens, and a disabled account's, resolve to nothing. */
export async function resolveToken(db: Db, secretHash: Buffer): Promise<Caller | undefined> {
  const [row] = await db`
    SELECT t.id, t.account_id, t.name, t.kind, t.created_by, t.created_by_type, t.created_at, t.expires_at,
           t.last_used_at, a.username, a.role, a.password_hash, a.profile, a.disabled, a.created_at AS account_created_at,
           a.updated_at AS account_updated_at
    FROM tokens t JOIN accounts a ON a.id = t.account_id
    WHERE t.secret_hash = ${secretHash} AND (t.expires_at IS NULL OR t.expires_at > now()) AND NOT a.disabled`;
  if (!row) return undefined;
  return {
    token: {
      id: row.id, account_id: row.account_id, name: row.name, kind: row.kind, created_by: row.created_by,
      created_by_type: row.created_by_type, created_at: row.created_at, expires_at: row.expires_at,
      last_used_at: row.last_used_at,
    },
    account: {
      id: row.account_id, username: row.username, role: row.role, password_hash: row.password_hash,
      profile: row.profile, disabled: row.disabled, created_at: row.account_created_at, updated_at: row.account_updated_at,
    },
  };
}

/** The id an open install's token-less caller carries (services/access/open-install.ts); no token row has it. */
export const OPEN_TOKEN_ID = 'tok_open';

/** How many live tokens the install holds (expired ones do not count). */
export async function liveTokenCount(db: Db): Promise<number> {
  const [row] = await db<{ n: number }[]>`SELECT count(*)::int AS n FROM tokens WHERE expires_at IS NULL OR expires_at > now()`;
  return row.n;
}

/**
 * The caller of an open install's token-less request: its first enabled admin, with a token that
 * exists nowhere, while the install holds no live token at all; otherwise nothing.
 */
export async function openCaller(db: Db): Promise<Caller | undefined> {
  const [row] = await db`
    SELECT a.id, a.username, a.role, a.password_hash, a.profile, a.disabled, a.created_at, a.updated_at
    FROM accounts a
    WHERE a.role = 'admin' AND NOT a.disabled
      AND NOT EXISTS (SELECT 1 FROM tokens WHERE expires_at IS NULL OR expires_at > now())
    ORDER BY a.created_at, a.id LIMIT 1`;
  if (!row) return undefined;
  return {
    token: {
      id: OPEN_TOKEN_ID, account_id: row.id, name: 'open install', kind: 'user', created_by: 'cairn', created_by_type: 'system',
      created_at: row.created_at, expires_at: null, last_used_at: new Date(),
    },
    account: {
      id: row.id, username: row.username, role: row.role, password_hash: row.password_hash,
      profile: row.profile, disabled: row.disabled, created_at: row.created_at, updated_at: row.updated_at,
    },
  };
}

/** Records that a token was used; the caller does this at most about once a minute per token. */
export async function touchToken(db: Db, id: string): Promise<void> {
  await db`UPDATE tokens SET last_used_at = now()
           WHERE id = ${id} AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`;
}

export async function listTokens(
  db: Db,
  page: PageRequest,
): Promise<Page<Token & { username: string }>> {
  return readPage(
    db,
    {
      columns: db`t.id, t.account_id, t.name, t.kind, t.created_by, t.created_by_type, t.created_at, t.expires_at, t.last_used_at, a.username`,
      from: db`tokens t JOIN accounts a ON a.id = t.account_id`,
      idColumn: 't.id',
      order: db`t.id`,
    },
    page,
  );
}

export async function deleteToken(db: Db, id: string): Promise<boolean> {
  const rows = await db`DELETE FROM tokens WHERE id = ${id} RETURNING id`;
  return rows.length > 0;
}
