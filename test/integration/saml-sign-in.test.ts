import { randomBytes } from 'node:crypto';
import { inflateRawSync } from 'node:zlib';
import { startTestServer, type TestServer } from '../support/server';
import { reservePort, TestBrowser } from '../support/oidc';
import { TestIdentityProvider, type AnswerOptions } from '../support/saml-idp';

/**
 * SAML 2.0 sign-in against an identity provider of the test's own (test/support/saml-idp.ts): the
 * AuthnRequest Cairn redirects to is decoded there, and the Response it answers is signed with a
 * key pair made for the test, then posted to the assertion consumer service over plain HTTP, as a
 * browser would. The attacks are answers a forging or confused party could post.
 */

let port: number;
let acs: string;
let idp: TestIdentityProvider;
let t: TestServer;
let opsTeam: string;

beforeAll(async () => {
  port = await reservePort();
  acs = `http://127.0.0.1:${port}/auth/saml/acs`;
  idp = await new TestIdentityProvider().start();
  t = await startTestServer({
    CAIRN_LISTEN: `127.0.0.1:${port}`,
    CAIRN_SAML_IDP_SSO_URL: `${idp.url}/sso`,
    CAIRN_SAML_IDP_ENTITY_ID: idp.entityId,
    CAIRN_SAML_IDP_CERT: idp.keys.cert,
    CAIRN_SAML_SP_ENTITY_ID: 'cairn-test-sp',
    CAIRN_SAML_ACS_URL: acs,
    CAIRN_SAML_USERNAME_ATTRIBUTE: 'username',
    CAIRN_SAML_ROLE_MAP: 'cairn-admins=admin,cairn-ops=operator',
    CAIRN_SAML_TEAM_MAP: 'cairn-ops=ops',
  });
  opsTeam = (await t.api.post('/v1/teams', { name: 'ops' })).body.id;
});
afterAll(async () => {
  await t?.stop();
  await idp?.stop();
});

const unique = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;

/** Starts a sign-in at Cairn and follows it to the provider; the form its page would post. */
async function atProvider(mode: 'token' | 'console' = 'token', browser = new TestBrowser()) {
  const start = await browser.request(`${t.url}/auth/saml/login?mode=${mode}`);
  expect(start.status).toBe(302);
  const page = await browser.request(start.location!);
  expect(page.status).toBe(200);
  const action = /<form method="post" action="([^"]+)"/.exec(page.text)![1];
  const SAMLResponse = /name="SAMLResponse" value="([^"]+)"/.exec(page.text)![1];
  return { browser, action, SAMLResponse, request: idp.requests.at(-1)! };
}

const post = (SAMLResponse: string, browser = new TestBrowser()) => browser.request(acs, { method: 'POST', form: { SAMLResponse, RelayState: '' } });

/** A whole sign-in of `nameId` with these attributes. */
async function signIn(nameId: string, groups: string[] = [], mode: 'token' | 'console' = 'token') {
  idp.person = { nameId, attributes: { username: [nameId], groups } };
  const { browser, action, SAMLResponse } = await atProvider(mode);
  expect(action).toBe(acs);
  return { browser, res: await post(SAMLResponse, browser) };
}

/** A fresh request's id, and the answer the provider would give to it with these faults. */
async function forged(options: Partial<AnswerOptions>) {
  const start = await new TestBrowser().request(`${t.url}/auth/saml/login?mode=token`);
  const xml = inflateRawSync(Buffer.from(new URL(start.location!).searchParams.get('SAMLRequest')!, 'base64')).toString('utf8');
  const requestId = /\sID="([^"]+)"/.exec(xml)![1];
  return idp.responseXml({ requestId, acsUrl: acs, nameId: unique('mallory'), attributes: { groups: ['cairn-admins'] }, ...options });
}

const b64 = (xml: string) => Buffer.from(xml).toString('base64');

async function usernames(): Promise<string[]> {
  return (await t.api.get('/v1/users?limit=1000')).body.users.map((u: any) => u.username);
}

