import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../core/config';
import { createLogger } from '../../cli/serve';
import { generateSigningKey, signDocument, type SigningKey } from '../../core/audit/signing';
import { connectDatabase } from '../../store/db';
import { insertPolicy, type PolicyFields } from '../../store/policies';
import { createTestDatabase } from '../support/database';
import { startServerInProcess, startTestServer, testSettings, type TestServer } from '../support/server';
import { tempDir } from '../support/temp';

const unique = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** A license file for the tier, signed by the key; the server trusts the key only when told to. */
async function licenseFile(key: SigningKey, tier: 'pro' | 'team'): Promise<string> {
  const issuedAt = new Date(Date.now() - 60_000).toISOString();
  const text = await signDocument({ licensee: 'Cairn tests', tier, issued_at: issuedAt }, key.privateJwk, key.keyId);
  const file = path.join(tempDir('cairn-license'), 'license.jws');
  writeFileSync(file, `${text}\n`);
  return file;
}

async function licensedServer(tier: 'pro' | 'team'): Promise<TestServer> {
  const key = await generateSigningKey();
  return startTestServer({ CAIRN_LICENSE_FILE: await licenseFile(key, tier) }, { licenseKeys: [key.publicJwk] });
}

/** A fresh account in the role and a token of the kind for it, minted by the admin. */
async function tokenFor(t: TestServer, role: 'admin' | 'operator' | 'viewer', kind: 'user' | 'agent' = 'user'): Promise<string> {
  const username = unique(role);
  const user = await t.api.post('/v1/users', { username, role });
  if (user.status !== 201) throw new Error(`creating ${username} failed: ${user.status} ${user.text}`);
  const minted = await t.api.post('/v1/tokens', { name: 'test', username, kind });
  if (minted.status !== 201) throw new Error(`minting for ${username} failed: ${minted.status} ${minted.text}`);
  return minted.body.token as string;
}

const create = (t: TestServer, body: unknown, token?: string) => t.api.post('/v1/policies', body, token);
const replace = (t: TestServer, id: string, body: unknown, token?: string) => t.api.request('PUT', `/v1/policies/${id}`, { body, token });
const remove = (t: TestServer, id: string, token?: string) => t.api.request('DELETE', `/v1/policies/${id}`, { token });

async function created(t: TestServer, body: unknown): Promise<any> {
  const res = await create(t, body);
  if (res.status !== 201) throw new Error(`creating a policy failed: ${res.status} ${res.text}`);
  return res.body;
}

/** Deletes every stored policy, so each test starts from an empty set. */
async function clearPolicies(t: TestServer): Promise<void> {
  const { body } = await t.api.get('/v1/policies');
  for (const policy of body.policies) {
    const res = await remove(t, policy.id);
    if (res.status !== 204) throw new Error(`deleting ${policy.id} failed: ${res.status} ${res.text}`);
  }
}

async function auditBodies(t: TestServer): Promise<any[]> {
  const sql = connectDatabase(t.databaseUrl, { max: 1 });
  try {
    return (await sql<{ body: any }[]>`SELECT body FROM audit_entries ORDER BY seq`).map((row) => row.body);
  } finally {
    await sql.end();
  }
}

const COMMUNITY_LIMIT = 'the Community tier holds 1 require-approval or exempt policy; Pro holds 5 and Team is uncapped';

