import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

/** Answers the specification states for federation, held runs, reruns, pipelines and the run list. */

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.stop();
});

async function auditSize(): Promise<number> {
  return (await t.api.get('/v1/audit?limit=1')).body.total;
}

describe('federation discovery documents', () => {
  test.each(['/.well-known/openid-configuration', '/.well-known/jwks.json'])(
    '%s needs no token and answers 404 saying federation is not configured',
    async (path) => {
      for (const token of [null, t.adminToken]) {
        const res = await t.as(token).get(path);
        expect(res.status).toBe(404);
        expect(res.headers.get('content-type')).toMatch(/^application\/json/);
        expect(res.body).toEqual({ error: 'federation is not configured: --federation-issuer is not set' });
      }
    },
  );

  test('other .well-known paths still need a token', async () => {
    expect((await t.as(null).get('/.well-known/openid-configuration/extra')).status).toBe(401);
    expect((await t.as(null).get('/.well-known/webfinger')).status).toBe(401);
  });
});

describe('OpenID Connect sign-in on a server without --oidc-issuer', () => {
  test.each(['/auth/oidc/login', '/auth/oidc/callback?code=x&state=y'])('%s needs no token and answers 404 naming the flag', async (path) => {
    const res = await t.as(null).get(path);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'OpenID Connect sign-in is not configured on this server: --oidc-issuer (CAIRN_OIDC_ISSUER) is not set' });
    expect(res.headers.get('set-cookie')).toBeNull();
  });

  test('the console is told sign-in is off', async () => {
    const res = await t.as(null).get('/auth/oidc');
    expect([res.status, res.body]).toEqual([200, { enabled: false }]);
  });
});

describe('SAML sign-in on a server without --saml-idp-sso-url', () => {
  test.each([
    ['GET', '/auth/saml/login'],
    ['GET', '/auth/saml/metadata'],
    ['POST', '/auth/saml/acs'],
  ])('%s %s needs no token and answers 404 naming the flag', async (method, path) => {
    const res = await t.as(null).request(method, path);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'SAML sign-in is not configured on this server: --saml-idp-sso-url (CAIRN_SAML_IDP_SSO_URL) is not set' });
  });

  test('the console is told sign-in is off', async () => {
    const res = await t.as(null).get('/auth/saml');
    expect([res.status, res.body]).toEqual([200, { enabled: false }]);
  });
});

test('a held run’s run.held event carries the run beside its blocker and hold', async () => {
  const minted = await t.api.post('/v1/tokens', { name: 'held-bot', kind: 'agent' });
  expect(minted.status).toBe(201);
  const { body: run } = await t.as(minted.body.token).post('/v1/runs', { tool: 'bash', command: 'echo held' });
  expect(run.status).toBe('held');
  const events = (await t.api.get(`/v1/runs/${run.id}/events`)).body.events;
  const held = events.find((e: any) => e.event === 'run.held');
  expect(held).toMatchObject({
    blocker: 'approval_needed',
    hold: { agent_hold: true, policies: [] },
    run: { id: run.id, status: 'held', blocker: 'approval_needed', command: 'echo held', hold: { agent_hold: true } },
  });
  await t.api.post(`/v1/runs/${run.id}/reject`, {});
});

describe('a rerun or retry whose stored configuration cannot start answers 409 with the reason', () => {
  /** A finished run, then its stored row changed as an install that has since lost what it needs would hold it. */
  async function finished(body: Record<string, unknown>): Promise<string> {
    const { body: run } = await t.api.post('/v1/runs', body);
    return (await waitForRunEnd(t.api, run.id)).id;
  }
  const sql = () => t.server.context.sql;
  const noLongerServed = (id: string) => sql()`UPDATE runs SET tool = 'powershell' WHERE id = ${id}`;
  const tooLargeToStart = (id: string) =>
    sql()`UPDATE runs SET spec = jsonb_set(spec, '{extra_vars}', ${sql().json({ BIG: 'x'.repeat(200_000) })}) WHERE id = ${id}`;

  test.each([
    ['rerun', 'a tool this server no longer runs', { tool: 'bash', command: 'true' }, noLongerServed, /^the powershell tool is missing on this server: pwsh is not on its PATH$/, 'tool'],
    ['rerun', 'an environment too large to start', { tool: 'bash', command: 'true' }, tooLargeToStart, /^extra_vars\.BIG is \d+ bytes; one variable passed to a tool holds at most/, 'extra_vars.BIG'],
    ['retry', 'an environment too large to start', { tool: 'bash', command: 'exit 1', shards: 2 }, tooLargeToStart, /^step shard-\d: extra_vars\.BIG is \d+ bytes/, 'extra_vars.BIG'],
  ] as const)('%s of %s', async (action, _why, body, change, message, field) => {
    const id = await finished(body);
    await change(id);
    const before = await auditSize();
    const res = await t.api.post(`/v1/runs/${id}/${action}`, undefined);
    expect(res.status).toBe(409);
    expect(res.body.error).toMatch(message);
    expect(res.body.field).toBe(field);
    expect(await auditSize()).toBe(before);
  });

  test('a submission with the same configuration is still a 400', async () => {
    const res = await t.api.post('/v1/runs', { tool: 'powershell', command: 'true' });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'the powershell tool is missing on this server: pwsh is not on its PATH', field: 'tool' });
  });
});

test('a pipeline repeated with the same Idempotency-Key answers 200 with the first pipeline and records nothing', async () => {
  const body = { steps: [{ tool: 'bash', command: 'echo once' }] };
  const headers = { 'idempotency-key': 'pipeline-once' };
  const first = await t.api.request('POST', '/v1/pipelines', { body, headers });
  expect(first.status).toBe(201);
  const before = await auditSize();
  const again = await t.api.request('POST', '/v1/pipelines', { body, headers });
  expect(again.status).toBe(200);
  expect(again.body.id).toBe(first.body.id);
  expect(again.headers.get('location')).toBe(`/v1/runs/${first.body.id}`);
  expect(await auditSize()).toBe(before);
  const parents = (await t.api.get('/v1/runs?tool=pipeline&limit=1000')).body.runs;
  expect(parents.map((r: any) => r.id)).toEqual([first.body.id]);
});

test('listing runs by task: an empty task is refused naming it; a task no run has lists none', async () => {
  const empty = await t.api.get('/v1/runs?task=');
  expect(empty.status).toBe(400);
  expect(empty.body.field).toBe('task');
  const none = await t.api.get('/v1/runs?task=deploy');
  expect(none.status).toBe(200);
  expect(none.body).toMatchObject({ count: 0, total: 0 });
});
