import { randomBytes } from 'node:crypto';
import { startTestServer, type TestServer } from '../support/server';
import { reservePort } from '../support/oidc';
import { person, tokenOf } from '../support/access';
import { startForgePeer, type ForgePeer } from '../support/forge-peer';

/**
 * Forge links against a real local OAuth 2.0 authorization server and user API (test/support/
 * forge-peer.ts: GitHub Enterprise's and Gitea's documented paths, PKCE checked), reached through
 * the egress check with loopback allowed.
 */

const CLIENT = { id: 'cairn-forge-test', secret: `forge-secret-${randomBytes(12).toString('hex')}` };
let callback: string;
let peer: ForgePeer;
let t: TestServer;

beforeAll(async () => {
  const port = await reservePort();
  callback = `http://127.0.0.1:${port}/auth/forge/callback`;
  peer = await startForgePeer({ ...CLIENT, redirectUri: callback });
  t = await startTestServer({
    CAIRN_LISTEN: `127.0.0.1:${port}`,
    SERVICE_EGRESS_ALLOW: '127.0.0.0/8',
    CAIRN_FORGE_REDIRECT_URL: callback,
    CAIRN_FORGE_GITHUB_URL: peer.url,
    CAIRN_FORGE_GITHUB_CLIENT_ID: CLIENT.id,
    CAIRN_FORGE_GITHUB_CLIENT_SECRET: CLIENT.secret,
    CAIRN_FORGE_GITLAB_URL: peer.url,
    CAIRN_FORGE_GITLAB_CLIENT_ID: CLIENT.id,
    CAIRN_FORGE_GITLAB_CLIENT_SECRET: CLIENT.secret,
    CAIRN_FORGE_GITEA_URL: peer.url,
    CAIRN_FORGE_GITEA_CLIENT_ID: CLIENT.id,
    CAIRN_FORGE_GITEA_CLIENT_SECRET: CLIENT.secret,
  });
});
afterAll(async () => {
  await t?.stop();
  await peer?.stop();
});

let nextForgeId = Math.floor(Math.random() * 1e6) + 1000;
const forgeUser = () => ({ id: nextForgeId++, login: `dev-${randomBytes(3).toString('hex')}` });

/** Starts a link as `token`: the authorize URL and the cookie the browser got. */
async function start(token: string, forge = 'github') {
  const res = await t.as(token).post('/v1/me/forge-links', { forge });
  const cookie = (res.headers.get('set-cookie') ?? '').split(';')[0];
  return { res, cookie };
}

/** The browser at the forge: approves as whoever the peer has signed in, and is sent back; the callback URL. */
async function atForge(authorizeUrl: string): Promise<string> {
  const res = await fetch(authorizeUrl, { redirect: 'manual' });
  expect(res.status).toBe(302);
  return res.headers.get('location')!;
}

async function callbackWith(url: string, cookie?: string) {
  const res = await fetch(url, { headers: cookie ? { cookie } : {}, redirect: 'manual' });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, text };
}

async function link(token: string, user: { id: number; login: string }, forge = 'github') {
  peer.signIn(user);
  const { res, cookie } = await start(token, forge);
  expect(res.status).toBe(201);
  return callbackWith(await atForge(res.body.authorize_url), cookie);
}