describe('Community install (no license)', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(async () => {
    await t?.stop();
  });
  beforeEach(async () => {
    await clearPolicies(t);
  });

  test('create, read, list, replace and delete a policy', async () => {
    const body = {
      name: 'prod restarts',
      tool: 'bash',
      command_contains: 'systemctl restart',
      inventory_id: 'inv_prod',
      queue: '',
      actor_kind: 'user',
      require_reason: true,
      exclude_dry_run: true,
    };
    const res = await create(t, body);
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`/v1/policies/${res.body.id}`);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^pol_[0-9a-z]{26}$/),
      name: 'prod restarts',
      effect: 'require_approval',
      tool: 'bash',
      command_contains: 'systemctl restart',
      inventory_id: 'inv_prod',
      queue: '',
      actor: null,
      account: null,
      actor_kind: 'user',
      require_reason: true,
      exclude_dry_run: true,
      require_distinct_approver: false,
      plan_deletes: null,
      rego: null,
      created_by: 'admin',
      created_at: expect.stringMatching(ISO),
      updated_at: expect.stringMatching(ISO),
    });
    const id = res.body.id as string;

    const read = await t.api.get(`/v1/policies/${id}`);
    expect(read.status).toBe(200);
    expect(read.body).toEqual(res.body);

    const list = await t.api.get('/v1/policies');
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ policies: [res.body], count: 1, total: 1, has_more: false, next_offset: null });

    // PUT replaces the whole policy: what it omits goes back to its default.
    const put = await replace(t, id, { effect: 'exempt', tool: 'python' });
    expect(put.status).toBe(200);
    expect(put.body).toEqual({
      ...res.body,
      name: '',
      effect: 'exempt',
      tool: 'python',
      command_contains: null,
      inventory_id: null,
      queue: null,
      actor_kind: 'agent',
      require_reason: false,
      exclude_dry_run: false,
      updated_at: expect.stringMatching(ISO),
    });
    expect(Date.parse(put.body.updated_at)).toBeGreaterThanOrEqual(Date.parse(res.body.updated_at));
    expect((await t.api.get(`/v1/policies/${id}`)).body).toEqual(put.body);

    expect((await remove(t, id)).status).toBe(204);
    expect((await t.api.get(`/v1/policies/${id}`)).status).toBe(404);
    expect((await remove(t, id)).status).toBe(404);
    expect((await replace(t, id, {})).status).toBe(404);
    expect((await t.api.get('/v1/policies')).body).toMatchObject({ policies: [], count: 0, total: 0 });
  });

  test('a policy with no condition is allowed and matches everything; the body may be empty', async () => {
    const res = await create(t, {});
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      name: '',
      effect: 'require_approval',
      tool: null,
      command_contains: null,
      inventory_id: null,
      queue: null,
      actor: null,
      account: null,
      actor_kind: null,
      require_reason: false,
      exclude_dry_run: false,
      require_distinct_approver: false,
      rego: null,
    });
  });

  test('null conditions are the same as omitted ones', async () => {
    const res = await create(t, { tool: null, account: null, actor_kind: null });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ tool: null, account: null, actor_kind: null });
  });

  test.each([
    ['an unknown field', { tool: 'bash', colour: 'red' }, 'colour', /^unknown field: colour$/],
    ['a bad effect', { effect: 'allow' }, 'effect', /effect must be require_approval, deny or exempt/],
    ['an exempt policy naming actor without account', { effect: 'exempt', actor: 'deploy-bot' }, 'account', /token label is not unique across accounts/],
    ['rego on a write', { rego: { package: 'cairn' } }, 'rego', /rego is read only/],
    ['rego null on a write', { rego: null }, 'rego', /rego is read only/],
    ['require_reason on an exempt policy', { effect: 'exempt', require_reason: true }, 'require_reason', /exempt policy takes only/],
    ['exclude_dry_run on an exempt policy', { effect: 'exempt', exclude_dry_run: false }, 'exclude_dry_run', /exempt policy takes only/],
    ['require_distinct_approver on an exempt policy', { effect: 'exempt', require_distinct_approver: true }, 'require_distinct_approver', /exempt policy takes only/],
    ['actor_kind user on an exempt policy', { effect: 'exempt', actor_kind: 'user' }, 'actor_kind', /agent runs only/],
    ['a bad actor_kind', { actor_kind: 'robot' }, 'actor_kind', /actor_kind must be agent or user/],
    ['a queue over 255 bytes', { queue: 'é'.repeat(128) }, 'queue', /queue must be at most 255 bytes/],
    ['a name over 255 bytes', { name: 'x'.repeat(256) }, 'name', /name must be at most 255 bytes/],
    ['an empty condition', { tool: '' }, 'tool', /tool must not be empty/],
    ['a condition that is not a string', { command_contains: 7 }, 'command_contains', /command_contains must be a string/],
    ['a flag that is not a boolean', { require_reason: 'yes' }, 'require_reason', /require_reason must be true or false/],
    ['a read-only id', { id: 'pol_mine' }, 'id', /^unknown field: id$/],
  ] as [string, unknown, string, RegExp][])('%s is a 400 naming the field, on POST and PUT', async (_name, body, field, message) => {
    const post = await create(t, body);
    expect(post.status).toBe(400);
    expect(post.body).toMatchObject({ field });
    expect(post.body.error).toMatch(message);

    const existing = await created(t, { tool: 'bash' });
    const put = await replace(t, existing.id, body);
    expect(put.status).toBe(400);
    expect(put.body).toEqual(post.body);
    expect((await t.api.get(`/v1/policies/${existing.id}`)).body).toEqual(existing);
    expect((await t.api.get('/v1/policies')).body.total).toBe(1);
  });

  test('an exempt policy is stored with actor_kind agent', async () => {
    expect((await create(t, { effect: 'exempt', tool: 'bash' })).body).toMatchObject({ effect: 'exempt', actor_kind: 'agent' });
    await clearPolicies(t);
    expect((await create(t, { effect: 'exempt', actor_kind: 'agent' })).body).toMatchObject({ effect: 'exempt', actor_kind: 'agent' });
  });

  test('operators read policies; only admins write them', async () => {
    const policy = await created(t, { tool: 'bash' });
    const operator = await tokenFor(t, 'operator');
    expect((await t.api.get('/v1/policies', operator)).body.policies).toEqual([policy]);
    expect((await t.api.get(`/v1/policies/${policy.id}`, operator)).body).toEqual(policy);

    for (const res of [await create(t, { tool: 'python' }, operator), await replace(t, policy.id, {}, operator), await remove(t, policy.id, operator)]) {
      expect(res.status).toBe(403);
      expect(res.body).toMatchObject({ required_role: 'admin' });
    }
    expect((await t.api.get(`/v1/policies/${policy.id}`)).body).toEqual(policy);
  });

  test('viewers may not read policies', async () => {
    const policy = await created(t, { tool: 'bash' });
    const viewer = await tokenFor(t, 'viewer');
    for (const res of [await t.api.get('/v1/policies', viewer), await t.api.get(`/v1/policies/${policy.id}`, viewer)]) {
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error: expect.stringMatching(/needs the operator role/), required_role: 'operator' });
    }
  });

  test('an agent token may read but never write policies, even an admin’s', async () => {
    const agent = await tokenFor(t, 'admin', 'agent');
    expect((await t.api.get('/v1/policies', agent)).status).toBe(200);
    const res = await create(t, { effect: 'exempt' }, agent);
    expect(res.status).toBe(403);
    expect(res.body.error).toMatch(/agent token may not change approval policies/);
    const policy = await created(t, { tool: 'bash' });
    expect((await replace(t, policy.id, { effect: 'exempt' }, agent)).status).toBe(403);
    expect((await remove(t, policy.id, agent)).status).toBe(403);
    expect((await t.api.get(`/v1/policies/${policy.id}`)).body).toEqual(policy);
  });

  test('one require-approval policy or one exemption; a second of either is refused naming the limit', async () => {
    const first = await created(t, { tool: 'bash' });
    const limit = { error: COMMUNITY_LIMIT, feature: 'policy_limit', tier: 'community', limit: 1 };
    for (const body of [{ tool: 'python' }, { effect: 'exempt' }]) {
      const res = await create(t, body);
      expect(res.status).toBe(403);
      expect(res.body).toEqual(limit);
    }
    // A replacement keeps the count: it is never refused for the limit.
    expect((await replace(t, first.id, { effect: 'exempt', actor: 'deploy-bot', account: 'dana' })).status).toBe(200);
    expect((await t.api.get('/v1/policies')).body.total).toBe(1);

    await clearPolicies(t);
    expect((await create(t, { effect: 'exempt' })).status).toBe(201);
    expect((await create(t, { tool: 'bash' })).body).toEqual(limit);
  });

  test.each([
    ['a deny policy', { effect: 'deny', tool: 'bash' }, 'policy_deny', 'effect', 'deny policies needs the Team tier; this install runs Community'],
    ['actor scoping', { actor: 'deploy-bot' }, 'policy_actor_scope', 'actor', 'actor scoping on policies needs the Team tier; this install runs Community'],
    ['account scoping', { account: 'dana' }, 'policy_account_scope', 'account', 'account scoping on policies needs the Team tier; this install runs Community'],
    [
      'distinct approvers',
      { require_distinct_approver: true },
      'policy_distinct_approvers',
      'require_distinct_approver',
      'distinct-approver separation of duties needs the Team tier; this install runs Community',
    ],
  ] as [string, unknown, string, string, string][])('%s is refused with 403 naming the feature, on POST and PUT', async (_name, body, feature, field, error) => {
    const res = await create(t, body);
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error, feature, tier: 'community', field });
    expect((await t.api.get('/v1/policies')).body.total).toBe(0);

    const existing = await created(t, {});
    const put = await replace(t, existing.id, body);
    expect(put.status).toBe(403);
    expect(put.body).toEqual(res.body);
    expect((await t.api.get(`/v1/policies/${existing.id}`)).body).toEqual(existing);
  });

  test('an exempt policy naming actor and account is Community', async () => {
    const res = await create(t, { effect: 'exempt', actor: 'deploy-bot', account: 'dana', tool: 'bash', command_contains: 'uptime' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ effect: 'exempt', actor: 'deploy-bot', account: 'dana', actor_kind: 'agent' });
  });

  test('an install over its limit (a lapsed license) may still edit and delete what it holds, but not add', async () => {
    const sql = connectDatabase(t.databaseUrl, { max: 1 });
    const fields = (tool: string): PolicyFields => ({
      name: tool,
      effect: 'require_approval',
      tool,
      command_contains: null,
      inventory_id: null,
      queue: null,
      actor: null,
      account: null,
      actor_kind: null,
      require_reason: false,
      exclude_dry_run: false,
      require_distinct_approver: false,
    });
    try {
      await insertPolicy(sql, `pol_${randomBytes(8).toString('hex')}`, fields('bash'), 'admin');
      await insertPolicy(sql, `pol_${randomBytes(8).toString('hex')}`, fields('python'), 'admin');
    } finally {
      await sql.end();
    }
    const { body } = await t.api.get('/v1/policies');
    expect(body.total).toBe(2);
    const [a, b] = body.policies;
    expect((await replace(t, a.id, { effect: 'exempt', tool: 'bash' })).status).toBe(200);
    expect((await create(t, {})).body.feature).toBe('policy_limit');
    expect((await remove(t, b.id)).status).toBe(204);
    expect((await create(t, {})).status).toBe(403);
    expect((await remove(t, a.id)).status).toBe(204);
    expect((await create(t, {})).status).toBe(201);
  });

  test('every policy write appends its audit entry; a refused write appends none', async () => {
    const before = (await auditBodies(t)).length;
    const policy = await created(t, { name: 'audited', tool: 'bash' });
    expect((await replace(t, policy.id, { name: 'audited', tool: 'python' })).status).toBe(200);
    expect((await create(t, { tool: 'bash' })).status).toBe(403);
    expect((await create(t, { effect: 'deny' })).status).toBe(403);
    expect((await create(t, { colour: 'red' })).status).toBe(400);
    expect((await remove(t, policy.id)).status).toBe(204);

    const added = (await auditBodies(t)).slice(before);
    expect(added).toEqual([
      expect.objectContaining({
        kind: 'policy.created',
        policy_id: policy.id,
        policy: expect.objectContaining({ name: 'audited', effect: 'require_approval', tool: 'bash', created_by: 'admin' }),
      }),
      expect.objectContaining({
        kind: 'policy.updated',
        policy_id: policy.id,
        policy: expect.objectContaining({ tool: 'python' }),
        previous: expect.objectContaining({ tool: 'bash' }),
      }),
      expect.objectContaining({ kind: 'policy.deleted', policy_id: policy.id, policy: expect.objectContaining({ tool: 'python' }) }),
    ]);
  });
});

