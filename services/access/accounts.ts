import { DomainError, conflict, forbidden, notFound } from '../../core/errors';
import { newId } from '../../core/ids';
import { hashBearerSecret, hashPassword, newBearerSecret, verifyPassword } from '../../core/credentials/secrets';
import { usernameKey } from '../../core/access/username';
import {
  countAdminsLocked,
  createAccount,
  deleteAccount,
  fillMissingUsernameKeys,
  getAccountById,
  getAccountByUsername,
  updateAccount,
  type Account,
  type Profile,
  type Role,
} from '../../store/accounts';
import { isUniqueViolation, type Db, type Sql } from '../../store/db';
import { actorKindOf, createToken, deleteToken, getToken, type Caller, type Token, type TokenKind } from '../../store/tokens';
import { recordMutation, type AuditOrigin, type EntryDraft } from '../audit/audit';
import { admitSignIn } from './throttle';

/** Login sessions last a working day; API tokens last until revoked unless minted with an expiry. */
const SESSION_SECONDS = 12 * 3600;

/** Who minted a token: a person or agent through the API, or the server itself at first start. */
export interface Minter {
  name: string;
  type: 'user' | 'agent' | 'system';
}

/**
 * An account or token change as asked for: by a caller of the API, or by `cairn` on the command
 * line, which runs beside the install's database and so answers to no role; and how its audit
 * chain entry describes it.
 */
export interface AccountRequest {
  by: Caller | 'command-line';
  origin: AuditOrigin;
  /** The answer the chain entry records: the HTTP status, or a word for the command line. */
  outcome: number | string;
}

const isAgent = (by: AccountRequest['by']): boolean => by !== 'command-line' && actorKindOf(by) === 'agent';

/**
 * An agent never approves (spec part B 5.2 item 6), so it may not make itself, or anyone, a person
 * who could: whatever its account's role, it does not create, change or delete accounts,
 * passwords or roles, nor mint or revoke a person's token.
 */
function refuseAgent(request: AccountRequest, what: string, why = 'only a person administers accounts'): void {
  if (isAgent(request.by)) throw forbidden(`an agent may not ${what}, whatever its account's role: ${why}`);
}

const taken = (username: string) =>
  conflict(`an account named ${username} already exists (usernames are compared ignoring case and Unicode form)`, { field: 'username' });

/** Fails when the change would leave no admin; counted under the accounts lock, so two at once cannot both pass. */
async function keepAnAdmin(tx: Db, field?: string): Promise<void> {
  if ((await countAdminsLocked(tx)) <= 1) throw conflict('this is the last admin; make another admin first', field ? { field } : {});
}

