import { randomBytes, timingSafeEqual } from 'node:crypto';
import { DomainError, badRequest, forbidden } from '../../core/errors';
import { newId } from '../../core/ids';
import { sha256, sha256Hex } from '../../core/sha256';
import { acceptableNewUsername } from '../../core/access/username';
import { claimAt, mapClaims } from '../../core/access/oidc-mapping';
import type { Config } from '../../core/config';
import type { OidcSettings } from '../../core/access/oidc-settings';
import type { GlobalRole } from '../../core/access/access';
import { countAdminsLocked, createAccount, getAccountById, getAccountByUsername, updateAccount, type Account } from '../../store/accounts';
import { isUniqueViolation, type Db } from '../../store/db';
import { deleteMember, getGroupByName, getMembership, putMember } from '../../store/groups';
import { getOidcIdentityForUpdate, insertOidcIdentity, insertPendingSignIn, takePendingSignIn, touchOidcIdentity } from '../../store/oidc';
import type { Token } from '../../store/tokens';
import { appendEntry, type AuditOrigin, type EntryDraft } from '../audit/audit';
import type { ServerContext } from '../context';
import { openSession, refuseDisabled } from './accounts';
import { oauthErrorCode, relyingPartyFor } from './oidc-relying-party';
import { admitOidcStart } from './throttle';

/**
 * OpenID Connect sign-in (spec part A 4.11; docs/api.md, OpenID Connect sign-in): the login route
 * starts an authorization code flow with PKCE (S256), `state` and `nonce`; the callback finishes it
 * and signs the person in to the account their (issuer, subject) pair is linked to, made at their
 * first sign-in, with a session token minted exactly as a password login's.
 *
 * The flow is bound to the browser that started it by a random value in a short-lived HttpOnly
 * cookie; the server keeps the state, nonce and PKCE verifier in PostgreSQL under the value's hash
 * (so any server sharing the database can finish it), and the first callback takes them away.
 */

/** How long a started sign-in may take to come back. */
export const SIGN_IN_SECONDS = 600;

/** `console`: the callback sets the console's session cookie and sends the browser to /ui/. `token`: it answers the token as JSON. */
export type SignInMode = 'console' | 'token';

export const OIDC_CALLBACK_PATH = '/auth/oidc/callback';

/** The sign-in settings; a 404 naming the flag while sign-in is not configured. */
export function oidcSettingsOf(config: Pick<Config, 'oidc'>): OidcSettings {
  if (!config.oidc) throw new DomainError('not_found', 'OpenID Connect sign-in is not configured on this server: --oidc-issuer (CAIRN_OIDC_ISSUER) is not set');
  return config.oidc;
}

const random = () => randomBytes(32).toString('base64url');

/** Starts a sign-in: where to send the browser, and the value its cookie must carry back. */
export async function beginOidcSignIn(
  server: Pick<ServerContext, 'config' | 'sql'>,
  mode: SignInMode,
  address: string,
): Promise<{ location: string; binding: string; expiresAt: Date }> {
  const settings = oidcSettingsOf(server.config);
  await admitOidcStart(server.sql, address);
  const binding = random();
  const state = random();
  const nonce = random();
  const codeVerifier = random();
  const location = await relyingPartyFor(settings).authorizationUrl({ state, nonce, codeChallenge: sha256(codeVerifier).toString('base64url') });
  const expiresAt = new Date(Date.now() + SIGN_IN_SECONDS * 1000);
  await insertPendingSignIn(server.sql, sha256(binding), { state, nonce, code_verifier: codeVerifier, mode, expires_at: expiresAt });
  return { location, binding, expiresAt };
}

/** What the provider sent the browser back with (OAuth 2.0 authorization response, RFC 9207 `iss`). */
export interface CallbackQuery {
  code?: string;
  state?: string;
  iss?: string;
  error?: string;
}

export interface OidcSignIn {
  token: Token;
  secret: string;
  account: Account;
  mode: SignInMode;
}

const sameText = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

const refused = (reason: string) => new DomainError('unauthorized', `the OpenID Connect sign-in was refused: ${reason}; start again at /auth/oidc/login`);

/**
 * Finishes the sign-in this browser's cookie started, once: checks the state, redeems the code with
 * the PKCE verifier, validates the ID token, maps its claims, and signs the person in. `outcome`
 * gives the status the callback will answer in a mode, for the chain entries.
 */