describe('Pro install', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await licensedServer('pro');
  });
  afterAll(async () => {
    await t?.stop();
  });

  test('five require-approval or exempt policies are allowed; the sixth is refused naming the limit', async () => {
    const five = [];
    for (const body of [{ tool: 'bash' }, { tool: 'python' }, { command_contains: 'rm -rf' }, { effect: 'exempt', tool: 'bash' }, { effect: 'exempt', actor: 'bot', account: 'dana' }]) {
      five.push(await created(t, body));
    }
    for (const body of [{ queue: '' }, { effect: 'exempt' }]) {
      const res = await create(t, body);
      expect(res.status).toBe(403);
      expect(res.body).toEqual({
        error: 'the Pro tier holds 5 require-approval or exempt policies; Team is uncapped',
        feature: 'policy_limit',
        tier: 'pro',
        limit: 5,
      });
    }
    expect((await t.api.get('/v1/policies')).body.total).toBe(5);
    // At the cap, a replacement that keeps the count passes.
    expect((await replace(t, five[0].id, { effect: 'exempt', command_contains: 'uptime' })).status).toBe(200);
  });

  test('Team features stay refused on Pro', async () => {
    const res = await create(t, { effect: 'deny' });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: 'deny policies needs the Team tier; this install runs Pro', feature: 'policy_deny', tier: 'pro', field: 'effect' });
    expect((await create(t, { account: 'dana' })).body.feature).toBe('policy_account_scope');
  });
});