test('a person links, lists and unlinks a forge account; the chain records both, never a token or secret', async () => {
  const dana = await person(t.api, 'viewer');
  const user = forgeUser();
  peer.signIn(user);
  const { res, cookie } = await start(dana.token);
  expect(res.status).toBe(201);
  expect(cookie).toMatch(/^cairn_forge=/);
  expect(res.headers.get('set-cookie')).toMatch(/Path=\/auth\/forge; HttpOnly; SameSite=Lax/);
  const authorize = new URL(res.body.authorize_url);
  expect(`${authorize.origin}${authorize.pathname}`).toBe(`${peer.url}/login/oauth/authorize`);
  expect(authorize.searchParams.get('code_challenge_method')).toBe('S256');
  expect(authorize.searchParams.get('redirect_uri')).toBe(callback);

  const done = await callbackWith(await atForge(res.body.authorize_url), cookie);
  expect(done.status).toBe(201);
  expect(done.body).toMatchObject({ forge: 'github', forge_url: peer.url, forge_user_id: String(user.id), login: user.login });

  const listed = await t.as(dana.token).get('/v1/me/forge-links');
  expect(listed.status).toBe(200);
  expect(listed.body.links).toEqual([done.body]);
  expect(listed.body.linkable).toEqual([
    { forge: 'github', forge_url: peer.url },
    { forge: 'gitlab', forge_url: peer.url },
    { forge: 'gitea', forge_url: peer.url },
  ]);
  // Another person sees only their own.
  const other = await person(t.api, 'viewer');
  expect((await t.as(other.token).get('/v1/me/forge-links')).body.links).toEqual([]);
  expect((await t.as(other.token).request('DELETE', `/v1/me/forge-links/${done.body.id}`)).status).toBe(404);

  expect((await t.as(dana.token).request('DELETE', `/v1/me/forge-links/${done.body.id}`)).status).toBe(204);
  expect((await t.as(dana.token).get('/v1/me/forge-links')).body.links).toEqual([]);

  const audit = await t.api.get('/v1/audit?limit=1000');
  const entries = (audit.body.entries as any[]).filter((e) => e.body.link_id === done.body.id);
  // Newest first.
  expect(entries.map((e) => [e.body.kind, e.actor, e.path])).toEqual([
    ['forge_link.deleted', dana.username, `/v1/me/forge-links/${done.body.id}`],
    ['forge_link.created', dana.username, '/auth/forge/callback'],
  ]);
  const everything = JSON.stringify(audit.body) + JSON.stringify(listed.body) + done.text;
  expect(everything).not.toContain(CLIENT.secret);
  for (const token of peer.issuedTokens) expect(everything).not.toContain(token);
});

test('a Gitea link reads /api/v1/user', async () => {
  const erin = await person(t.api, 'operator');
  const user = forgeUser();
  const done = await link(erin.token, user, 'gitea');
  expect(done.status).toBe(201);
  expect(done.body).toMatchObject({ forge: 'gitea', forge_user_id: String(user.id), login: user.login });
});

test('a GitLab link uses /oauth/authorize and reads /api/v4/user (username as login)', async () => {
  const frank = await person(t.api, 'viewer');
  const user = forgeUser();
  peer.signIn(user);
  const { res } = await start(frank.token, 'gitlab');
  expect(new URL(res.body.authorize_url).pathname).toBe('/oauth/authorize');
  expect(new URL(res.body.authorize_url).searchParams.get('scope')).toBe('read_user');
  const done = await link(frank.token, user, 'gitlab');
  expect(done.status).toBe(201);
  expect(done.body).toMatchObject({ forge: 'gitlab', forge_user_id: String(user.id), login: user.login });
});

test('a forge that answers an error, or a code it does not accept, links nothing', async () => {
  const p = await person(t.api, 'viewer');
  peer.signIn(forgeUser());
  const declined = await start(p.token);
  const back = new URL(callback);
  back.searchParams.set('state', new URL(declined.res.body.authorize_url).searchParams.get('state')!);
  back.searchParams.set('error', 'access_denied');
  expect((await callbackWith(back.toString(), declined.cookie)).status).toBe(401);

  const forged = await start(p.token);
  const url = new URL(await atForge(forged.res.body.authorize_url));
  url.searchParams.set('code', 'not-a-code-the-forge-issued');
  const refused = await callbackWith(url.toString(), forged.cookie);
  expect(refused.status).toBe(401);
  expect(refused.text).toContain('invalid_grant');
  expect((await t.as(p.token).get('/v1/me/forge-links')).body.links).toEqual([]);
});

test('an agent may not link or unlink: 403', async () => {
  const owner = await person(t.api, 'operator');
  const agent = await tokenOf(t.api, owner, 'agent');
  const res = await t.as(agent).post('/v1/me/forge-links', { forge: 'github' });
  expect(res.status).toBe(403);
  expect(res.headers.get('set-cookie')).toBeNull();
  expect((await t.as(agent).request('DELETE', '/v1/me/forge-links/flk_x')).status).toBe(403);
});