export async function createUser(
  sql: Sql,
  request: AccountRequest,
  input: { username: string; role: Role; password?: string; profile?: Profile },
): Promise<Account> {
  refuseAgent(request, 'create accounts');
  const passwordHash = input.password ? await hashPassword(input.password) : null;
  try {
    return await recordMutation(sql, request.origin, request.outcome, async (tx, entry) => {
      const created = await createAccount(tx, {
        id: newId('usr'),
        username: input.username,
        role: input.role,
        password_hash: passwordHash,
        profile: input.profile ?? {},
      });
      entry.body = { kind: 'user.created', account_id: created.id, role: created.role };
      return created;
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw taken(input.username);
    throw err;
  }
}

/**
 * Changes role, password, profile or whether the account is disabled; a profile sent replaces the
 * stored one whole. The last enabled admin may be neither demoted nor disabled.
 */
export async function updateUser(
  sql: Sql,
  request: AccountRequest,
  id: string,
  changes: { role?: Role; password?: string; profile?: Profile; disabled?: boolean },
): Promise<Account> {
  refuseAgent(request, 'change accounts, their passwords, roles or profiles');
  const passwordHash = changes.password ? await hashPassword(changes.password) : undefined;
  return recordMutation(sql, request.origin, request.outcome, async (tx, entry) => {
    const current = await getAccountById(tx, id);
    if (!current) throw notFound(`user ${id}`);
    if (current.role === 'admin' && !current.disabled) {
      if (changes.role && changes.role !== 'admin') await keepAnAdmin(tx, 'role');
      else if (changes.disabled === true) await keepAnAdmin(tx, 'disabled');
    }
    entry.body = {
      kind: 'user.updated',
      account_id: current.id,
      role: changes.role ?? current.role,
      password_changed: passwordHash !== undefined,
      ...(changes.disabled !== undefined && changes.disabled !== current.disabled ? { disabled: changes.disabled } : {}),
    };
    const updated = await updateAccount(tx, current.id, { role: changes.role, password_hash: passwordHash, profile: changes.profile, disabled: changes.disabled });
    return updated!;
  });
}

/** Deletes the account; its tokens go with it and stop working at once. */
export async function deleteUser(sql: Sql, request: AccountRequest, id: string): Promise<void> {
  refuseAgent(request, 'delete accounts');
  await recordMutation(sql, request.origin, request.outcome, async (tx, entry) => {
    const current = await getAccountById(tx, id);
    if (!current) throw notFound(`user ${id}`);
    if (current.role === 'admin' && !current.disabled) await keepAnAdmin(tx);
    await deleteAccount(tx, current.id);
    entry.body = { kind: 'user.deleted', account_id: current.id };
  });
}

/** Mints a token for an account; the secret exists only in the return value and is stored hashed. */
export async function mintToken(
  db: Db,
  account: Account,
  options: { name: string; kind: TokenKind; minter: Minter; expiresAt?: Date | null },
): Promise<{ token: Token; secret: string }> {
  const secret = newBearerSecret();
  const token = await createToken(db, {
    id: newId('tok'),
    account_id: account.id,
    name: options.name,
    kind: options.kind,
    secret_hash: hashBearerSecret(secret),
    created_by: options.minter.name,
    created_by_type: options.minter.type,
    expires_at: options.expiresAt ?? null,
  });
  return { token, secret };
}

/**
 * Who may mint what for whom:
 * - anyone mints for their own account; an admin person, and the command line, for any account;
 * - a token's kind defaults to the caller's (agent for an agent, else user);
 * - an agent mints agent tokens for its own account only, none outliving the token it used, so
 *   nothing it mints can do more, or for longer, than it can itself.
 */
export async function issueToken(
  sql: Sql,
  request: AccountRequest,
  input: { name: string; username?: string; kind?: TokenKind; expires_in?: number },
): Promise<{ token: Token; secret: string; account: Account }> {
  const { by } = request;
  const agentRule = 'it mints agent tokens for its own account only';
  const own = by === 'command-line' ? undefined : by.account;
  const named = input.username === undefined ? own : await getAccountByUsername(sql, input.username);
  if (own && named?.id !== own.id) {
    refuseAgent(request, 'mint tokens for another account', agentRule);
    if (own.role !== 'admin') throw forbidden('only an admin mints tokens for another account');
  }
  if (!named) throw notFound(`account ${input.username}`);
  const kind = input.kind ?? (isAgent(by) ? 'agent' : 'user');
  if (kind !== 'agent') refuseAgent(request, `mint ${kind} tokens, which act as a person`, agentRule);

  let expiresAt = input.expires_in ? new Date(Date.now() + input.expires_in * 1000) : null;
  const ceiling = by !== 'command-line' && isAgent(by) ? by.token.expires_at : null;
  if (ceiling && (!expiresAt || expiresAt > ceiling)) expiresAt = ceiling;
  const minter: Minter = by === 'command-line' ? { name: 'cairn-cli', type: 'system' } : { name: by.account.username, type: actorKindOf(by) };

  const { token, secret } = await recordMutation(sql, request.origin, request.outcome, async (tx, entry) => {
    const minted = await mintToken(tx, named, { name: input.name, kind, minter, expiresAt });
    entry.body = { kind: 'token.created', token_id: minted.token.id, account_id: named.id, token_kind: kind };
    return minted;
  });
  return { token, secret, account: named };
}

/** Revokes a token everywhere at once. An agent revokes only agent tokens of its own account. */
export async function revokeToken(sql: Sql, request: AccountRequest, id: string): Promise<void> {
  const { by } = request;
  await recordMutation(sql, request.origin, request.outcome, async (tx, entry) => {
    if (by !== 'command-line' && isAgent(by)) {
      const token = await getToken(tx, id);
      if (token && (token.kind !== 'agent' || token.account_id !== by.account.id)) {
        refuseAgent(request, "revoke a person's token or another account's", 'it revokes agent tokens of its own account only');
      }
    }
    if (!(await deleteToken(tx, id))) throw notFound(`token ${id}`);
    entry.body = { kind: 'token.revoked', token_id: id };
  });
}

/**
 * Signs in with a username (any spelling that folds to it) and password, within the sign-in
 * limits (services/throttle.ts), and mints a session. A wrong password, an unknown username and an
 * account without a password are refused alike; a disabled account, once its password is right.
 */
export async function logIn(
  sql: Sql,
  origin: AuditOrigin,
  input: { username: string; password: string },
  address: string,
): Promise<{ token: Token; secret: string; account: Account }> {
  const attempt = await admitSignIn(sql, usernameKey(input.username), address);
  const account = await getAccountByUsername(sql, input.username);
  const ok = await verifyPassword(input.password, account?.password_hash ?? null);
  if (!account || !ok) throw new DomainError('unauthorized', 'username or password is wrong');
  await attempt.succeeded();
  refuseDisabled(account);
  const { token, secret } = await recordMutation(sql, origin, 200, (tx, entry) => openSession(tx, account, entry));
  return { token, secret, account };
}

/** A disabled account signs in no way (password or OpenID Connect). */
export function refuseDisabled(account: Account): void {
  if (account.disabled) throw forbidden(`the account ${account.username} is disabled; an admin enables it again with PUT /v1/users/${account.id}`);
}

/**
 * Mints a sign-in's session token in the sign-in's transaction, its chain entry naming the account
 * as actor: the one way every kind of sign-in (password, OpenID Connect) ends. `via` names a
 * sign-in other than by password.
 */
export async function openSession(tx: Db, account: Account, entry: EntryDraft, via?: string): Promise<{ token: Token; secret: string }> {
  entry.actor = account.username;
  entry.body = { kind: 'session.created', account_id: account.id, ...(via ? { via } : {}) };
  return mintToken(tx, account, {
    name: via ? `${via} session` : 'login session',
    kind: 'session',
    minter: { name: account.username, type: 'user' },
    expiresAt: new Date(Date.now() + SESSION_SECONDS * 1000),
  });
}

/** Ends the caller's own token, whatever its kind. */
export async function logOut(sql: Sql, caller: Caller, origin: AuditOrigin): Promise<void> {
  await recordMutation(sql, origin, 204, (tx, entry) => {
    entry.body = { kind: 'session.ended', token_id: caller.token.id };
    return deleteToken(tx, caller.token.id);
  });
}

/** Gives accounts made before username keys their key (schema/006); a no-op once all have one. */
export async function fillUsernameKeys(sql: Sql): Promise<number> {
  return sql.begin((tx) => fillMissingUsernameKeys(tx));
}

export function tokenView(token: Token & { username?: string }) {
  return {
    id: token.id,
    name: token.name,
    kind: token.kind,
    username: token.username,
    created_by: token.created_by,
    created_by_type: token.created_by_type,
    created_at: token.created_at.toISOString(),
    expires_at: token.expires_at?.toISOString() ?? null,
    last_used_at: token.last_used_at?.toISOString() ?? null,
  };
}

export function userView(account: Account) {
  return {
    id: account.id,
    username: account.username,
    role: account.role,
    profile: account.profile,
    disabled: account.disabled,
    created_at: account.created_at.toISOString(),
    updated_at: account.updated_at.toISOString(),
  };
}
