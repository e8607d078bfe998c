import { connectDatabase, type Sql } from '../../store/db';
import { insertReadings, type NewReading } from '../../store/facts';
import { grant, person, template, type Person } from '../support/access';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

/**
 * The estate (spec part A 2.13, 4.4): readings written through the store with chosen gathered_at
 * times (and, for some, the id of a real run an admin made, which a viewer may not read), then
 * the estate at four instants and diffs between them: added, changed (differing keys with each
 * end's value), unobserved, unchanged, before_history, horizon, and withheld for a viewer.
 */

let t: TestServer;
let sql: Sql;
let viewer: Person;
let adminRun: string;
let inventoryId: string;

// The timeline: T0 < t1 < T1 < t2 < T2 < t3 < T3.
const at = (iso: string) => new Date(iso);
const t1 = at('2021-03-01T10:00:00Z');
const t2 = at('2021-03-02T10:00:00Z');
const t3 = at('2021-03-03T10:00:00Z');
const T0 = '2021-02-28T00:00:00Z';
const T1 = '2021-03-01T12:00:00Z';
const T2 = '2021-03-02T12:00:00Z';
const T3 = '2021-03-03T12:00:00Z';

beforeAll(async () => {
  t = await startTestServer();
  sql = connectDatabase(t.databaseUrl, { max: 2 });
  viewer = await person(t.api, 'viewer');
  // The viewer reads one template's runs (none gathered facts): the run filter then compares a
  // run's template against a non-empty set, which must still count a run of no template as unreadable.
  await grant(t.api, (await template(t.api)).id, 'read', { user_id: viewer.id });
  const inv = await t.api.post('/v1/inventories', { name: 'estate', content: 'hA\nhB\nhC\nhD\nhE\n' });
  expect(inv.status).toBe(201);
  inventoryId = inv.body.id;
  const run = await t.api.post('/v1/runs', { tool: 'bash', command: 'true' });
  expect(run.status).toBe(201);
  adminRun = run.body.id;
  await waitForRunEnd(t.api, adminRun);

  const reading = (host: string, when: Date, facts: Record<string, unknown>, runId: string | null = null): NewReading => ({
    inventory_id: inventoryId,
    host,
    run_id: runId,
    gathered_at: when,
    size_bytes: JSON.stringify(facts).length,
    facts,
    digest: JSON.stringify(facts),
  });
  await insertReadings(sql, [
    reading('hA', t1, { os: 'debian 11', kernel: '5.10', packages: 411 }, adminRun),
    reading('hA', t2, { os: 'debian 12', kernel: '6.1', packages: 411, api_token: 'tok-2' }, adminRun),
    reading('hB', t1, { os: 'debian 12' }),
    reading('hB', t2, { os: 'debian 12' }),
    reading('hC', t1, { os: 'rhel 9', root_password: 'pw-c', disks: [{ name: 'sda', secret_key: 'sk' }] }),
    reading('hD', t2, { os: 'debian 12' }),
    reading('hE', t3, { os: 'alpine' }, adminRun),
  ]);
});
afterAll(async () => {
  await sql?.end();
  await t?.stop();
});

const hostsOf = (body: any) => Object.fromEntries(body.hosts.map((h: any) => [h.host, h.facts]));