test('bad input names the field; no token is a 401', async () => {
  const p = await person(t.api, 'viewer');
  const res = await t.as(p.token).post('/v1/me/forge-links', { forge: 'bitbucket' });
  expect(res.status).toBe(400);
  expect(res.text).toContain('forge');
  const missing = await t.as(p.token).post('/v1/me/forge-links', {});
  expect(missing.status).toBe(400);
  expect(missing.text).toContain('forge');
  expect((await t.as(null).post('/v1/me/forge-links', { forge: 'github' })).status).toBe(401);
  expect((await t.as(null).get('/v1/me/forge-links')).status).toBe(401);
});

test('a tampered state, a missing cookie, another browser\'s cookie, and a replayed callback are refused', async () => {
  const p = await person(t.api, 'viewer');
  peer.signIn(forgeUser());

  const first = await start(p.token);
  const back = new URL(await atForge(first.res.body.authorize_url));
  back.searchParams.set('state', 'x'.repeat(43));
  const tampered = await callbackWith(back.toString(), first.cookie);
  expect(tampered.status).toBe(400);
  expect(tampered.body.field).toBe('state');

  const second = await start(p.token);
  const missing = await callbackWith(await atForge(second.res.body.authorize_url));
  expect(missing.status).toBe(400);

  const mine = await start(p.token);
  const theirs = await start((await person(t.api, 'viewer')).token);
  const wrongBrowser = await callbackWith(await atForge(mine.res.body.authorize_url), theirs.cookie);
  expect(wrongBrowser.status).toBe(400);

  const fresh = await start(p.token);
  const url = await atForge(fresh.res.body.authorize_url);
  expect((await callbackWith(url, fresh.cookie)).status).toBe(201);
  expect((await callbackWith(url, fresh.cookie)).status).toBe(400);
  expect((await t.as(p.token).get('/v1/me/forge-links')).body.links).toHaveLength(1);
});

test('a forge account linked to one person cannot be linked by another: 409; relinking by the same person is harmless', async () => {
  const user = forgeUser();
  const a = await person(t.api, 'viewer');
  const b = await person(t.api, 'viewer');
  expect((await link(a.token, user)).status).toBe(201);
  const again = await link(a.token, user);
  expect(again.status).toBe(201);
  expect((await t.as(a.token).get('/v1/me/forge-links')).body.links).toHaveLength(1);
  const taken = await link(b.token, user);
  expect(taken.status).toBe(409);
  expect((await t.as(b.token).get('/v1/me/forge-links')).body.links).toEqual([]);
});

test('calls to the forge pass the egress rule: a forge on loopback without SERVICE_EGRESS_ALLOW is refused (502), nothing linked', async () => {
  const port = await reservePort();
  const closed = await startTestServer({
    CAIRN_LISTEN: `127.0.0.1:${port}`,
    CAIRN_FORGE_REDIRECT_URL: `http://127.0.0.1:${port}/auth/forge/callback`,
    CAIRN_FORGE_GITEA_URL: peer.url,
    CAIRN_FORGE_GITEA_CLIENT_ID: CLIENT.id,
    CAIRN_FORGE_GITEA_CLIENT_SECRET: CLIENT.secret,
  });
  try {
    const p = await person(closed.api, 'viewer');
    const res = await closed.as(p.token).post('/v1/me/forge-links', { forge: 'gitea' });
    expect(res.status).toBe(201);
    const cookie = (res.headers.get('set-cookie') ?? '').split(';')[0];
    const back = new URL(`${closed.url}/auth/forge/callback`);
    back.searchParams.set('state', new URL(res.body.authorize_url).searchParams.get('state')!);
    back.searchParams.set('code', 'any');
    const answer = await callbackWith(back.toString(), cookie);
    expect(answer.status).toBe(502);
    expect(answer.text).toContain('refused by the egress rule');
    expect(answer.text).not.toContain(CLIENT.secret);
    expect((await closed.as(p.token).get('/v1/me/forge-links')).body.links).toEqual([]);
  } finally {
    await closed.stop();
  }
});