test('a first sign-in makes the account with the mapped role and team; the next finds it', async () => {
  const nameId = unique('dana');
  const first = await signIn(nameId, ['cairn-ops', 'unmapped']);
  expect(first.res.status).toBe(200);
  expect(first.res.body).toMatchObject({ username: nameId, role: 'operator', token: expect.stringMatching(/^cairn_/) });
  const me = (await t.as(first.res.body.token).get('/v1/auth/me')).body;
  expect(me).toMatchObject({ username: nameId, role: 'operator', token: { kind: 'session', name: 'saml session' } });
  expect((await t.api.get(`/v1/teams/${opsTeam}/members`)).body.members.map((m: any) => m.user_id)).toContain(me.id);

  // The provider now says admin: the role follows at the next sign-in, the team is left.
  const second = await signIn(nameId, ['cairn-admins']);
  expect(second.res.body.role).toBe('admin');
  expect((await t.as(second.res.body.token).get('/v1/auth/me')).body.id).toBe(me.id);
  expect((await t.api.get(`/v1/teams/${opsTeam}/members`)).body.members.map((m: any) => m.user_id)).not.toContain(me.id);

  const entries = (await t.api.get('/v1/audit?limit=1000')).body.entries.filter((e: any) => e.body.account_id === me.id);
  const kinds = entries.map((e: any) => [e.body.kind, e.body.via, e.method, e.path]);
  expect(kinds).toContainEqual(['user.created', 'saml', 'POST', '/auth/saml/acs']);
  expect(kinds.filter(([kind]: string[]) => kind === 'session.created')).toHaveLength(2);
  expect(kinds.map(([kind]: string[]) => kind)).toEqual(expect.arrayContaining(['team.member_added', 'team.member_removed', 'user.updated']));
});

test('the AuthnRequest names this service provider and its ACS, and its id is answered once', async () => {
  const { request } = await atProvider();
  expect(request.acsUrl).toBe(acs);
  expect(request.xml).toContain('<saml:Issuer xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion">cairn-test-sp</saml:Issuer>');
  expect(request.xml).toContain(`Destination="${idp.url}/sso"`);
});

test('the console lands signed in with its session cookie', async () => {
  const nameId = unique('finn');
  const { browser, res } = await signIn(nameId, [], 'console');
  expect(res.status).toBe(303);
  expect(res.location).toBe(`http://127.0.0.1:${port}/ui/`);
  expect(res.headers.getSetCookie()).toContainEqual(expect.stringMatching(/^cairn_session=cairn_[^;]+; Path=\/; HttpOnly; SameSite=Strict/));
  const me = await browser.request(`${t.url}/v1/auth/me`, { headers: { 'X-Cairn-Console': '1' } });
  expect([me.status, me.body.username, me.body.role]).toEqual([200, nameId, 'viewer']);
});

test('the metadata names the service provider, its ACS and signed assertions; the console is told sign-in is on', async () => {
  const res = await t.as(null).get('/auth/saml/metadata');
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/samlmetadata\+xml/);
  expect(res.text).toContain('entityID="cairn-test-sp"');
  expect(res.text).toContain('WantAssertionsSigned="true"');
  expect(res.text).toContain(`Location="${acs}"`);
  expect((await t.as(null).get('/auth/saml')).body).toEqual({ enabled: true, login_url: '/auth/saml/login' });
});