describe('the estate at an instant', () => {
  test('before any reading: empty, before_history, the horizon the oldest reading', async () => {
    const res = await t.api.get(`/v1/estate?at=${T0}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ at: '2021-02-28T00:00:00.000Z', horizon: t1.toISOString(), before_history: true, hosts: [], count: 0, total: 0, withheld: 0 });
  });

  test('at T1 each host carries its newest facts at or before it; a host first gathered later is absent', async () => {
    const res = await t.api.get(`/v1/estate?at=${T1}`);
    expect(res.body).toMatchObject({ before_history: false, count: 3, total: 3, withheld: 0, facts_masked: false });
    expect(hostsOf(res.body)).toEqual({
      hA: { os: 'debian 11', kernel: '5.10', packages: 411 },
      hB: { os: 'debian 12' },
      hC: { os: 'rhel 9', root_password: 'pw-c', disks: [{ name: 'sda', secret_key: 'sk' }] },
    });
    expect(res.body.hosts[0]).toMatchObject({ host: 'hA', run_id: adminRun, inventory_id: inventoryId, gathered_at: t1.toISOString() });
  });

  test('at T2 and at T3 (now by default) the newer readings show; pages', async () => {
    const atT2 = await t.api.get(`/v1/estate?at=${T2}`);
    expect(Object.keys(hostsOf(atT2.body))).toEqual(['hA', 'hB', 'hC', 'hD']);
    expect(hostsOf(atT2.body).hA.os).toBe('debian 12');
    const now = await t.api.get('/v1/estate');
    expect(Object.keys(hostsOf(now.body))).toEqual(['hA', 'hB', 'hC', 'hD', 'hE']);
    const page = await t.api.get(`/v1/estate?at=${T3}&limit=2&offset=2`);
    expect(page.body).toMatchObject({ count: 2, total: 5, has_more: true, next_offset: 4 });
    expect(page.body.hosts.map((h: any) => h.host)).toEqual(['hC', 'hD']);
  });

  test('a viewer: hosts whose reading came from a run it may not read are withheld; facts masked', async () => {
    const asViewer = t.as(viewer.token);
    const res = await asViewer.get(`/v1/estate?at=${T3}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ total: 3, withheld: 2, facts_masked: true });
    expect(hostsOf(res.body).hC).toEqual({ os: 'rhel 9', root_password: '[masked]', disks: [{ name: 'sda', secret_key: '[masked]' }] });
    expect(res.text).not.toContain('pw-c');
  });

  test('bad instants are 400 naming the field', async () => {
    expect((await t.api.get('/v1/estate?at=yesterday')).body).toMatchObject({ field: 'at' });
    expect((await t.api.get('/v1/estate?limit=0')).body).toMatchObject({ field: 'limit' });
    expect((await t.api.get('/v1/estate?when=now')).status).toBe(400);
    expect((await t.api.get('/v1/estate/diff')).body).toMatchObject({ field: 'from' });
    expect((await t.api.get(`/v1/estate/diff?from=${T2}&to=${T1}`)).body).toMatchObject({ field: 'from' });
  });
});

describe('the estate diff', () => {
  test('T1 to T2: added, changed with the differing keys and both ends, unobserved, unchanged counted', async () => {
    const res = await t.api.get(`/v1/estate/diff?from=${T1}&to=${T2}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      from: '2021-03-01T12:00:00.000Z',
      to: '2021-03-02T12:00:00.000Z',
      before_history: false,
      unchanged: 1,
      withheld: 0,
      counts: { added: 1, changed: 1, unobserved: 1, unchanged: 1 },
    });
    expect(res.body.added).toEqual([{ host: 'hD', gathered_at: t2.toISOString(), run_id: null }]);
    expect(res.body.unobserved).toEqual([{ host: 'hC', last_gathered_at: t1.toISOString(), run_id: null }]);
    expect(res.body.changed).toEqual([
      {
        host: 'hA',
        from_gathered_at: t1.toISOString(),
        to_gathered_at: t2.toISOString(),
        from_run_id: adminRun,
        to_run_id: adminRun,
        keys: [
          { key: 'api_token', from: null, to: 'tok-2' },
          { key: 'kernel', from: '5.10', to: '6.1' },
          { key: 'os', from: 'debian 11', to: 'debian 12' },
        ],
      },
    ]);
  });

  test('the listed hosts page: counts cover every host, the page a slice in host order', async () => {
    const res = await t.api.get(`/v1/estate/diff?from=${T1}&to=${T2}&limit=2&offset=1`);
    expect(res.body).toMatchObject({ count: 2, total: 3, has_more: false, next_offset: null, counts: { added: 1, changed: 1, unobserved: 1, unchanged: 1 } });
    expect(res.body.changed).toEqual([]);
    expect([...res.body.added, ...res.body.unobserved].map((h: any) => h.host)).toEqual(['hD', 'hC']);
    expect((await t.api.get(`/v1/estate/diff?from=${T1}&limit=10001`)).body).toMatchObject({ field: 'limit' });
  });

  test('from before history: every host gathered by `to` is added', async () => {
    const res = await t.api.get(`/v1/estate/diff?from=${T0}&to=${T1}`);
    expect(res.body).toMatchObject({ before_history: true, horizon: t1.toISOString(), counts: { added: 3, changed: 0, unobserved: 0, unchanged: 0 } });
  });

  test('T2 to now: nothing but hE gathered; the rest unobserved', async () => {
    const res = await t.api.get(`/v1/estate/diff?from=${T2}`);
    expect(res.body.added.map((h: any) => h.host)).toEqual(['hE']);
    expect(res.body.unobserved.map((h: any) => h.host)).toEqual(['hA', 'hB', 'hC', 'hD']);
    expect(res.body).toMatchObject({ unchanged: 0, changed: [] });
  });

  test('a viewer: hosts gathered by runs it may not read are withheld from the diff, secret-looking values masked', async () => {
    const asViewer = t.as(viewer.token);
    const res = await asViewer.get(`/v1/estate/diff?from=${T1}&to=${T3}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ withheld: 2, changed: [], unchanged: 1, facts_masked: true });
    expect(res.body.added.map((h: any) => h.host)).toEqual(['hD']);
    expect(res.text).not.toContain('tok-2');
  });
});
