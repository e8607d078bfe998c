import { randomBytes, timingSafeEqual } from 'node:crypto';
import { DomainError, badRequest, conflict, forbidden, notFound } from '../../core/errors';
import { newId } from '../../core/ids';
import { sha256 } from '../../core/sha256';
import { FORGE_KINDS, type ForgeClient, type ForgeKind, type ForgeSettings } from '../../core/access/forge-settings';
import type { Config } from '../../core/config';
import {
  deleteForgeLink,
  forgeLinkOf,
  insertForgeLink,
  insertPendingForgeLink,
  listForgeLinks,
  takePendingForgeLink,
  type ForgeLink,
} from '../../store/forge-links';
import { getAccountById } from '../../store/accounts';
import { actorKindOf, type Caller } from '../../store/tokens';
import { recordMutation, unchanged, type AuditOrigin } from '../audit/audit';
import type { ServerContext } from '../context';
import { sendHttp, withPath } from '../notifications/notification-egress';

/**
 * Forge links (spec part A 2.8, 4.11; part B 5.1, 5.2 rule 12; docs/api.md, Forge links): a person
 * links their account at a forge by an OAuth authorization code flow with PKCE (S256). The start
 * is bound to the browser by a random value in an HttpOnly cookie whose hash keys the pending row,
 * and to the forge's answer by a random `state`; the first callback takes the row away. The code is
 * redeemed and the forge's current user read through the egress check, server side; the forge
 * user id and login are kept, the forge's access token is dropped at once (never stored).
 */

export const LINK_SECONDS = 600;
export const FORGE_CALLBACK_PATH = '/auth/forge/callback';
const TIMEOUT_MS = 10_000;

/** Where each kind's OAuth endpoints and current-user API are, under its base address. */
const ENDPOINTS: Record<ForgeKind, { authorize: string; token: string; user: (base: string) => URL; scope: string }> = {
  github: {
    authorize: '/login/oauth/authorize',
    token: '/login/oauth/access_token',
    // github.com answers its API at api.github.com; GitHub Enterprise Server under /api/v3.
    user: (base) => (new URL(base).hostname === 'github.com' ? new URL('https://api.github.com/user') : withPath(base, '/api/v3/user')),
    scope: 'read:user',
  },
  gitlab: { authorize: '/oauth/authorize', token: '/oauth/token', user: (base) => withPath(base, '/api/v4/user'), scope: 'read_user' },
  gitea: { authorize: '/login/oauth/authorize', token: '/login/oauth/access_token', user: (base) => withPath(base, '/api/v1/user'), scope: 'read:user' },
};

function settingsOf(config: Pick<Config, 'forge'>): ForgeSettings {
  if (!config.forge) throw new DomainError('not_found', 'forge links are not configured on this server: no forge client id is set (--forge-github-client-id, --forge-gitlab-client-id, --forge-gitea-client-id)');
  return config.forge;
}

/** A person only (spec part B 5.2 rule 12). */
function requirePerson(caller: Caller, what: string): void {
  if (actorKindOf(caller) === 'agent') throw forbidden(`an agent may not ${what}: forge links are a person's own, made in their browser`);
}

export function forgeLinkView(link: ForgeLink) {
  return { id: link.id, forge: link.forge, forge_url: link.forge_url, forge_user_id: link.forge_user_id, login: link.login, created_at: link.created_at.toISOString() };
}

/** The caller's links and the forges this server can link. */
export async function listLinks(server: Pick<ServerContext, 'config' | 'sql'>, caller: Caller) {
  const forges = [...(server.config.forge?.forges.values() ?? [])].map((f) => ({ forge: f.kind, forge_url: f.baseUrl }));
  return { links: (await listForgeLinks(server.sql, caller.account.id)).map(forgeLinkView), linkable: forges };
}

const random = () => randomBytes(32).toString('base64url');

/** Starts a link: the forge's authorize URL, and the value the browser's cookie must carry back. */
export async function beginForgeLink(server: Pick<ServerContext, 'config' | 'sql'>, caller: Caller, kind: string) {
  requirePerson(caller, 'link a forge account');
  const settings = settingsOf(server.config);
  if (!(FORGE_KINDS as readonly string[]).includes(kind)) throw badRequest(`forge: expected one of ${FORGE_KINDS.join(', ')}`, { field: 'forge' });
  const client = settings.forges.get(kind as ForgeKind);
  if (!client) throw badRequest(`forge: ${kind} is not linkable on this server (no --forge-${kind}-client-id)`, { field: 'forge' });
  const binding = random();
  const state = random();
  const codeVerifier = random();
  const url = withPath(client.baseUrl, ENDPOINTS[client.kind].authorize);
  url.search = new URLSearchParams({
    client_id: client.clientId,
    redirect_uri: settings.redirectUrl,
    response_type: 'code',
    scope: ENDPOINTS[client.kind].scope,
    state,
    code_challenge: sha256(codeVerifier).toString('base64url'),
    code_challenge_method: 'S256',
  }).toString();
  const expiresAt = new Date(Date.now() + LINK_SECONDS * 1000);
  await insertPendingForgeLink(server.sql, sha256(binding), { state, code_verifier: codeVerifier, account_id: caller.account.id, forge: client.kind, expires_at: expiresAt });
  return { authorize_url: url.toString(), binding, expires_at: expiresAt.toISOString() };
}

const sameText = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

const unreachable = (client: ForgeClient, what: string) => new DomainError('bad_gateway', `${client.kind} at ${new URL(client.baseUrl).host} ${what}`);

