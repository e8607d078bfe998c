import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger, type RunningServer } from '../../cli/serve';
import { loadConfig } from '../../core/config';
import { Faults } from '../../services/context';
import { sweepHookDeliveries } from '../../services/schedules/hook-deliveries';
import { connectDatabase, type Sql } from '../../store/db';
import { createTestDatabase } from '../support/database';
import { forgeHeaders, PUSH_PAYLOADS, SAMPLE_PUSH_VARS, type SignOptions } from '../support/forge-deliveries';
import { apiClient, type ApiClient, type ApiResponse } from '../support/http';
import { waitUntil } from '../support/schedules';
import { startServerInProcess, startTestServer, testSettings, waitForRunEnd, type TestServer } from '../support/server';
import { holdAuditHead } from '../support/audit-hold';

/**
 * Webhook pushes are answered once recorded (the default: no answer wait), and launched from the
 * record: 202 with a Location to the delivery's record, which then names the run; a redelivery
 * launches nothing new; a push recorded by a server that died before launching it is launched,
 * once, by the next server. Real server, PostgreSQL and Temporal; deliveries over real HTTP.
 */

const encryption = () => ({
  SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
  SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
});

interface Made {
  id: string;
  secret: string;
  hook_path: string;
}

async function makeTrigger(api: ApiClient, templateBody: Record<string, unknown> = { tool: 'bash', command: 'echo "pushed $git_commit"' }): Promise<Made & { template_id: string }> {
  const tpl = await api.post('/v1/templates', { name: `hooked ${randomUUID()}`, ...templateBody });
  expect(tpl.status).toBe(201);
  const made = await api.post('/v1/triggers', { name: 'push hook', template_id: tpl.body.id });
  expect(made.status).toBe(201);
  return { ...made.body, template_id: tpl.body.id };
}

function deliver(url: string, made: Made, options: SignOptions & { headers?: Record<string, string> } = {}): Promise<ApiResponse> {
  const raw = JSON.stringify(PUSH_PAYLOADS.github());
  return apiClient(url).request('POST', made.hook_path, { rawBody: raw, headers: { ...forgeHeaders('github', raw, made.secret, options), ...options.headers } });
}

const runsOf = async (sql: Sql, triggerId: string) =>
  (await sql<{ id: string }[]>`SELECT id FROM runs WHERE source_kind = 'trigger' AND source_id = ${triggerId} ORDER BY id`).map((r) => r.id);

/** Reads a delivery's record until it has left `pending`. */
async function settled(api: ApiClient, location: string): Promise<any> {
  return waitUntil(`${location} to settle`, async () => {
    const read = await api.get(location);
    expect(read.status).toBe(200);
    return read.body.state !== 'pending' ? read.body : undefined;
  }, 30_000);
}

