import type postgres from 'postgres';
import { usernameKey } from '../core/access/username';
import { type Db, isUniqueViolation, type Page, type PageRequest, readPage } from './db';
import { LOCKS, takeLock } from './locks';

export type Role = 'admin' | 'operator' | 'viewer';

export interface Profile {
  full_name?: string;
  email?: string;
  phone?: string;
  title?: string;
  links?: string[];
  notes?: string;
}

export interface Account {
  id: string;
  username: string;
  role: Role;
  password_hash: string | null;
  profile: Profile;
  /** A disabled account signs in no way and its tokens do not work until it is enabled again. */
  disabled: boolean;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = ['id', 'username', 'role', 'password_hash', 'profile', 'disabled', 'created_at', 'updated_at'];

/** Inserts the account with its username key; a name taken under the fold is a unique violation. */
export async function createAccount(
  db: Db,
  account: Pick<Account, 'id' | 'username' | 'role' | 'password_hash' | 'profile'>,
): Promise<Account> {
  const [row] = await db<Account[]>`
    INSERT INTO accounts (id, username, username_key, role, password_hash, profile)
    VALUES (${account.id}, ${account.username}, ${usernameKey(account.username)}, ${account.role}, ${account.password_hash},
            ${db.json(account.profile as never)})
    RETURNING ${db(COLUMNS)}`;
  return row;
}

export async function getAccountById(db: Db, id: string): Promise<Account | undefined> {
  const [row] = await db<Account[]>`SELECT ${db(COLUMNS)} FROM accounts WHERE id = ${id}`;
  return row;
}

/**
 * The account a typed username names: the one spelled exactly so, else the one whose name folds
 * alike (`ADMIN`, a decomposed `café`). The exact spelling comes first so that accounts whose names
 * collided before usernames were folded each still answer to their own.
 */
export async function getAccountByUsername(db: Db, username: string): Promise<Account | undefined> {
  const [row] = await db<Account[]>`
    SELECT ${db(COLUMNS)} FROM accounts
    WHERE username = ${username} OR username_key = ${usernameKey(username)}
    ORDER BY username = ${username} DESC LIMIT 1`;
  return row;
}

export async function listAccounts(
  db: Db,
  page: PageRequest,
): Promise<Page<Account>> {
  return readPage(db, { columns: db(COLUMNS), from: db`accounts`, order: db`id` }, page);
}

export async function updateAccount(
  db: Db,
  id: string,
  changes: Partial<Pick<Account, 'role' | 'password_hash' | 'profile' | 'disabled'>>,
): Promise<Account | undefined> {
  const set: Record<string, unknown> = { updated_at: new Date() };
  if (changes.role !== undefined) set.role = changes.role;
  if (changes.disabled !== undefined) set.disabled = changes.disabled;
  if (changes.password_hash !== undefined) set.password_hash = changes.password_hash;
  if (changes.profile !== undefined) set.profile = db.json(changes.profile as never);
  const [row] = await db<Account[]>`
    UPDATE accounts SET ${db(set)} WHERE id = ${id} RETURNING ${db(COLUMNS)}`;
  return row;
}

/** Deletes the account; its tokens go with it (ON DELETE CASCADE), so they stop working at once. */
export async function deleteAccount(db: Db, id: string): Promise<boolean> {
  const rows = await db`DELETE FROM accounts WHERE id = ${id} RETURNING id`;
  return rows.length > 0;
}

/**
 * Enabled admins counted under a transaction-scoped lock, so two requests demoting, disabling or
 * deleting the last two admins at once cannot both see "another admin remains". Call inside a transaction.
 */
export async function countAdminsLocked(db: Db): Promise<number> {
  await takeLock(db, LOCKS.accounts);
  const [row] = await db<{ n: number }[]>`SELECT count(*)::int AS n FROM accounts WHERE role = 'admin' AND NOT disabled`;
  return row.n;
}

/**
 * Gives each account made before username keys its key, oldest first. A name that folds like one
 * already keyed gets `<key>:<account id>`, which no name folds to (keys are hex): the account keeps
 * its exact spelling and stays unique. Call inside a transaction; returns how many were keyed.
 */
export async function fillMissingUsernameKeys(tx: postgres.TransactionSql): Promise<number> {
  await takeLock(tx, LOCKS.accounts);
  const rows = await tx<{ id: string; username: string }[]>`
    SELECT id, username FROM accounts WHERE username_key IS NULL ORDER BY id`;
  for (const { id, username } of rows) {
    const key = usernameKey(username);
    try {
      await tx.savepoint((sp) => sp`UPDATE accounts SET username_key = ${key} WHERE id = ${id} AND username_key IS NULL`);
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      await tx`UPDATE accounts SET username_key = ${`${key}:${id}`} WHERE id = ${id} AND username_key IS NULL`;
    }
  }
  return rows.length;
}