describe('Team install', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await licensedServer('team');
  });
  afterAll(async () => {
    await t?.stop();
  });

  test('deny policies, actor and account scoping and distinct approvers are allowed', async () => {
    const res = await create(t, {
      effect: 'deny',
      actor: 'deploy-bot',
      account: 'dana',
      command_contains: 'drop database',
      require_reason: true,
      require_distinct_approver: true,
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ effect: 'deny', actor: 'deploy-bot', account: 'dana', require_distinct_approver: true });
    const scoped = await create(t, { actor: 'deploy-bot', account: 'dana', actor_kind: 'agent', require_distinct_approver: true });
    expect(scoped.status).toBe(201);
  });

  test('the policy set is uncapped, and lists page with limit, offset and id', async () => {
    for (let i = 0; i < 12; i++) await created(t, { name: `hold ${i}`, command_contains: `step-${i}` });
    const all = await t.api.get('/v1/policies');
    expect(all.body.total).toBeGreaterThanOrEqual(12);
    const total = all.body.total as number;

    const page = await t.api.get('/v1/policies?limit=5&offset=5');
    expect(page.status).toBe(200);
    expect(page.body).toMatchObject({ count: 5, total, has_more: total > 10, next_offset: total > 10 ? 10 : null });
    expect(page.body.policies).toEqual(all.body.policies.slice(5, 10));

    const ids = [all.body.policies[0].id, all.body.policies[3].id];
    const picked = await t.api.get(`/v1/policies?id=${ids[0]}&id=${ids[1]}`);
    expect(picked.body).toMatchObject({ count: 2, total: 2 });
    expect(picked.body.policies.map((p: { id: string }) => p.id)).toEqual(ids);

    const tooMany = await t.api.get('/v1/policies?limit=1001');
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.field).toBe('limit');
    expect((await t.api.get('/v1/policies?colour=red')).status).toBe(400);
  });
});