describe('with the default answer wait (none)', () => {
  let t: TestServer;
  let sql: Sql;
  beforeAll(async () => {
    t = await startTestServer(encryption());
    sql = connectDatabase(t.databaseUrl, { max: 3 });
  });
  afterAll(async () => {
    await sql?.end();
    await t?.stop();
  });

  test('a push is answered 202 with a Location to its record, which then names the run it launched', async () => {
    const made = await makeTrigger(t.api);
    const delivery = randomUUID();
    const answer = await deliver(t.url, made, { delivery });
    expect(answer.status).toBe(202);
    expect(answer.body).toEqual({ accepted: true, trigger_id: made.id, delivery_id: delivery });
    const location = answer.headers.get('location');
    expect(location).toBe(`/v1/triggers/${made.id}/deliveries/${delivery}`);

    const record = await settled(t.api, location!);
    expect(record).toEqual({
      trigger_id: made.id,
      delivery_id: delivery,
      named_by_sender: true,
      state: 'launched',
      run_id: expect.stringMatching(/^run_/),
      reason: null,
      refusal_status: null,
      push: { forge: 'github', ref: 'refs/heads/main', branch: 'main', tag: '', commit: SAMPLE_PUSH_VARS.git_commit, repository: 'acme/web', pusher: 'octocat' },
      received_at: expect.any(String),
      settled_at: expect.any(String),
    });
    const run = await waitForRunEnd(t.api, record.run_id);
    expect(run).toMatchObject({ status: 'succeeded', source: { kind: 'trigger', id: made.id }, extra_vars: SAMPLE_PUSH_VARS });
    expect(await runsOf(sql, made.id)).toEqual([record.run_id]);
    expect((await t.api.get(`/v1/triggers/${made.id}`)).body).toMatchObject({ last_error: null, last_delivery_at: expect.any(String) });

    // The list shows it too, and no read shows the secret, the headers or the body.
    const list = await t.api.get(`/v1/triggers/${made.id}/deliveries`);
    expect(list.body).toMatchObject({ count: 1, total: 1, has_more: false, deliveries: [record] });
    for (const text of [list.text, (await t.api.get(location!)).text]) {
      expect(text).not.toContain(made.secret);
      expect(text).not.toContain('x-hub-signature');
      expect(text).not.toContain('head_commit');
    }
    // The request kept for the launch is dropped once it is settled.
    expect((await sql`SELECT request FROM hook_deliveries WHERE trigger_id = ${made.id}`)[0].request).toBeNull();
  });

  test('a redelivery of a launched delivery names its run and launches nothing new; one still pending is 202 again', async () => {
    const made = await makeTrigger(t.api);
    const delivery = randomUUID();
    const first = await deliver(t.url, made, { delivery });
    const record = await settled(t.api, first.headers.get('location')!);
    const again = await deliver(t.url, made, { delivery });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ run_id: record.run_id, trigger_id: made.id, delivery_id: delivery, repeated: true });
    expect(again.headers.get('location')).toBe(`/v1/runs/${record.run_id}`);

    // Held at the audit chain's head, the launch stays pending while its redeliveries come.
    const release = await holdAuditHead(sql);
    const held = randomUUID();
    const answers = [await deliver(t.url, made, { delivery: held }), ...(await Promise.all([1, 2, 3].map(() => deliver(t.url, made, { delivery: held }))))];
    await release();
    for (const answer of answers) expect(answer).toMatchObject({ status: 202, body: { accepted: true, delivery_id: held } });
    const heldRecord = await settled(t.api, `/v1/triggers/${made.id}/deliveries/${held}`);
    expect(heldRecord.state).toBe('launched');
    expect(await runsOf(sql, made.id)).toEqual([record.run_id, heldRecord.run_id].sort());
    await waitForRunEnd(t.api, heldRecord.run_id);
  });

  test('a refused delivery is recorded with why; redelivered once the template is fixed, it launches', async () => {
    const made = await makeTrigger(t.api, { tool: 'bash', command: 'true', survey: [{ var: 'ticket', type: 'text', required: true }] });
    const delivery = randomUUID();
    const answer = await deliver(t.url, made, { delivery });
    expect(answer.status).toBe(202);
    const refused = await settled(t.api, answer.headers.get('location')!);
    expect(refused).toMatchObject({ state: 'refused', run_id: null, refusal_status: 409, reason: expect.stringMatching(/ticket has no default/) });
    expect((await t.api.get(`/v1/triggers/${made.id}`)).body.last_error).toBe(refused.reason);

    expect((await t.api.request('PUT', `/v1/templates/${made.template_id}`, { body: { name: 'fixed', tool: 'bash', command: 'true' } })).status).toBe(200);
    const again = await deliver(t.url, made, { delivery });
    expect(again.status).toBe(202);
    const launched = await settled(t.api, again.headers.get('location')!);
    expect(launched).toMatchObject({ state: 'launched', reason: null, refusal_status: null });
    expect(await runsOf(sql, made.id)).toEqual([launched.run_id]);
    expect((await t.api.get(`/v1/triggers/${made.id}`)).body.last_error).toBeNull();
    await waitForRunEnd(t.api, launched.run_id);
  });

  test('a delivery without an id is named by Cairn; the checks that need no launch answer as before', async () => {
    const made = await makeTrigger(t.api);
    const raw = JSON.stringify(PUSH_PAYLOADS.github());
    const { 'x-github-delivery': _gone, ...headers } = forgeHeaders('github', raw, made.secret);
    expect(_gone).toBeDefined();
    const answer = await apiClient(t.url).request('POST', made.hook_path, { rawBody: raw, headers });
    expect(answer).toMatchObject({ status: 202, body: { delivery_id: expect.stringMatching(/^hkd_/) } });
    expect(await settled(t.api, answer.headers.get('location')!)).toMatchObject({ state: 'launched', named_by_sender: false });

    expect((await deliver(t.url, made, { event: 'ping' })).status).toBe(200);
    expect((await deliver(t.url, made, { event: 'issues' })).body).toMatchObject({ skipped: true });
    expect((await deliver(t.url, { ...made, secret: 'not-the-secret-at-all' })).status).toBe(403);
    expect((await t.api.get(`/v1/triggers/${made.id}/deliveries`)).body.total).toBe(1);
  });

  test('a delivery is read only by who may read its trigger; an unknown one is 404', async () => {
    const made = await makeTrigger(t.api);
    const answer = await deliver(t.url, made);
    const location = answer.headers.get('location')!;
    await settled(t.api, location);
    const otto = await t.api.post('/v1/users', { username: `otto-${randomBytes(3).toString('hex')}`, role: 'operator' });
    const asOtto = t.as((await t.api.post('/v1/tokens', { name: 'o', username: otto.body.username })).body.token);
    expect((await asOtto.get(location)).status).toBe(404);
    expect((await asOtto.get(`/v1/triggers/${made.id}/deliveries`)).status).toBe(404);
    expect((await t.as(null).get(location)).status).toBe(401);
    expect((await t.api.get(`/v1/triggers/${made.id}/deliveries/${randomUUID()}`)).status).toBe(404);
    expect((await t.api.get(`/v1/triggers/${made.id}/deliveries?limit=0`)).body).toMatchObject({ field: 'limit' });
  });

  test('past --hook-delivery-retention a settled delivery is deleted and a pending one kept; redelivered, it starts no second run', async () => {
    const made = await makeTrigger(t.api);
    const old = randomUUID();
    const first = await settled(t.api, (await deliver(t.url, made, { delivery: old })).headers.get('location')!);
    expect(first.state).toBe('launched');
    const release = await holdAuditHead(sql);
    const owed = randomUUID();
    try {
      expect((await deliver(t.url, made, { delivery: owed })).status).toBe(202);
      await new Promise((r) => setTimeout(r, 1100));
      // The sweeper's job as a server started with --hook-delivery-retention 1s runs it.
      const oneSecond = { ...t.server.context, config: { ...t.server.context.config, hookDeliveryRetention: 1 } };
      expect(await sweepHookDeliveries(oneSecond)).toBeGreaterThanOrEqual(1);
      expect((await t.api.get(`/v1/triggers/${made.id}/deliveries/${old}`)).status).toBe(404);
      expect((await t.api.get(`/v1/triggers/${made.id}/deliveries/${owed}`)).body.state).toBe('pending');
    } finally {
      await release();
    }
    expect((await settled(t.api, `/v1/triggers/${made.id}/deliveries/${owed}`)).state).toBe('launched');
    // Redelivered after its record went: recorded afresh, and its launch finds the run it made first.
    const again = await settled(t.api, (await deliver(t.url, made, { delivery: old })).headers.get('location')!);
    expect(again).toMatchObject({ state: 'launched', run_id: first.run_id });
    expect((await runsOf(sql, made.id)).filter((id) => id === first.run_id)).toHaveLength(1);
    expect(await runsOf(sql, made.id)).toHaveLength(2);
  });
});

