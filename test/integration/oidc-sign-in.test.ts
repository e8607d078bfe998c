import { randomBytes } from 'node:crypto';
import { startTestServer, type TestServer } from '../support/server';
import { reservePort, startTestProvider, TestBrowser, type TestProvider } from '../support/oidc';

/**
 * OpenID Connect sign-in against a real, certified OpenID provider (oidc-provider in its own
 * process, PKCE required, its development login and consent forms driven over plain HTTP).
 */

const CLIENT = { id: 'cairn-test', secret: `secret-${randomBytes(12).toString('hex')}` };
let port: number;
let callback: string;
let provider: TestProvider;
let t: TestServer;
let opsTeam: string;

beforeAll(async () => {
  port = await reservePort();
  callback = `http://127.0.0.1:${port}/auth/oidc/callback`;
  provider = await startTestProvider({ ...CLIENT, redirectUri: callback });
  t = await startTestServer({
    CAIRN_LISTEN: `127.0.0.1:${port}`,
    CAIRN_OIDC_ISSUER: provider.issuer,
    CAIRN_OIDC_CLIENT_ID: CLIENT.id,
    CAIRN_OIDC_CLIENT_SECRET: CLIENT.secret,
    CAIRN_OIDC_REDIRECT_URL: callback,
    CAIRN_OIDC_SCOPES: 'openid profile email groups',
    CAIRN_OIDC_ROLE_MAP: 'cairn-admins=admin,cairn-ops=operator',
    CAIRN_OIDC_TEAM_MAP: 'cairn-ops=ops',
  });
  opsTeam = (await t.api.post('/v1/teams', { name: 'ops' })).body.id;
});
afterAll(async () => {
  await t?.stop();
  await provider?.stop();
});

const unique = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;

/** Signs `subject` in at the provider from a fresh browser; the callback address it is sent back to. */
async function atCallback(subject: string, mode: 'token' | 'console' = 'token', browser = new TestBrowser()) {
  const url = await browser.travel(`${t.url}/auth/oidc/login?mode=${mode}`, callback, subject);
  return { browser, url };
}

/** A whole sign-in: the callback's answer. */
async function signIn(subject: string, mode: 'token' | 'console' = 'token') {
  const { browser, url } = await atCallback(subject, mode);
  return { browser, res: await browser.request(url) };
}

async function entriesAbout(accountId: string) {
  const { body } = await t.api.get('/v1/audit?limit=1000');
  return (body.entries as any[]).filter((e) => e.body.account_id === accountId);
}

test('a first sign-in makes the account with the mapped role and team; the next finds it', async () => {
  const subject = unique('dana');
  await provider.setClaims({ [subject]: { groups: ['cairn-ops', 'unmapped'] } });

  const first = await signIn(subject);
  expect(first.res.status).toBe(200);
  expect(first.res.body).toMatchObject({ username: subject, role: 'operator', token: expect.stringMatching(/^cairn_/) });
  const me = await t.as(first.res.body.token).get('/v1/auth/me');
  expect(me.body).toMatchObject({ username: subject, role: 'operator', kind: 'user', token: { kind: 'session', name: 'oidc session' } });
  const members = await t.api.get(`/v1/teams/${opsTeam}/members`);
  expect(members.body.members.map((m: any) => m.user_id)).toContain(me.body.id);

  const second = await signIn(subject);
  expect(second.res.status).toBe(200);
  expect((await t.as(second.res.body.token).get('/v1/auth/me')).body.id).toBe(me.body.id);
  const named = (await t.api.get('/v1/users?limit=1000')).body.users.filter((u: any) => u.username === subject);
  expect(named).toHaveLength(1);

  const kinds = (await entriesAbout(me.body.id)).map((e) => [e.body.kind, e.body.via, e.actor, e.method, e.path]);
  expect(kinds.filter(([kind]) => kind === 'user.created')).toEqual([['user.created', 'oidc', subject, 'GET', '/auth/oidc/callback']]);
  expect(kinds.filter(([kind]) => kind === 'session.created')).toHaveLength(2);
  expect(kinds.filter(([kind]) => kind === 'team.member_added')).toHaveLength(1);
  const chain = JSON.stringify((await t.api.get('/v1/audit?limit=1000')).body);
  expect(chain).not.toContain(CLIENT.secret);
  expect(chain).not.toContain(first.res.body.token);
});

