import { sha256Hex } from '../../core/sha256';
import { newId } from '../../core/ids';
import { forbidden } from '../../core/errors';
import { acceptableNewUsername } from '../../core/access/username';
import { mapClaims, type MappingRules, type SignInProtocol } from '../../core/access/sign-in-mapping';
import type { GlobalRole } from '../../core/access/access';
import { countAdminsLocked, createAccount, getAccountById, getAccountByUsername, updateAccount, type Account } from '../../store/accounts';
import { isUniqueViolation, type Db } from '../../store/db';
import { deleteMember, getGroupByName, getMembership, putMember } from '../../store/groups';
import { getIdentityForUpdate, insertIdentity, touchIdentity } from '../../store/sign-in-identities';
import type { Token } from '../../store/tokens';
import { appendEntry, type AuditOrigin, type EntryDraft } from '../audit/audit';
import type { ServerContext } from '../context';
import { openSession, refuseDisabled } from './accounts';

/**
 * Signing a person in on an identity provider's word, OpenID Connect and SAML alike (spec part A
 * 4.11): once the protocol has proven who they are, the account linked to their (protocol,
 * provider, subject) identity is found, or made at their first sign-in; the admin-set mapping
 * (core/access/sign-in-mapping.ts) brings its role and teams in line with what the provider says;
 * and a session token is minted by `openSession`, exactly as a password login's. Accounts are
 * matched by identity only, never by username or email, which a provider may let a person choose.
 */

/** `console`: the sign-in sets the console's session cookie and sends the browser to /ui/. `token`: it answers the token as JSON. */
export type SignInMode = 'console' | 'token';

export interface ProvenIdentity {
  protocol: SignInProtocol;
  /** The OpenID issuer or the SAML identity provider's entity id. */
  issuer: string;
  /** The ID token's `sub` or the assertion's NameID. */
  subject: string;
  /** The ID token's claims or the assertion's attributes, read by the mapping. */
  claims: Record<string, unknown>;
  /** Names a first sign-in's account may take, best first (each also tried with a suffix). */
  names: string[];
}

export interface IdentitySignIn {
  token: Token;
  secret: string;
  account: Account;
}

/**
 * Signs the proven person in: one transaction, each change on the chain under `origin` with the
 * status `outcome` the route will answer. A refusal by the mapping is a 403.
 */
export async function signInIdentity(
  server: Pick<ServerContext, 'sql' | 'logger'>,
  rules: MappingRules,
  person: ProvenIdentity,
  origin: AuditOrigin,
  outcome: number,
): Promise<IdentitySignIn> {
  const mapping = mapClaims(rules, person.claims);
  if ('refused' in mapping) throw forbidden(`the ${PROTOCOL_NAMES[person.protocol]} sign-in was refused: ${mapping.refused}`);
  const facts = { person, role: mapping.role, teams: mapping.teams, managedTeams: mapping.managedTeams, synced: rules.roleMap.length > 0 };
  // A first sign-in racing another of the same person, or a name taken meanwhile, meets a unique
  // violation; the second try finds the link, or picks the name again.
  for (let attempt = 1; ; attempt++) {
    try {
      const { minted, account, missingTeams } = await server.sql.begin((tx) => signInTransaction(tx, origin, outcome, facts));
      for (const team of missingTeams) server.logger.warn({ team }, `--${person.protocol}-team-map names a team that does not exist; its membership was not set`);
      return { ...minted, account };
    } catch (err) {
      if (attempt < 2 && isUniqueViolation(err)) continue;
      throw err;
    }
  }
}

export const PROTOCOL_NAMES: Record<SignInProtocol, string> = { oidc: 'OpenID Connect', saml: 'SAML' };

interface SignInFacts {
  person: ProvenIdentity;
  role: GlobalRole;
  teams: string[];
  managedTeams: string[];
  /** A role map decides the role at every sign-in; without one, the default role is given at the first and admins set it since. */
  synced: boolean;
}

/** One transaction: the account found or made, its role and teams brought in line, the session minted; each change on the chain. */
async function signInTransaction(tx: Db, origin: AuditOrigin, outcome: number, facts: SignInFacts) {
  const { person } = facts;
  const via = person.protocol;
  const record = (actor: string, body: Record<string, unknown>) => appendEntry(tx, origin, outcome, { id: newId('aud'), run_id: null, actor, body });

  const identity = await getIdentityForUpdate(tx, person);
  let account: Account;
  if (identity) {
    account = (await getAccountById(tx, identity.account_id))!;
    refuseDisabled(account);
    // The role map never demotes the last admin.
    if (facts.synced && account.role !== facts.role && !(account.role === 'admin' && (await countAdminsLocked(tx)) <= 1)) {
      const previous = account.role;
      account = (await updateAccount(tx, account.id, { role: facts.role }))!;
      await record(account.username, { kind: 'user.updated', account_id: account.id, role: account.role, previous_role: previous, via });
    }
    await touchIdentity(tx, person);
  } else {
    account = await createAccount(tx, {
      id: newId('usr'),
      username: await newAccountName(tx, person),
      role: facts.role,
      password_hash: null,
      profile: {},
    });
    await insertIdentity(tx, { protocol: via, issuer: person.issuer, subject: person.subject, account_id: account.id });
    await record(account.username, { kind: 'user.created', account_id: account.id, role: account.role, via, issuer: person.issuer, subject: person.subject });
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
      await record(account.username, { kind: 'team.member_added', team_id: team.id, account_id: account.id, via });
    } else if (!belongs && member) {
      await deleteMember(tx, 'team', team.id, account.id);
      await record(account.username, { kind: 'team.member_removed', team_id: team.id, account_id: account.id, via });
    }
  }

  const entry: EntryDraft = { id: newId('aud'), body: {}, run_id: null };
  const minted = await openSession(tx, account, entry, via);
  await appendEntry(tx, origin, outcome, entry);
  return { minted, account, missingTeams };
}

/**
 * A first sign-in's account name: the first of the given names that makes a valid, free username;
 * else that name with a suffix from the identity; else `<protocol>-` and a digest of the identity.
 * Never an existing account's name, so a provider's user cannot claim a local account by choosing it.
 */
async function newAccountName(tx: Db, person: ProvenIdentity): Promise<string> {
  const digest = sha256Hex(person.protocol === 'oidc' ? `${person.issuer}\0${person.subject}` : `saml\0${person.issuer}\0${person.subject}`);
  const given = person.names.find((name) => name !== '');
  const candidates = given ? [given, `${given}-${digest.slice(0, 8)}`] : [];
  for (const name of candidates) {
    if (acceptableNewUsername(name) && !(await getAccountByUsername(tx, name))) return name;
  }
  return `${person.protocol}-${digest.slice(0, 16)}`;
}