test('a push recorded by a server that stopped before launching it is launched once by the next server', async () => {
  const database = await createTestDatabase();
  const sql = connectDatabase(database.url, { max: 2 });
  const settings = testSettings(database.url, encryption());
  const config = loadConfig({}, settings);
  let first: RunningServer | undefined;
  let second: RunningServer | undefined;
  try {
    // Its launch just after the commit fails, as it would in a server that died right then.
    first = await startServerInProcess(config, createLogger(config), { faults: new Faults(['hook-launch-once']) });
    const adminToken = first.adminToken!;
    const api = apiClient(first.url, adminToken);
    const made = await makeTrigger(api);
    const delivery = randomUUID();
    const answer = await deliver(first.url, made, { delivery });
    expect(answer.status).toBe(202);
    await first.stop();
    first = undefined;
    const [owed] = await sql`SELECT state FROM hook_deliveries WHERE trigger_id = ${made.id}`;
    expect(owed.state).toBe('pending');
    expect(await runsOf(sql, made.id)).toEqual([]);

    second = await startServerInProcess(loadConfig({}, settings), createLogger(config));
    const api2 = apiClient(second.url, adminToken);
    const record = await settled(api2, answer.headers.get('location')!);
    expect(record.state).toBe('launched');
    expect((await waitForRunEnd(api2, record.run_id)).status).toBe('succeeded');
    // A redelivery now, and the outbox drained again: still the one run.
    expect((await deliver(second.url, made, { delivery })).body).toMatchObject({ run_id: record.run_id, repeated: true });
    await second.drainOutbox();
    expect(await runsOf(sql, made.id)).toEqual([record.run_id]);
  } finally {
    await first?.stop();
    await second?.stop();
    await sql.end();
    await database.drop();
  }
}, 90_000);
