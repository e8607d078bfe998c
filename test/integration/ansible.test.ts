import { pruneResultHistory } from '../../store/host-results';
import { grant, person } from '../support/access';
import { soonRule, waitUntil } from '../support/schedules';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

/**
 * The ansible tool end to end: real ansible-playbook in the run sandbox against local hosts
 * (several inventory names, each `ansible_connection=local`), one made to fail and one
 * unreachable (ssh to a closed port), Cairn's callback plugin reporting per-host and per-task
 * results into evidence, compare, the fleet, host history and task trends; relaunch-failed
 * running only the two; and a clean exit over no host recorded failed. Runs are few and small.
 */

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.stop();
});

const INVENTORY = `# three hosts on this machine; h3 is reached over ssh on a port nothing listens on
[web]
h1 ansible_connection=local ansible_python_interpreter=/usr/bin/python3
h2 ansible_connection=local ansible_python_interpreter=/usr/bin/python3
[far]
h3 ansible_connection=ssh ansible_host=127.0.0.1 ansible_port=1
[far:vars]
ansible_become_pass=hunter22
`;

const PLAYBOOK = `- hosts: all
  gather_facts: false
  tasks:
    - name: say hi
      ansible.builtin.command: echo hi {{ greeting }}
    - name: fail on h2
      ansible.builtin.fail:
        msg: h2 is broken
      when: inventory_hostname == 'h2'
    - name: after
      ansible.builtin.debug:
        msg: done
`;

async function submit(body: Record<string, unknown>) {
  const res = await t.api.post('/v1/runs', { tool: 'ansible', ...body });
  if (res.status !== 201) throw new Error(`submit: ${res.status} ${res.text}`);
  return res.body;
}

const evidence = async (id: string) => (await t.api.get(`/v1/runs/${id}/evidence?format=json`)).body;
const hostsOf = (doc: any) => Object.fromEntries(doc.hosts.map((h: any) => [h.host, h.status]));

