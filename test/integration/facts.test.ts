import { randomBytes } from 'node:crypto';
import { connectDatabase, type Sql } from '../../store/db';
import { insertReadings } from '../../store/facts';
import { grant, person, type Person } from '../support/access';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

/**
 * The fact cache end to end (spec part A 2.1 `fact_cache`, 2.3, 4.4, 4.12; part B 8): real
 * ansible-playbook over two local inventory hosts gathers facts, which are stored when the run
 * ends; the next run is supplied them (a play with gather_facts: false reads a cached fact);
 * readings older than the template's timeout are not supplied; a document over 1 MiB is not kept;
 * facts are in no chain entry, receipt or evidence; reads are masked below admin; a held run
 * whose template's setting changed after approval is refused; deletes; --fact-cache-admin-only.
 */

let t: TestServer;
let sql: Sql;
let operator: Person;
let viewer: Person;
let inventoryId: string;

const INVENTORY = `[web]
h1 ansible_connection=local ansible_python_interpreter=/usr/bin/python3
h2 ansible_connection=local ansible_python_interpreter=/usr/bin/python3
`;

const GATHER = `- hosts: all
  tasks:
    - name: system
      ansible.builtin.debug:
        msg: "system is {{ ansible_system }}"
`;

const READ_CACHED = `- hosts: all
  gather_facts: false
  tasks:
    - name: cached
      ansible.builtin.debug:
        msg: "cached marker={{ ansible_facts.get('cairn_marker', 'none') }} system={{ ansible_facts.get('system', 'none') }}"
`;

const payloadOf = (jws: string) => JSON.parse(Buffer.from(jws.split('.')[1], 'base64url').toString('utf8'));

async function ansibleTemplate(body: Record<string, unknown>) {
  const res = await t.api.post('/v1/templates', { name: `facts-${randomBytes(3).toString('hex')}`, tool: 'ansible', inventory_id: inventoryId, ...body });
  if (res.status !== 201) throw new Error(`template: ${res.status} ${res.text}`);
  return res.body;
}

async function launch(templateId: string) {
  const res = await t.api.post(`/v1/templates/${templateId}/launch`, {});
  if (res.status !== 201) throw new Error(`launch: ${res.status} ${res.text}`);
  return res.body;
}

const log = async (runId: string) => (await t.api.get(`/v1/runs/${runId}/logs`)).text;
const readingsOf = (runId: string) => sql<{ host: string; skipped: string | null; size_bytes: number }[]>`
  SELECT host, skipped, size_bytes FROM fact_readings WHERE run_id = ${runId} ORDER BY host`;

beforeAll(async () => {
  t = await startTestServer();
  sql = connectDatabase(t.databaseUrl, { max: 2 });
  operator = await person(t.api, 'operator');
  viewer = await person(t.api, 'viewer');
  const inv = await t.api.post('/v1/inventories', { name: 'fact hosts', content: INVENTORY });
  expect(inv.status).toBe(201);
  inventoryId = inv.body.id;
  await grant(t.api, inventoryId, 'read', { user_id: operator.id });
});
afterAll(async () => {
  await sql?.end();
  await t?.stop();
});