async function forgeJson(server: Pick<ServerContext, 'config'>, client: ForgeClient, url: URL, request: { method: string; headers: Record<string, string>; body: string }): Promise<{ status: number; json: any }> {
  let answer;
  try {
    answer = await sendHttp(server.config.delivery, url, { ...request, readLimit: 256 * 1024 }, TIMEOUT_MS);
  } catch {
    // The error may name an address; it never names the code or secret, but say only the host.
    throw unreachable(client, 'could not be reached (refused by the egress rule, or no answer)');
  }
  try {
    return { status: answer.status, json: JSON.parse(answer.body ?? '') };
  } catch {
    return { status: answer.status, json: undefined };
  }
}

/** Redeems the code and reads who the forge says the person is; the access token goes no further. */
async function forgeUser(server: Pick<ServerContext, 'config'>, settings: ForgeSettings, client: ForgeClient, code: string, verifier: string) {
  const body = new URLSearchParams({
    grant_type: 'authorization_code',
    client_id: client.clientId,
    client_secret: client.clientSecret,
    code,
    redirect_uri: settings.redirectUrl,
    code_verifier: verifier,
  }).toString();
  const token = await forgeJson(server, client, withPath(client.baseUrl, ENDPOINTS[client.kind].token), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body,
  });
  const accessToken = token.json?.access_token;
  if (token.status !== 200 || typeof accessToken !== 'string' || !accessToken) {
    const code = typeof token.json?.error === 'string' && /^[a-z_]{1,64}$/.test(token.json.error) ? token.json.error : `status ${token.status}`;
    throw new DomainError('unauthorized', `the forge refused the authorization code (${code}); start linking again`);
  }
  const user = await forgeJson(server, client, ENDPOINTS[client.kind].user(client.baseUrl), {
    method: 'GET',
    headers: { authorization: `${client.kind === 'github' ? 'token' : 'Bearer'} ${accessToken}`, accept: 'application/json' },
    body: '',
  });
  const id = user.json?.id;
  const login = client.kind === 'gitlab' ? user.json?.username : user.json?.login;
  if (user.status !== 200 || (typeof id !== 'number' && typeof id !== 'string') || typeof login !== 'string' || !login) {
    throw unreachable(client, `did not answer its current-user API as expected (status ${user.status})`);
  }
  return { id: String(id), login: login.slice(0, 255) };
}

/** Finishes the link this browser's cookie started, once, for the person who started it. */
export async function completeForgeLink(
  server: Pick<ServerContext, 'config' | 'sql'>,
  binding: string | undefined,
  query: { code?: string; state?: string; error?: string },
) {
  const settings = settingsOf(server.config);
  const pending = binding ? await takePendingForgeLink(server.sql, sha256(binding)) : undefined;
  if (!pending || pending.expires_at.getTime() <= Date.now()) {
    throw badRequest(`no forge link is under way in this browser (its cookie is missing, already used, or older than ${LINK_SECONDS / 60} minutes): start again with POST /v1/me/forge-links`);
  }
  if (!query.state || !sameText(query.state, pending.state)) {
    throw badRequest('state: the answer does not belong to the link this browser started; start again with POST /v1/me/forge-links', { field: 'state' });
  }
  if (query.error !== undefined) throw new DomainError('unauthorized', 'the forge refused the link (the person declined, or the app is misconfigured); start again');
  if (!query.code) throw badRequest('code: the forge sent no authorization code', { field: 'code' });
  const client = settings.forges.get(pending.forge as ForgeKind);
  if (!client) throw badRequest(`the ${pending.forge} forge is no longer linkable on this server`);
  const user = await forgeUser(server, settings, client, query.code, pending.code_verifier);
  const account = await getAccountById(server.sql, pending.account_id);
  if (!account || account.disabled) throw notFound('the account that started the link');
  const origin: AuditOrigin = { actor: account.username, method: 'GET', path: FORGE_CALLBACK_PATH, withheld: new Set() };
  return recordMutation(server.sql, origin, 201, async (tx, entry) => {
    const existing = await forgeLinkOf(tx, client.kind, client.baseUrl, user.id);
    if (existing?.account_id === pending.account_id) return unchanged(existing);
    if (existing) throw conflict(`this ${client.kind} account (${user.login}) is linked to another Cairn account already; it must be unlinked there first`);
    const link = await insertForgeLink(tx, { id: newId('flk'), account_id: pending.account_id, forge: client.kind, forge_url: client.baseUrl, forge_user_id: user.id, login: user.login });
    if (!link) throw conflict(`this ${client.kind} account (${user.login}) is linked to another Cairn account already; it must be unlinked there first`);
    entry.body = { kind: 'forge_link.created', link_id: link.id, account_id: link.account_id, forge: link.forge, forge_url: link.forge_url, forge_user_id: link.forge_user_id, login: link.login };
    return link;
  });
}

/** Unlinks one of the caller's own links. */
export async function removeForgeLink(server: Pick<ServerContext, 'sql'>, caller: Caller, origin: AuditOrigin, id: string): Promise<void> {
  requirePerson(caller, 'unlink a forge account');
  await recordMutation(server.sql, origin, 204, async (tx, entry) => {
    const link = await deleteForgeLink(tx, caller.account.id, id);
    if (!link) throw notFound(`forge link ${id}`);
    entry.body = { kind: 'forge_link.deleted', link_id: link.id, account_id: link.account_id, forge: link.forge, forge_url: link.forge_url, forge_user_id: link.forge_user_id, login: link.login };
  });
}