describe('the ansible tool', () => {
  let inventoryId: string;
  let first: any;
  let relaunched: any;

  beforeAll(async () => {
    const inv = await t.api.post('/v1/inventories', { name: 'local three', content: INVENTORY });
    expect(inv.status).toBe(201);
    expect(inv.body).toMatchObject({ host_count: 3, format: 'ini' });
    inventoryId = inv.body.id;
  });

  test('a play over three hosts: per-host and per-task results in evidence; the log shows the output', async () => {
    const run = await submit({ inventory_id: inventoryId, command: PLAYBOOK, extra_vars: { greeting: 'there' }, forks: 3, verbosity: 9 });
    expect(run).toMatchObject({ inventory_id: inventoryId, forks: 3, verbosity: 4, limit: '', playbook: null });
    first = await waitForRunEnd(t.api, run.id, 120_000);
    const log = (await t.api.get(`/v1/runs/${run.id}/logs`)).text;
    expect(first.status).toBe('failed');
    expect(log).toContain('PLAY RECAP');
    expect(log).toContain('h2 is broken');

    const doc = await evidence(run.id);
    expect(hostsOf(doc)).toEqual({ h1: 'changed', h2: 'failed', h3: 'unreachable' });
    expect(doc.hosts.find((h: any) => h.host === 'h1').counts).toMatchObject({ ok: 2, changed: 1, skipped: 1, failed: 0 });
    expect(doc.tasks.map((x: any) => x.task)).toEqual(['say hi', 'fail on h2', 'after']);
    expect(doc.tasks[0].hosts).toEqual({ h1: 'changed', h2: 'changed', h3: 'unreachable' });
    expect(doc.tasks[1].counts).toEqual({ skipped: 1, failed: 1 });
    expect(typeof doc.tasks[0].duration_ms).toBe('number');
    const html = (await t.api.get(`/v1/runs/${run.id}/evidence`)).text;
    expect(html).toContain('id="hosts"');
  }, 180_000);

  test('relaunch-failed runs only the failed and unreachable hosts; the original never changes', async () => {
    const res = await t.api.post(`/v1/runs/${first.id}/relaunch-failed`, {});
    expect(res.status).toBe(201);
    expect(res.body.limit).toBe('h2,h3');
    expect(res.body.rerun_of).toBe(first.id);
    relaunched = await waitForRunEnd(t.api, res.body.id, 120_000);
    expect(relaunched.status).toBe('failed');
    expect(hostsOf(await evidence(relaunched.id))).toEqual({ h2: 'failed', h3: 'unreachable' });
    const original = (await t.api.get(`/v1/runs/${first.id}`)).body;
    expect(original).toEqual(first);

    // compare against the run before it from the same source, and against a run named outright.
    const prev = await t.api.get(`/v1/runs/${relaunched.id}/compare?with=prev`);
    expect(prev.status).toBe(200);
    expect(prev.body.baseline).toMatchObject({ id: first.id, chosen_by: 'prev' });
    expect(prev.body.hosts).toEqual([
      { host: 'h1', before: 'changed', after: null, change: 'removed' },
      { host: 'h2', before: 'failed', after: 'failed', change: 'same' },
      { host: 'h3', before: 'unreachable', after: 'unreachable', change: 'same' },
    ]);
    expect(prev.body.tasks.map((x: any) => x.task)).toEqual(['say hi', 'fail on h2', 'after']);
    expect(prev.body.duration).toEqual({ before_ms: expect.any(Number), after_ms: expect.any(Number), delta_ms: expect.any(Number) });
    const named = await t.api.get(`/v1/runs/${first.id}/compare?with=${relaunched.id}`);
    expect(named.body.hosts.find((h: any) => h.host === 'h1').change).toBe('added');
    expect((await t.api.get(`/v1/runs/${first.id}/compare`)).status).toBe(400);
    expect((await t.api.get(`/v1/runs/${first.id}/compare?with=prev`)).status).toBe(404);
  }, 180_000);

  test('fleet, host history and task trends, with their windows and caps', async () => {
    const fleet = await t.api.get('/v1/fleet');
    expect(fleet.body.window).toBe(10);
    const byHost = Object.fromEntries(fleet.body.hosts.map((h: any) => [h.host, h]));
    expect(byHost.h2).toMatchObject({ runs: 2, failures: 2, last_status: 'failed', flaky: false });
    expect(byHost.h1).toMatchObject({ runs: 1, failures: 0 });
    expect(fleet.body.hosts.at(-1).host).toBe('h1');
    expect((await t.api.get('/v1/fleet?window=5000')).body.window).toBe(100);
    expect((await t.api.get('/v1/fleet?window=1')).body.hosts.find((h: any) => h.host === 'h2').runs).toBe(1);
    expect((await t.api.get('/v1/fleet?window=abc')).status).toBe(400);

    const history = await t.api.get('/v1/hosts/h3/runs');
    expect(history.body).toMatchObject({ host: 'h3', limit: 10, count: 2 });
    expect(history.body.runs.map((r: any) => r.run_id)).toEqual([relaunched.id, first.id]);
    expect((await t.api.get('/v1/hosts/h3/runs?limit=100000')).body.limit).toBe(500);
    // Runs listed by a task they ran.
    const byTask = await t.api.get(`/v1/runs?task=${encodeURIComponent('fail on h2')}`);
    expect(byTask.body.runs.map((r: any) => r.id)).toEqual([relaunched.id, first.id]);
    expect(byTask.body.total).toBe(2);

    const tasks = await t.api.get('/v1/tasks?window=3');
    expect(tasks.body.window).toBe(3);
    const hi = tasks.body.tasks.find((x: any) => x.task === 'say hi');
    expect(hi).toMatchObject({ runs: 2, latest_ms: expect.any(Number), trend_ms: expect.any(Number) });
  });

  test('a clean exit over no host is failed with the reason; relaunch-failed of a run with no failed host is 409', async () => {
    const empty = await t.api.post('/v1/inventories', { name: 'empty', content: 'all:\n  hosts: {}\n' });
    expect(empty.body).toMatchObject({ format: 'yaml', host_count: 0 });
    const none = await waitForRunEnd(t.api, (await submit({ inventory_id: empty.body.id, command: PLAYBOOK })).id, 120_000);
    expect(none).toMatchObject({ status: 'failed', exit_code: 0 });
    expect(none.error).toMatch(/matched no host/);
    // An inventory path (read inside the sandbox) that names no host, likewise.
    const byPath = await waitForRunEnd(t.api, (await submit({ inventory: '/nonexistent/hosts', command: PLAYBOOK })).id, 120_000);
    expect(byPath).toMatchObject({ status: 'failed', exit_code: 0, inventory: '/nonexistent/hosts' });
    expect(byPath.error).toMatch(/matched no host/);

    const good = await waitForRunEnd(t.api, (await submit({ inventory_id: inventoryId, command: PLAYBOOK, extra_vars: { greeting: 'x' }, limit: 'h1', diff_mode: true })).id, 120_000);
    expect(good.status).toBe('succeeded');
    const again = await t.api.post(`/v1/runs/${good.id}/relaunch-failed`, {});
    expect(again.status).toBe(409);
    expect(again.body.error).toMatch(/no host failed or unreachable/);
  }, 180_000);

  test('a template carries the playbook, inventory and controls onto its launches', async () => {
    const created = await t.api.post('/v1/templates', {
      name: 'ansible h1',
      tool: 'ansible',
      command: PLAYBOOK,
      inventory_id: inventoryId,
      limit: 'h1',
      tags: ['web'],
      skip_tags: [],
      verbosity: 1,
      extra_vars: { greeting: 'from a template' },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ inventory_id: inventoryId, limit: 'h1', tags: ['web'], skip_tags: [], forks: 0, verbosity: 1, diff_mode: false, playbook: null });
    // A read sent back as it is replaces it unchanged.
    const same = await t.api.request('PUT', `/v1/templates/${created.body.id}`, { body: { ...created.body, tags: [] } });
    expect(same.status).toBe(200);
    expect(same.body.tags).toEqual([]);
    const launched = await t.api.post(`/v1/templates/${created.body.id}/launch`, {});
    expect(launched.status).toBe(201);
    expect(launched.body).toMatchObject({ inventory_id: inventoryId, limit: 'h1', verbosity: 1, template_id: created.body.id });
    const run = await waitForRunEnd(t.api, launched.body.id, 120_000);
    expect(run.status).toBe('succeeded');
    expect(hostsOf(await evidence(run.id))).toEqual({ h1: 'changed' });
    // A template naming an inventory that does not exist is refused naming the field.
    const missing = await t.api.post('/v1/templates', { name: 'no inv', tool: 'ansible', playbook: 'site.yml', inventory_id: 'inv_nope' });
    expect(missing.status).toBe(400);
    expect(missing.body.field).toBe('inventory_id');
    // A template whose inventory has since been deleted cannot launch (a configuration error, Part B 7.3).
    const gone = await t.api.post('/v1/inventories', { name: 'soon gone', content: '[web]\nh1 ansible_connection=local\n' });
    const orphan = await t.api.post('/v1/templates', { name: 'orphan', tool: 'ansible', command: PLAYBOOK, inventory_id: gone.body.id });
    expect(orphan.status).toBe(201);
    expect((await t.api.request('DELETE', `/v1/inventories/${gone.body.id}`)).status).toBe(204);
    const refused = await t.api.post(`/v1/templates/${orphan.body.id}/launch`, {});
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ field: 'inventory_id', error: `inventory_id: inventory ${gone.body.id} not found` });
  }, 180_000);

  test('--retain-history keeps the newest summaries of each host and task (the store rule, with a small N)', async () => {
    const sql = t.server.context.sql;
    const count = async (host: string) => (await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM run_host_results WHERE host = ${host}`)[0].n;
    expect(await count('h1')).toBeGreaterThan(1);
    const pruned = await pruneResultHistory(sql, 1);
    expect(pruned.hosts).toBeGreaterThan(0);
    expect(await count('h1')).toBe(1);
    expect(await count('h2')).toBe(1);
    const history = (await t.api.get('/v1/hosts/h2/runs')).body;
    expect(history.runs.map((r: any) => r.run_id)).toEqual([relaunched.id]);
    const tasks = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM run_task_results WHERE task = 'say hi'`;
    expect(tasks[0].n).toBe(1);
  });

  test('submission checks: a playbook or command, an inventory the caller may use', async () => {
    const noPlaybook = await t.api.post('/v1/runs', { tool: 'ansible', inventory_id: inventoryId });
    expect(noPlaybook.status).toBe(400);
    expect(noPlaybook.body).toEqual({ field: 'playbook', error: 'playbook: an ansible run needs playbook (a path) or command (the playbook itself)' });
    const missing = await t.api.post('/v1/runs', { tool: 'ansible', command: PLAYBOOK, inventory_id: 'inv_nope' });
    expect(missing.status).toBe(400);
    expect(missing.text).toContain('inventory_id');
    const badVerbosity = await t.api.post('/v1/runs', { tool: 'ansible', command: PLAYBOOK, verbosity: -1 });
    expect(badVerbosity.status).toBe(400);
    expect(badVerbosity.body.field).toBe('verbosity');
    const split = await t.api.post('/v1/runs', { tool: 'ansible', command: PLAYBOOK, shards: 2 });
    expect(split.status).toBe(400);
    expect(split.body.field).toBe('shards');
    const splitTemplate = await t.api.post('/v1/templates', { name: 'split', tool: 'ansible', command: PLAYBOOK, shards: 2 });
    expect(splitTemplate.status).toBe(400);
    expect(splitTemplate.body.field).toBe('shards');
    const commaTag = await t.api.post('/v1/runs', { tool: 'ansible', command: PLAYBOOK, tags: ['a,b'] });
    expect(commaTag.status).toBe(400);
    expect(commaTag.body.field).toBe('tags[0]');
    // Other tools ignore the ansible fields: they are not kept on the run.
    const bash = await t.api.post('/v1/runs', { tool: 'bash', command: 'true', limit: 'h1', forks: 2 });
    expect(bash.status).toBe(201);
    expect(bash.body.limit).toBeUndefined();
    expect(bash.body.forks).toBeUndefined();
    await waitForRunEnd(t.api, bash.body.id);
  });
});