export async function completeOidcSignIn(
  server: Pick<ServerContext, 'config' | 'sql' | 'logger'>,
  binding: string | undefined,
  query: CallbackQuery,
  outcome: (mode: SignInMode) => number,
): Promise<OidcSignIn> {
  const settings = oidcSettingsOf(server.config);
  const pending = binding ? await takePendingSignIn(server.sql, sha256(binding)) : undefined;
  if (!pending || pending.expires_at.getTime() <= Date.now()) {
    throw badRequest(
      `no OpenID Connect sign-in is under way in this browser (its cookie is missing, already used, or older than ${SIGN_IN_SECONDS / 60} minutes): start again at /auth/oidc/login`,
    );
  }
  if (!query.state || !sameText(query.state, pending.state)) {
    throw badRequest('state: the answer does not belong to the sign-in this browser started; start again at /auth/oidc/login', { field: 'state' });
  }
  if (query.error !== undefined) throw refused(`the provider answered ${oauthErrorCode(query.error) ?? 'with an error'}`);
  // RFC 9207: an answer naming another issuer came from another provider (a mix-up attack).
  if (query.iss !== undefined && query.iss !== settings.issuer) throw refused('the answer names another issuer (iss)');
  if (!query.code) throw badRequest('code: the provider sent no authorization code', { field: 'code' });

  const party = relyingPartyFor(settings);
  const idToken = await party.redeemCode(query.code, pending.code_verifier);
  const claims = await party.verifyIdToken(idToken, pending.nonce);
  const mapping = mapClaims(settings, claims);
  if ('refused' in mapping) throw forbidden(`the OpenID Connect sign-in was refused: ${mapping.refused}`);

  const origin: AuditOrigin = { actor: 'anonymous', method: 'GET', path: OIDC_CALLBACK_PATH, withheld: new Set() };
  const signIn = { settings, subject: claims.sub, claims, role: mapping.role, teams: mapping.teams, managedTeams: mapping.managedTeams };
  // A first sign-in racing another of the same person, or a name taken meanwhile, meets a unique
  // violation; the second try finds the link, or picks the name again.
  for (let attempt = 1; ; attempt++) {
    try {
      const { minted, account, missingTeams } = await server.sql.begin((tx) => signInTransaction(tx, origin, outcome(pending.mode), signIn));
      for (const team of missingTeams) server.logger.warn({ team }, '--oidc-team-map names a team that does not exist; its membership was not set');
      return { ...minted, account, mode: pending.mode };
    } catch (err) {
      if (attempt < 2 && isUniqueViolation(err)) continue;
      throw err;
    }
  }
}

interface SignInFacts {
  settings: OidcSettings;
  subject: string;
  claims: Record<string, unknown>;
  role: GlobalRole;
  teams: string[];
  managedTeams: string[];
}

/** One transaction: the account found or made, its role and teams brought in line with the claims, the session minted; each change on the chain. */
async function signInTransaction(tx: Db, origin: AuditOrigin, outcome: number, facts: SignInFacts) {
  const { settings, subject } = facts;
  const record = (actor: string, body: Record<string, unknown>) => appendEntry(tx, origin, outcome, { id: newId('aud'), run_id: null, actor, body });

  const identity = await getOidcIdentityForUpdate(tx, settings.issuer, subject);
  let account: Account;
  if (identity) {
    account = (await getAccountById(tx, identity.account_id))!;
    refuseDisabled(account);
    // A role map decides the role at every sign-in, except that it never demotes the last admin;
    // without one, the default role was given at the first sign-in and admins set it since.
    const synced = settings.roleMap.length > 0;
    if (synced && account.role !== facts.role && !(account.role === 'admin' && (await countAdminsLocked(tx)) <= 1)) {
      const previous = account.role;
      account = (await updateAccount(tx, account.id, { role: facts.role }))!;
      await record(account.username, { kind: 'user.updated', account_id: account.id, role: account.role, previous_role: previous, via: 'oidc' });
    }
    await touchOidcIdentity(tx, settings.issuer, subject);
  } else {
    account = await createAccount(tx, {
      id: newId('usr'),
      username: await newAccountName(tx, settings, subject, facts.claims),
      role: facts.role,
      password_hash: null,
      profile: {},
    });
    await insertOidcIdentity(tx, { issuer: settings.issuer, subject, account_id: account.id });
    await record(account.username, { kind: 'user.created', account_id: account.id, role: account.role, via: 'oidc', issuer: settings.issuer, subject });
  }

  const missingTeams: string[] = [];
  for (const name of facts.managedTeams) {
    const team = await getGroupByName(tx, 'team', name);
    if (!team) {
      missingTeams.push(name);
      continue;
    }
    const member = await getMembership(tx, 'team', team.id, account.id);
    const belongs = facts.teams.includes(name);
    if (belongs && !member) {
      await putMember(tx, 'team', team.id, account.id, null);
      await record(account.username, { kind: 'team.member_added', team_id: team.id, account_id: account.id, via: 'oidc' });
    } else if (!belongs && member) {
      await deleteMember(tx, 'team', team.id, account.id);
      await record(account.username, { kind: 'team.member_removed', team_id: team.id, account_id: account.id, via: 'oidc' });
    }
  }

  const entry: EntryDraft = { id: newId('aud'), body: {}, run_id: null };
  const minted = await openSession(tx, account, entry, 'oidc');
  await appendEntry(tx, origin, outcome, entry);
  return { minted, account, missingTeams };
}

/**
 * A first sign-in's account name: the `--oidc-username-claim` claim (else `email`) when it makes a
 * valid, free username; else that name with a suffix from the subject; else `oidc-` and a digest
 * of the subject. Never an existing account's name: accounts are matched by subject only, so a
 * provider's user cannot claim a local account by choosing its name.
 */
async function newAccountName(tx: Db, settings: OidcSettings, subject: string, claims: Record<string, unknown>): Promise<string> {
  const digest = sha256Hex(`${settings.issuer}\0${subject}`);
  const given = [settings.usernameClaim, 'email'].map((name) => claimAt(claims, name)).find((v): v is string => typeof v === 'string' && v !== '');
  const candidates = given ? [given, `${given}-${digest.slice(0, 8)}`] : [];
  for (const name of candidates) {
    if (acceptableNewUsername(name) && !(await getAccountByUsername(tx, name))) return name;
  }
  return `oidc-${digest.slice(0, 16)}`;
}