test('the claims decide role and teams again at every sign-in', async () => {
  const subject = unique('erin');
  await provider.setClaims({ [subject]: { groups: ['cairn-ops'] } });
  const asOperator = await signIn(subject);
  const id = (await t.as(asOperator.res.body.token).get('/v1/auth/me')).body.id;

  await provider.setClaims({ [subject]: { groups: ['cairn-admins'] } });
  expect((await signIn(subject)).res.body.role).toBe('admin');
  const members = (await t.api.get(`/v1/teams/${opsTeam}/members`)).body.members.map((m: any) => m.user_id);
  expect(members).not.toContain(id);

  // No mapped value: the default role, viewer.
  await provider.setClaims({ [subject]: { groups: [] } });
  expect((await signIn(subject)).res.body.role).toBe('viewer');
  const kinds = (await entriesAbout(id)).map((e) => `${e.body.kind}:${e.body.role ?? ''}`);
  expect(kinds).toEqual(expect.arrayContaining(['user.updated:admin', 'user.updated:viewer', 'team.member_removed:']));
});

test('the console lands signed in with its session cookie, as a password login leaves it', async () => {
  const subject = unique('finn');
  const { browser, res } = await signIn(subject, 'console');
  expect(res.status).toBe(303);
  expect(res.location).toBe(`http://127.0.0.1:${port}/ui/`);
  const setCookies = res.headers.getSetCookie();
  expect(setCookies).toContainEqual(expect.stringMatching(/^cairn_session=cairn_[^;]+; Path=\/; HttpOnly; SameSite=Strict; Max-Age=43\d{3}/));
  expect(setCookies).toContainEqual(expect.stringMatching(/^cairn_oidc=; Path=\/auth\/oidc; HttpOnly; SameSite=Lax; Max-Age=0/));
  expect(res.text).not.toMatch(/cairn_[A-Za-z0-9_-]{20}/);

  const me = await browser.request(`${t.url}/v1/auth/me`, { headers: { 'X-Cairn-Console': '1' } });
  expect([me.status, me.body.username]).toEqual([200, subject]);
  const out = await browser.request(`${t.url}/v1/auth/logout`, { method: 'POST', headers: { 'X-Cairn-Console': '1' } });
  expect(out.status).toBe(204);
  expect((await browser.request(`${t.url}/v1/auth/me`, { headers: { 'X-Cairn-Console': '1' } })).status).toBe(401);
});

test('the login sends the browser with PKCE (S256), state and nonce, bound by a short-lived Lax cookie', async () => {
  const res = await new TestBrowser().request(`${t.url}/auth/oidc/login`);
  expect(res.status).toBe(302);
  const url = new URL(res.location!);
  expect(url.origin + url.pathname).toBe(`${provider.issuer}/auth`);
  expect(Object.fromEntries(url.searchParams)).toMatchObject({
    response_type: 'code',
    client_id: CLIENT.id,
    redirect_uri: callback,
    scope: 'openid profile email groups',
    code_challenge_method: 'S256',
    code_challenge: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    state: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    nonce: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
  });
  expect(res.headers.getSetCookie()).toEqual([expect.stringMatching(/^cairn_oidc=[A-Za-z0-9_-]{43}; Path=\/auth\/oidc; HttpOnly; SameSite=Lax; Max-Age=600$/)]);
  expect((await t.as(null).get('/auth/oidc/login?mode=cli')).body).toEqual({ error: 'mode: mode must be console or token', field: 'mode' });
});