describe('the fact cache', () => {
  let gathering: any;
  let gatheredFacts: any;

  test('template fields: use_fact_cache needs inventory_id; omitted on update means unchanged; a launch carries fact_cache', async () => {
    const noInventory = await t.api.post('/v1/templates', { name: 'no inv', tool: 'ansible', command: GATHER, use_fact_cache: true });
    expect(noInventory.status).toBe(400);
    expect(noInventory.body.field).toBe('use_fact_cache');
    const badTimeout = await t.api.post('/v1/templates', { name: 'bad timeout', tool: 'ansible', command: GATHER, inventory_id: inventoryId, fact_cache_timeout: -1 });
    expect(badTimeout.status).toBe(400);
    expect(badTimeout.body.field).toBe('fact_cache_timeout');

    const tpl = await ansibleTemplate({ command: GATHER, use_fact_cache: true, fact_cache_timeout: 0 });
    expect(tpl).toMatchObject({ use_fact_cache: true, fact_cache_timeout: 0 });
    const { use_fact_cache: _u, fact_cache_timeout: _f, ...rest } = tpl;
    const put = await t.api.request('PUT', `/v1/templates/${tpl.id}`, { body: rest });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ use_fact_cache: true, fact_cache_timeout: 0 });

    const run = await launch(tpl.id);
    expect(run.fact_cache).toEqual({ timeout_seconds: 0 });
    gathering = await waitForRunEnd(t.api, run.id, 120_000);
    expect(gathering.status).toBe('succeeded');
    expect(await log(run.id)).toContain('system is Linux');
  }, 180_000);

  test('what a run gathered is stored per host and listed for the inventory', async () => {
    const readings = await readingsOf(gathering.id);
    expect(readings.map((r) => [r.host, r.skipped])).toEqual([
      ['h1', null],
      ['h2', null],
    ]);
    const list = await t.api.get(`/v1/inventories/${inventoryId}/facts`);
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ count: 2, withheld: 0 });
    expect(list.body.hosts[0]).toMatchObject({ host: 'h1', run_id: gathering.id, kept: true, skipped: null });
    expect(list.body.hosts[0].size_bytes).toBeGreaterThan(1000);
    expect(list.body.hosts[0]).not.toHaveProperty('facts');

    const one = await t.api.get(`/v1/inventories/${inventoryId}/facts/h1`);
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ host: 'h1', run_id: gathering.id, facts_masked: false });
    expect(one.body.facts.ansible_system).toBe('Linux');
    gatheredFacts = one.body.facts;
    const estate = await t.api.get('/v1/estate');
    expect(estate.body.hosts.map((h: any) => [h.host, h.run_id])).toEqual([
      ['h1', gathering.id],
      ['h2', gathering.id],
    ]);
    expect(estate.body.hosts[0].facts.ansible_system).toBe('Linux');
    const byHost = await t.api.get('/v1/hosts/h2/facts');
    expect(byHost.status).toBe(200);
    expect(byHost.body).toMatchObject({ host: 'h2', inventory_id: inventoryId, run_id: gathering.id });
  });

  test('facts are in no chain entry, receipt or evidence; the receipt discloses the setting', async () => {
    const secretish = gatheredFacts.ansible_machine_id && gatheredFacts.ansible_machine_id.length >= 16 ? gatheredFacts.ansible_machine_id : gatheredFacts.ansible_date_time.iso8601_micro;
    expect(typeof secretish).toBe('string');
    const audit = await t.api.get('/v1/audit?limit=1000');
    expect(audit.status).toBe(200);
    const evidence = await t.api.get(`/v1/runs/${gathering.id}/evidence?format=json`);
    expect(evidence.status).toBe(200);
    const receipt = await t.api.get(`/v1/runs/${gathering.id}/receipt`);
    expect(receipt.status).toBe(200);
    const payload = payloadOf(receipt.text);
    expect(payload.fact_cache).toEqual({ timeout_seconds: 0 });
    expect(payload.run.fact_cache).toEqual({ timeout_seconds: 0 });
    for (const text of [audit.text, evidence.text, JSON.stringify(payload)]) {
      expect(text).not.toContain(secretish);
      expect(text).not.toContain('ansible_all_ipv4_addresses');
    }
  });

  test('the next run is supplied the cached facts: a play that gathers nothing reads them, and stores nothing new', async () => {
    // A newer reading of h1 with a marker, as if an earlier run had gathered it.
    const marker = `marker-${randomBytes(4).toString('hex')}`;
    await insertReadings(sql, [
      {
        inventory_id: inventoryId,
        host: 'h1',
        run_id: null,
        gathered_at: new Date(),
        size_bytes: 100,
        facts: { ...gatheredFacts, cairn_marker: marker },
        digest: 'test',
      },
    ]);
    const tpl = await ansibleTemplate({ command: READ_CACHED, use_fact_cache: true });
    const run = await launch(tpl.id);
    const ended = await waitForRunEnd(t.api, run.id, 120_000);
    expect(ended.status).toBe('succeeded');
    const text = await log(run.id);
    expect(text).toContain(`cached marker=${marker} system=Linux`);
    expect(text).toContain('cached marker=none system=Linux');
    expect(await readingsOf(run.id)).toEqual([]);
  }, 180_000);

  test('readings older than the timeout are not supplied; a document over 1 MiB is recorded skipped, not kept', async () => {
    await sql`UPDATE fact_readings SET gathered_at = gathered_at - interval '1 hour' WHERE inventory_id = ${inventoryId}`;
    const play = `- hosts: all
  gather_facts: false
  tasks:
    - name: cached
      ansible.builtin.debug:
        msg: "expired marker={{ ansible_facts.get('cairn_marker', 'none') }} system={{ ansible_facts.get('system', 'none') }}"
    - name: big
      ansible.builtin.set_fact:
        cacheable: true
        cairn_big: "{{ 'x' * 1100000 }}"
      when: inventory_hostname == 'h1'
`;
    const tpl = await ansibleTemplate({ command: play, use_fact_cache: true, fact_cache_timeout: 60 });
    const run = await launch(tpl.id);
    expect(run.fact_cache).toEqual({ timeout_seconds: 60 });
    const ended = await waitForRunEnd(t.api, run.id, 120_000);
    expect(ended.status).toBe('succeeded');
    const text = await log(run.id);
    expect(text).toContain('expired marker=none system=none');
    expect(text).not.toContain('system=Linux');

    const readings = await readingsOf(run.id);
    expect(readings).toHaveLength(1);
    expect(readings[0].host).toBe('h1');
    expect(readings[0].size_bytes).toBeGreaterThan(1024 * 1024);
    expect(readings[0].skipped).toMatch(/over the 1 MiB/);
    const [{ n }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM fact_readings WHERE run_id = ${run.id} AND facts IS NOT NULL`;
    expect(n).toBe(0);
    // The list shows the skip; the host's cached facts are still the last kept reading.
    const list = await t.api.get(`/v1/inventories/${inventoryId}/facts`);
    expect(list.body.hosts.find((h: any) => h.host === 'h1')).toMatchObject({ kept: false, run_id: run.id });
    const one = await t.api.get(`/v1/inventories/${inventoryId}/facts/h1`);
    expect(one.body.facts).not.toHaveProperty('cairn_big');
    expect(one.body.facts.ansible_system).toBe('Linux');
  }, 180_000);

  test('masked below admin; the operator sees only hosts whose gathering run it may read; viewers may not list', async () => {
    await insertReadings(sql, [
      {
        inventory_id: inventoryId,
        host: 'h9',
        run_id: null,
        gathered_at: new Date(),
        size_bytes: 80,
        facts: { ansible_hostname: 'h9', db_password: 'hunter2', nested: { api_key: 'k-123', ok: 'fine' }, list: [{ token: 't-1' }] },
        digest: 'h9',
      },
    ]);
    const op = t.as(operator.token);
    const list = await op.get(`/v1/inventories/${inventoryId}/facts`);
    expect(list.status).toBe(200);
    expect(list.body.hosts.map((h: any) => h.host)).toEqual(['h9']);
    expect(list.body.withheld).toBe(2);
    const masked = await op.get(`/v1/inventories/${inventoryId}/facts/h9`);
    expect(masked.status).toBe(200);
    expect(masked.body.facts_masked).toBe(true);
    expect(masked.body.facts).toEqual({ ansible_hostname: 'h9', db_password: '[masked]', nested: { api_key: '[masked]', ok: 'fine' }, list: [{ token: '[masked]' }] });
    expect(masked.text).not.toContain('hunter2');
    // h2 was gathered by an admin's run the operator may not read.
    expect((await op.get(`/v1/inventories/${inventoryId}/facts/h2`)).status).toBe(404);

    const asViewer = t.as(viewer.token);
    expect((await asViewer.get(`/v1/inventories/${inventoryId}/facts`)).status).toBe(403);
    const hostRead = await asViewer.get('/v1/hosts/h9/facts');
    expect(hostRead.status).toBe(200);
    expect(hostRead.body.facts.db_password).toBe('[masked]');
    expect((await asViewer.get('/v1/hosts/h2/facts')).status).toBe(404);

    const admin = await t.api.get(`/v1/inventories/${inventoryId}/facts/h9`);
    expect(admin.body.facts.db_password).toBe('hunter2');
    expect(admin.body.facts_masked).toBe(false);
  });

  test('a held run whose template fact cache setting changed after approval is refused', async () => {
    const policy = await t.api.post('/v1/policies', { name: 'hold fact runs', command_contains: 'CAIRN-HOLD-FACTS' });
    expect(policy.status).toBe(201);
    try {
      const tpl = await ansibleTemplate({ command: `# CAIRN-HOLD-FACTS\n${READ_CACHED}`, use_fact_cache: true, fact_cache_timeout: 0 });
      const run = await launch(tpl.id);
      expect(run.status).toBe('held');
      const { use_fact_cache: _u, fact_cache_timeout: _f, ...rest } = tpl;
      const put = await t.api.request('PUT', `/v1/templates/${tpl.id}`, { body: { ...rest, fact_cache_timeout: 30 } });
      expect(put.status).toBe(200);
      const approved = await t.api.post(`/v1/runs/${run.id}/approve`, { state_digest: run.state_digest, reason: 'ok' });
      expect(approved.status).toBe(200);
      const ended = await waitForRunEnd(t.api, run.id, 60_000);
      expect(ended.status).toBe('failed');
      expect(ended.error).toMatch(/fact cache setting of template .* changed after this run was approved/);
    } finally {
      await t.api.request('DELETE', `/v1/policies/${policy.body.id}`);
    }
  }, 120_000);

  test('deleting one host clears its facts (a chain entry with no facts); deleting an inventory removes its facts', async () => {
    const cleared = await t.api.request('DELETE', `/v1/inventories/${inventoryId}/facts/h9`);
    expect(cleared.status).toBe(204);
    expect((await t.api.get(`/v1/inventories/${inventoryId}/facts/h9`)).status).toBe(404);
    expect((await t.api.request('DELETE', `/v1/inventories/${inventoryId}/facts/h9`)).status).toBe(404);
    const op = t.as(operator.token);
    expect((await op.request('DELETE', `/v1/inventories/${inventoryId}/facts/h1`)).status).toBe(403);
    const audit = await t.api.get('/v1/audit?limit=1000');
    const entry = audit.body.entries.find((e: any) => e.body?.kind === 'facts.cleared');
    expect(entry.body).toEqual({ kind: 'facts.cleared', inventory_id: inventoryId, host: 'h9', readings_removed: 1 });

    const other = await t.api.post('/v1/inventories', { name: 'short lived', content: 'x1\n' });
    expect(other.status).toBe(201);
    await insertReadings(sql, [{ inventory_id: other.body.id, host: 'x1', run_id: null, gathered_at: new Date(), size_bytes: 2, facts: { a: 1 }, digest: 'x' }]);
    expect((await t.api.get(`/v1/inventories/${other.body.id}/facts`)).body.count).toBe(1);
    expect((await t.api.request('DELETE', `/v1/inventories/${other.body.id}`)).status).toBe(204);
    const [{ n }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM fact_readings WHERE inventory_id = ${other.body.id}`;
    expect(n).toBe(0);
  });
});

test('--fact-cache-admin-only: fact reads answer 403 below admin', async () => {
  const strict = await startTestServer({ CAIRN_FACT_CACHE_ADMIN_ONLY: 'true' });
  try {
    const op = await person(strict.api, 'operator');
    const inv = await strict.api.post('/v1/inventories', { name: 'strict', content: 'a1\n' });
    await grant(strict.api, inv.body.id, 'read', { user_id: op.id });
    const asOperator = strict.as(op.token);
    for (const path of [`/v1/inventories/${inv.body.id}/facts`, `/v1/inventories/${inv.body.id}/facts/a1`, '/v1/hosts/a1/facts', '/v1/estate']) {
      const res = await asOperator.get(path);
      expect([path, res.status]).toEqual([path, 403]);
      expect(res.body.error).toMatch(/fact-cache-admin-only/);
    }
    expect((await strict.api.get(`/v1/inventories/${inv.body.id}/facts`)).status).toBe(200);
    expect((await strict.api.get('/v1/hosts/a1/facts')).status).toBe(404);
  } finally {
    await strict.stop();
  }
}, 60_000);