describe('license refusal at start', () => {
  /** Starts a server on a fresh database with the settings; the database is dropped whatever happens. */
  async function startWith(extra: Record<string, string>, licenseKeys: object[] = []): Promise<unknown> {
    const database = await createTestDatabase();
    try {
      const config = loadConfig({}, testSettings(database.url, extra));
      const server = await startServerInProcess(config, createLogger(config), { licenseKeys });
      await server.stop();
      return undefined;
    } catch (err) {
      return err;
    } finally {
      await database.drop();
    }
  }

  test('a license signed by a key the server does not trust stops the start with a clear error', async () => {
    const signer = await generateSigningKey();
    const other = await generateSigningKey();
    const err = await startWith({ CAIRN_LICENSE_FILE: await licenseFile(signer, 'team') }, [other.publicJwk]);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toBe(
      `--license-file (CAIRN_LICENSE_FILE): license refused: the license is signed by key ${signer.keyId}, which is not a trusted license key`,
    );
  });

  test('a license signed by any key but Cairn\'s own is refused, whatever the environment says', async () => {
    const key = await generateSigningKey();
    // Earlier releases read a test key from this variable; no production server does.
    process.env.CAIRN_TEST_LICENSE_KEY = JSON.stringify(key.publicJwk);
    try {
      const err = await startWith({ CAIRN_LICENSE_FILE: await licenseFile(key, 'pro'), CAIRN_TEST_LICENSE_KEY: JSON.stringify(key.publicJwk) });
      expect((err as Error).message).toMatch(/^--license-file \(CAIRN_LICENSE_FILE\): license refused: .*not a trusted license key$/);
    } finally {
      delete process.env.CAIRN_TEST_LICENSE_KEY;
    }
  });
});