describe('refused', () => {
  test('an answer whose state is not the one this browser started; the sign-in is spent either way', async () => {
    const { browser, url } = await atCallback(unique('gale'));
    const forged = new URL(url);
    forged.searchParams.set('state', randomBytes(32).toString('base64url'));
    const wrong = await browser.request(forged.href);
    expect([wrong.status, wrong.body.field]).toEqual([400, 'state']);
    expect(wrong.body.token).toBeUndefined();
    expect((await browser.request(url)).status).toBe(400);
  });

  test("another browser's answer: the cookie binding the sign-in is missing", async () => {
    const { url } = await atCallback(unique('hale'));
    const res = await new TestBrowser().request(url);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/^no OpenID Connect sign-in is under way in this browser/);
  });

  test('a replayed code: the same answer again, and the code under a new sign-in', async () => {
    const { browser, url } = await atCallback(unique('ives'));
    expect((await browser.request(url)).status).toBe(200);
    expect((await browser.request(url)).status).toBe(400);

    // The code again, under a fresh sign-in of the same browser with its own state: the provider refuses it.
    const again = await browser.request(`${t.url}/auth/oidc/login?mode=token`);
    const state = new URL(again.location!).searchParams.get('state')!;
    const replay = new URL(url);
    replay.searchParams.set('state', state);
    const res = await browser.request(replay.href);
    expect(res.status).toBe(401);
    expect(res.body.error).toMatch(/the provider did not accept the authorization code \(invalid_grant\)/);
  });

  test.each([
    ['nonce', /nonce is not the one this sign-in sent/],
    ['other-key', /signature does not verify against the provider's published keys/],
    ['expired', /the ID token has expired/],
  ] as const)('an ID token with a forged %s', async (fault, reason) => {
    const subject = unique(`forged-${fault}`);
    const { browser, url } = await atCallback(subject);
    await provider.tamperNextIdToken(fault);
    const res = await browser.request(url);
    expect(res.status).toBe(401);
    expect(res.body.error).toMatch(reason);
    expect(res.body.token).toBeUndefined();
    expect((await t.api.get('/v1/users?limit=1000')).body.users.map((u: any) => u.username)).not.toContain(subject);
  });

  test('a disabled account, whose tokens stop working too, until it is enabled again', async () => {
    const subject = unique('jude');
    const first = (await signIn(subject)).res.body;
    const id = (await t.as(first.token).get('/v1/auth/me')).body.id;
    const disabled = await t.api.request('PUT', `/v1/users/${id}`, { body: { disabled: true } });
    expect([disabled.status, disabled.body.disabled]).toEqual([200, true]);
    expect((await t.as(first.token).get('/v1/auth/me')).status).toBe(401);

    const refused = await signIn(subject);
    expect(refused.res.status).toBe(403);
    expect(refused.res.body.error).toBe(`the account ${subject} is disabled; an admin enables it again with PUT /v1/users/${id}`);

    await t.api.request('PUT', `/v1/users/${id}`, { body: { disabled: false } });
    expect((await t.as(first.token).get('/v1/auth/me')).status).toBe(200);
    expect((await signIn(subject)).res.status).toBe(200);
  });

  test('a deleted account: its tokens are dead and it never signs in again; the person gets a new account', async () => {
    const subject = unique('kit');
    const first = (await signIn(subject)).res.body;
    const id = (await t.as(first.token).get('/v1/auth/me')).body.id;
    expect((await t.api.request('DELETE', `/v1/users/${id}`)).status).toBe(204);
    expect((await t.as(first.token).get('/v1/auth/me')).status).toBe(401);

    const next = (await signIn(subject)).res.body;
    const me = (await t.as(next.token).get('/v1/auth/me')).body;
    expect(me.id).not.toBe(id);
    expect(me.username).toBe(subject);
  });
});