describe('ansible steps in pipelines, saved workflows and schedules', () => {
  const LOCAL = 'ansible_connection=local ansible_python_interpreter=/usr/bin/python3';
  const SAY = `- hosts: all
  gather_facts: false
  tasks:
    - name: say where
      ansible.builtin.debug:
        msg: "{{ stage }} on {{ inventory_hostname }}"
`;
  let web: string;
  let db: string;

  beforeAll(async () => {
    web = (await t.api.post('/v1/inventories', { name: 'steps web', content: `[web]\nweb1 ${LOCAL}\nweb2 ${LOCAL}\n` })).body.id;
    db = (await t.api.post('/v1/inventories', { name: 'steps db', content: `[db]\ndb1 ${LOCAL}\n` })).body.id;
  });

  const stepsOf = async (runId: string) => (await t.api.get(`/v1/runs/${runId}/steps`)).body.steps as any[];
  const logOf = async (runId: string) => (await t.api.get(`/v1/runs/${runId}/logs`)).text;

  test('a pipeline chains playbooks over stored inventories, each step with its own inventory and controls', async () => {
    const res = await t.api.post('/v1/pipelines', {
      extra_vars: { stage: 'pipeline' },
      steps: [
        { name: 'db first', tool: 'ansible', command: SAY, inventory_id: db },
        { name: 'then one web', tool: 'ansible', command: SAY, inventory_id: web, limit: 'web2', verbosity: 1 },
      ],
    });
    expect(res.status).toBe(201);
    const ended = await waitForRunEnd(t.api, res.body.id, 180_000);
    expect(ended.status).toBe('succeeded');
    const [first, second] = await stepsOf(res.body.id);
    expect(first).toMatchObject({ step_name: 'db first', tool: 'ansible', inventory_id: db, limit: '', status: 'succeeded' });
    expect(second).toMatchObject({ step_name: 'then one web', inventory_id: web, limit: 'web2', verbosity: 1, status: 'succeeded' });
    expect(await logOf(first.id)).toContain('pipeline on db1');
    const secondLog = await logOf(second.id);
    expect(secondLog).toContain('pipeline on web2');
    expect(secondLog).not.toContain('on web1');
  }, 240_000);

  test('a saved workflow\'s steps name their playbook and inventory, checked when it is saved and carried onto its launch', async () => {
    const operator = await person(t.api, 'operator');
    const as = t.as(operator.token);
    const body = {
      name: 'ansible workflow',
      extra_vars: { stage: 'workflow' },
      steps: [
        { name: 'web', tool: 'ansible', command: SAY, inventory_id: web, limit: 'web1' },
        { name: 'site', tool: 'ansible', playbook: 'site.yml', inventory_id: db, tags: ['deploy'], depends_on: ['web'] },
      ],
    };
    // Use of each step's inventory is needed to save it, as for a run; a step names the field.
    const refused = await as.post('/v1/templates', body);
    expect(refused).toMatchObject({ status: 400, body: { field: 'steps[0].inventory_id' } });
    await grant(t.api, web, 'use', { user_id: operator.id });
    await grant(t.api, db, 'read', { user_id: operator.id });
    const held = await as.post('/v1/templates', body);
    expect(held).toMatchObject({ status: 403, body: { field: 'steps[1].inventory_id', required_grant: 'use' } });
    const noPlaybook = await t.api.post('/v1/templates', { ...body, steps: [{ name: 'nothing', tool: 'ansible', inventory_id: web }] });
    expect(noPlaybook).toMatchObject({ status: 400, body: { field: 'steps[0].playbook' } });
    const approvalWithInventory = await t.api.post('/v1/templates', { ...body, steps: [{ name: 'gate', type: 'approval', inventory_id: web }] });
    expect(approvalWithInventory).toMatchObject({ status: 400, body: { field: 'steps[0].inventory_id' } });

    const saved = await t.api.post('/v1/templates', body);
    expect(saved.status).toBe(201);
    expect(saved.body.steps).toEqual([
      { name: 'web', type: 'run', tool: 'ansible', command: SAY, inventory_id: web, limit: 'web1', depends_on: [] },
      { name: 'site', type: 'run', tool: 'ansible', playbook: 'site.yml', inventory_id: db, tags: ['deploy'], depends_on: ['web'] },
    ]);
    const launched = await t.api.post(`/v1/templates/${saved.body.id}/launch`, {});
    expect(launched.status).toBe(201);
    await waitForRunEnd(t.api, launched.body.id, 180_000);
    const [first, second] = await stepsOf(launched.body.id);
    expect(first).toMatchObject({ inventory_id: web, limit: 'web1', status: 'succeeded' });
    expect(await logOf(first.id)).toContain('workflow on web1');
    // The second step's playbook is a path, and this workflow has no project to find it in.
    expect(second).toMatchObject({ playbook: 'site.yml', inventory_id: db, tags: ['deploy'], status: 'failed' });
  }, 240_000);

  test('a schedule\'s inline run takes the playbook, inventory and controls, checked as a run is', async () => {
    const viewer = await person(t.api, 'operator');
    const refused = await t.as(viewer.token).post('/v1/schedules', { name: 'no use', cron: '0 3 * * *', timezone: 'UTC', run: { tool: 'ansible', command: SAY, inventory_id: web } });
    expect(refused).toMatchObject({ status: 400, body: { field: 'run.inventory_id' } });
    const noPlaybook = await t.api.post('/v1/schedules', { name: 'no playbook', cron: '0 3 * * *', timezone: 'UTC', run: { tool: 'ansible', inventory_id: web } });
    expect(noPlaybook).toMatchObject({ status: 400, body: { field: 'run.playbook' } });
    const { rrule } = soonRule('FREQ=DAILY;COUNT=1', 2);
    const created = await t.api.post('/v1/schedules', {
      name: 'ansible nightly',
      rrule,
      run: { tool: 'ansible', command: SAY, inventory_id: web, limit: 'web2', diff_mode: true, extra_vars: { stage: 'schedule' } },
    });
    expect(created.status).toBe(201);
    expect(created.body.run).toMatchObject({ inventory_id: web, limit: 'web2', diff_mode: true });
    const fired = await waitUntil('the fire', async () => (await t.api.get(`/v1/schedules/${created.body.id}`)).body.last_run_id, 30_000);
    const run = await waitForRunEnd(t.api, fired, 120_000);
    expect(run).toMatchObject({ status: 'succeeded', inventory_id: web, limit: 'web2', diff_mode: true });
    expect(await logOf(run.id)).toContain('schedule on web2');
  }, 180_000);
});