describe('refused', () => {
  const refusedWith = async (SAMLResponse: string, reason: RegExp) => {
    const before = await usernames();
    const res = await post(SAMLResponse);
    expect(res.status).toBe(401);
    expect(res.body.error).toMatch(/^the SAML sign-in was refused: /);
    expect(res.body.error).toMatch(reason);
    expect(res.body.token).toBeUndefined();
    expect(await usernames()).toEqual(before);
  };

  test('an assertion signed by another key', async () => {
    await refusedWith(b64(await forged({ signing: 'other-key' })), /Invalid signature/);
  });

  test('an unsigned assertion', async () => {
    await refusedWith(b64(await forged({ signing: 'none' })), /Invalid signature/);
  });

  test.each(['beside', 'inside'])('a wrapped signature: the signed assertion moved %s an unsigned one where the service provider reads', async (where) => {
    const signed = await forged({ nameId: unique('victim'), attributes: { groups: [] } });
    const original = /<saml:Assertion[\s\S]*<\/saml:Assertion>/.exec(signed)![0];
    // The evil assertion keeps the ID and the signature (which still digests the original), but names another person as admin.
    const evil = original.replace(/(<saml:NameID[^>]*>)[^<]*/, '$1evil-admin').replace(/<saml:AttributeValue>[^<]*/, '<saml:AttributeValue>cairn-admins');
    const wrapped =
      where === 'beside'
        ? signed.replace(original, `<samlp:Extensions>${original}</samlp:Extensions>${evil}`)
        : signed.replace(original, evil.replace('</saml:Subject>', `</saml:Subject>${original}`));
    await refusedWith(b64(wrapped), /signature/i);
    expect(await usernames()).not.toContain('evil-admin');
  });

  test('a replayed response, and the same assertion put to a fresh request', async () => {
    const nameId = unique('ives');
    idp.person = { nameId };
    const { SAMLResponse } = await atProvider();
    expect((await post(SAMLResponse)).status).toBe(200);
    await refusedWith(SAMLResponse, /InResponseTo is not valid/);

    // An assertion not tied to its request (no InResponseTo in its subject confirmation), re-sent in answer to a new one.
    const loose = await forged({ nameId: unique('loose'), subjectInResponseTo: false });
    expect((await post(b64(loose))).status).toBe(200);
    const again = await forged({});
    const requestId = /InResponseTo="([^"]+)"/.exec(again)![1];
    const replay = loose.replace(/(<samlp:Response[^>]*InResponseTo=")[^"]+/, `$1${requestId}`);
    await refusedWith(b64(replay), /the assertion was already used/);
  });

  test('an expired assertion, past the clock skew', async () => {
    await refusedWith(b64(await forged({ notOnOrAfter: new Date(Date.now() - 5 * 60_000) })), /subject confirmation|expired/);
  });

  test('another audience', async () => {
    await refusedWith(b64(await forged({ audience: 'some-other-sp' })), /audience/);
  });

  test('another recipient, or another destination', async () => {
    await refusedWith(b64(await forged({ recipient: 'https://elsewhere.example.com/acs' })), /another recipient/);
    await refusedWith(b64(await forged({ destination: 'https://elsewhere.example.com/acs' })), /another destination/);
  });

  test('another issuer, signed by the trusted key', async () => {
    await refusedWith(b64(await forged({ issuer: 'https://impostor.example.com' })), /another identity provider/);
  });

  test('an InResponseTo Cairn never sent, or none', async () => {
    await refusedWith(b64(idp.responseXml({ requestId: '_never-sent', acsUrl: acs, nameId: unique('nina') })), /InResponseTo is not valid/);
    await refusedWith(b64(idp.responseXml({ requestId: undefined, acsUrl: acs, nameId: unique('nina') })), /InResponseTo is missing/);
  });

  test('a request answered by a refused response is spent', async () => {
    const signed = await forged({ signing: 'other-key' });
    await refusedWith(b64(signed), /Invalid signature/);
    const requestId = /InResponseTo="([^"]+)"/.exec(signed)![1];
    await refusedWith(b64(idp.responseXml({ requestId, acsUrl: acs, nameId: unique('late') })), /InResponseTo is not valid/);
  });

  test('a disabled account, until it is enabled again', async () => {
    const nameId = unique('jude');
    const first = (await signIn(nameId)).res.body;
    const id = (await t.as(first.token).get('/v1/auth/me')).body.id;
    expect((await t.api.request('PUT', `/v1/users/${id}`, { body: { disabled: true } })).status).toBe(200);
    const refused = await signIn(nameId);
    expect(refused.res.status).toBe(403);
    expect(refused.res.body.error).toBe(`the account ${nameId} is disabled; an admin enables it again with PUT /v1/users/${id}`);
    await t.api.request('PUT', `/v1/users/${id}`, { body: { disabled: false } });
    expect((await signIn(nameId)).res.status).toBe(200);
  });

  test('a form without SAMLResponse is a 400 naming it', async () => {
    const res = await new TestBrowser().request(acs, { method: 'POST', form: { RelayState: 'x' } });
    expect([res.status, res.body]).toEqual([400, { error: 'SAMLResponse: SAMLResponse is required', field: 'SAMLResponse' }]);
  });
});
