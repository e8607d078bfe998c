import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { Run } from '../../core/runs/run';
import { RunInputError } from '../../core/runs/run-outcome';
import { runToolInputs } from '../../services/runs/run-inputs';
import { grant, person, type Person } from '../support/access';
import { forgeHeaders, githubPush } from '../support/forge-deliveries';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

/**
 * Saved smart and constructed inventories (spec part A 2.1, 4.12; part B 7.3, 7.5): saved over
 * input inventories the saver may use, with the hosts they reach counted at save; read; previewed
 * by id; resolved by a run as it starts (a play over a smart inventory of local hosts); an input
 * still used cannot be deleted (409 naming the user); an input gone fails the run, makes a
 * submission, launch or pipeline answer 400 and a rerun or webhook fire 409 (part B 7.3); a
 * callback to a template over one answers 409.
 */

let t: TestServer;
let operator: Person;
let web: string;
let db: string;

const LOCAL = 'ansible_connection=local ansible_python_interpreter=/usr/bin/python3';
const PLAYBOOK = `- hosts: all
  gather_facts: false
  tasks:
    - name: say who
      ansible.builtin.debug:
        msg: "host {{ inventory_hostname }} tier {{ tier | default('none') }}"
`;

async function created(res: { status: number; text: string; body: any }) {
  if (res.status !== 201) throw new Error(`${res.status} ${res.text}`);
  return res.body;
}

beforeAll(async () => {
  // The install key: a callback's host config key is sealed under it.
  // A webhook here is answered with its launch's outcome (CAIRN_HOOK_ANSWER_WAIT), as a sender that waits for it is.
  t = await startTestServer({
    SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
    SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
    CAIRN_HOOK_ANSWER_WAIT: '4500ms',
  });
  operator = await person(t.api, 'operator');
  web = (await created(await t.api.post('/v1/inventories', { name: 'ci web', content: `[web]\nweb1 ${LOCAL}\nweb2 ${LOCAL}\nweb3 ${LOCAL}\n[web:vars]\ntier=front\n` }))).id;
  db = (await created(await t.api.post('/v1/inventories', { name: 'ci db', content: `[db]\ndb1 ${LOCAL} ansible_host=127.0.0.9\n` }))).id;
});
afterAll(async () => {
  await t?.stop();
});

describe('saved smart and constructed inventories', () => {
  let smart: any;
  let constructed: any;

  test('saved, read, listed and previewed by id, hosts counted at save', async () => {
    smart = await created(await t.api.post('/v1/inventories', { name: 'ci smart', kind: 'smart', inputs: [web, db], host_filter: 'web*:!web3' }));
    expect(smart).toMatchObject({ kind: 'smart', inputs: [web, db], host_filter: 'web*:!web3', host_count: 2, content: '' });
    const read = await t.api.get(`/v1/inventories/${smart.id}`);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ kind: 'smart', inputs: [web, db], host_filter: 'web*:!web3', host_count: 2 });
    const list = await t.api.get('/v1/inventories?limit=200');
    const summary = list.body.inventories.find((i: any) => i.id === smart.id);
    expect(summary).toMatchObject({ kind: 'smart', inputs: [web, db], host_count: 2 });
    expect(summary.content).toBeUndefined();
    const preview = await t.api.post(`/v1/inventories/${smart.id}/preview`, {});
    expect(preview.status).toBe(200);
    expect(preview.body).toMatchObject({ kind: 'smart', count: 2, inventory_id: smart.id, engine: 'ansible-inventory' });
    expect(preview.body.hosts.sort()).toEqual(['web1', 'web2']);
    expect((await t.api.post(`/v1/inventories/${smart.id}/preview`, { limit: 'web1' })).body.field).toBe('limit');

    constructed = await created(
      await t.api.post('/v1/inventories', {
        name: 'ci constructed',
        kind: 'constructed',
        inputs: [web, db],
        source_vars: { groups: { frontline: "tier == 'front'" }, compose: { tier_label: "tier | default('back')" } },
      }),
    );
    expect(constructed).toMatchObject({ kind: 'constructed', host_count: 4 });
    const cpreview = await t.api.post(`/v1/inventories/${constructed.id}/preview`, {});
    expect(cpreview.status).toBe(200);
    expect(cpreview.body.groups.frontline.sort()).toEqual(['web1', 'web2', 'web3']);

    // A PUT keeps the kind; a changed filter is resolved again.
    const put = await t.api.request('PUT', `/v1/inventories/${smart.id}`, { body: { ...read.body, host_filter: 'web*' } });
    expect(put.text && put.status).toBe(200);
    expect(put.body).toMatchObject({ host_filter: 'web*', host_count: 3 });
    const kindChange = await t.api.request('PUT', `/v1/inventories/${smart.id}`, { body: { name: 'ci smart', content: 'h1\n' } });
    expect(kindChange.status).toBe(400);
    expect(kindChange.body.field).toBe('kind');
    // A source writes into a static inventory only.
    const source = await t.api.post('/v1/inventory-sources', { name: 'ci src', inventory_id: smart.id, kind: 'script', script: '#!/bin/sh\necho {}\n' });
    expect(source.status).toBe(400);
    expect(source.body.field).toBe('inventory_id');
  }, 120_000);

  test('bad definitions are refused naming the field; inputs need use by the saver', async () => {
    const missing = await t.api.post('/v1/inventories', { name: 'ci bad', kind: 'smart', inputs: [web, 'inv_gone'], host_filter: 'all' });
    expect(missing.status).toBe(422);
    expect(missing.body.field).toBe('inputs[1]');
    const nested = await t.api.post('/v1/inventories', { name: 'ci nested', kind: 'smart', inputs: [smart.id], host_filter: 'all' });
    expect(nested.status).toBe(422);
    expect(nested.body.field).toBe('inputs[0]');
    const noFilter = await t.api.post('/v1/inventories', { name: 'ci nofilter', kind: 'smart', inputs: [web] });
    expect(noFilter.status).toBe(400);
    expect(noFilter.body.field).toBe('host_filter');

    const asOperator = t.as(operator.token);
    const unreadable = await asOperator.post('/v1/inventories', { name: 'ci op smart', kind: 'smart', inputs: [web], host_filter: 'all' });
    expect(unreadable.status).toBe(422);
    await grant(t.api, web, 'read', { user_id: operator.id });
    const readOnly = await asOperator.post('/v1/inventories', { name: 'ci op smart', kind: 'smart', inputs: [web], host_filter: 'all' });
    expect(readOnly.status).toBe(403);
    await grant(t.api, web, 'use', { user_id: operator.id });
    const saved = await asOperator.post('/v1/inventories', { name: 'ci op smart', kind: 'smart', inputs: [web], host_filter: 'all' });
    expect(saved.status).toBe(201);
    expect(saved.body.host_count).toBe(3);
    expect((await asOperator.request('DELETE', `/v1/inventories/${saved.body.id}`)).status).toBe(204);
  }, 120_000);

  test('source_vars: secret-looking values masked below admin; an edit sending the mask back keeps the stored value', async () => {
    const asOperator = t.as(operator.token);
    const compose = { ansible_become_password: "'hunter2'", tier_label: 'tier' };
    const saved = await created(await asOperator.post('/v1/inventories', { name: 'ci op constructed', kind: 'constructed', inputs: [web], source_vars: { compose } }));
    expect(saved.source_vars.compose).toEqual({ ...compose, ansible_become_password: '[masked]' });
    const read = await asOperator.get(`/v1/inventories/${saved.id}`);
    expect(read.body).toMatchObject({ content_masked: true, source_vars: { compose: { ansible_become_password: '[masked]' } } });
    expect(read.text).not.toContain('hunter2');
    expect((await t.api.get(`/v1/inventories/${saved.id}`)).body.source_vars.compose).toEqual(compose);

    const sendBack = (changed: Record<string, unknown>) =>
      asOperator.request('PUT', `/v1/inventories/${saved.id}`, { body: { ...read.body, source_vars: { compose: { ...read.body.source_vars.compose, ...changed } } } });
    const edited = await sendBack({ tier_label: 'tier | upper' });
    expect(edited.text && edited.status).toBe(200);
    expect(edited.text).not.toContain('hunter2');
    expect((await t.api.get(`/v1/inventories/${saved.id}`)).body.source_vars.compose).toEqual({ ...compose, tier_label: 'tier | upper' });
    // The mask where nothing is stored keeps nothing: refused, naming where.
    const unknown = await sendBack({ db_password: '[masked]' });
    expect([unknown.status, unknown.body.field]).toEqual([400, 'source_vars.compose.db_password']);
    expect((await asOperator.request('DELETE', `/v1/inventories/${saved.id}`)).status).toBe(204);
  }, 120_000);

  test('a run over a saved smart inventory resolves it as it starts, within the run limit', async () => {
    const submitted = await t.api.post('/v1/runs', { tool: 'ansible', inventory_id: smart.id, command: PLAYBOOK });
    expect(submitted.status).toBe(201);
    const run = await waitForRunEnd(t.api, submitted.body.id, 120_000);
    const log = (await t.api.get(`/v1/runs/${run.id}/logs`)).text;
    expect(run.status).toBe('succeeded');
    expect(log).toContain('host web1 tier front');
    expect(log).toContain('host web3 tier front');
    expect(log).not.toContain('host db1');

    const limited = await waitForRunEnd(t.api, (await created(await t.api.post('/v1/runs', { tool: 'ansible', inventory_id: smart.id, command: PLAYBOOK, limit: 'web2:db1' }))).id, 120_000);
    const limitedLog = (await t.api.get(`/v1/runs/${limited.id}/logs`)).text;
    expect(limited.status).toBe('succeeded');
    expect(limitedLog).toContain('host web2 tier front');
    expect(limitedLog).not.toContain('host web1');
    expect(limitedLog).not.toContain('host db1');

    // A limit leaving no host of the smart inventory fails the run with the reason.
    const none = await waitForRunEnd(t.api, (await created(await t.api.post('/v1/runs', { tool: 'ansible', inventory_id: smart.id, command: PLAYBOOK, limit: 'db1' }))).id, 120_000);
    expect(none.status).toBe('failed');
    expect((await t.api.get(`/v1/runs/${none.id}/logs`)).text).toContain('the smart inventory reaches no host');

    // A constructed one: its composed variables reach the play.
    const play = PLAYBOOK.replace("tier | default('none')", 'tier_label');
    const crun = await waitForRunEnd(t.api, (await created(await t.api.post('/v1/runs', { tool: 'ansible', inventory_id: constructed.id, command: play }))).id, 120_000);
    const clog = (await t.api.get(`/v1/runs/${crun.id}/logs`)).text;
    expect(crun.status).toBe('succeeded');
    expect(clog).toContain('host db1 tier back');
    expect(clog).toContain('host web1 tier front');
    smart.run = run.id;
  }, 240_000);

  test('a callback to a template over a composed inventory answers 409 (part B 7.5)', async () => {
    const template = await created(await t.api.post('/v1/templates', { name: 'ci composed callback', tool: 'ansible', command: PLAYBOOK, inventory_id: constructed.id, allow_callbacks: true }));
    const minted = await t.api.post(`/v1/templates/${template.id}/callback-key`, {});
    expect(minted.text && minted.status).toBe(200);
    const url = new URL(t.url);
    const payload = JSON.stringify({ host_config_key: minted.body.host_config_key });
    const answer = await new Promise<{ status: number; body: any }>((resolve, reject) => {
      const req = http.request(
        { host: url.hostname, port: url.port, path: `/v1/templates/${template.id}/callback`, method: 'POST', localAddress: '127.0.0.9', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } },
        (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
    expect(answer.status).toBe(409);
    expect(answer.body.error).toContain('resolved when a run starts');
  }, 60_000);

  test('an input still used cannot be deleted; one gone fails the run, refuses a submission, launch or pipeline with 400 and a rerun or webhook fire with 409', async () => {
    const refused = await t.api.request('DELETE', `/v1/inventories/${db}`);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toContain(smart.id);
    expect(refused.body.error).toContain(constructed.id);

    // Gone another way (removed behind the service's back): what would run against it is refused.
    const template = await created(await t.api.post('/v1/templates', { name: 'ci composed launch', tool: 'ansible', command: PLAYBOOK, inventory_id: smart.id }));
    await t.server.context.sql`DELETE FROM inventories WHERE id = ${db}`;
    // By hand (a submission, a launch, a pipeline): 400 with the whole reason (part B 7.3, first row).
    const whole = `input inventory ${db} of inventory ${smart.id} no longer exists`;
    const launch = await t.api.post(`/v1/templates/${template.id}/launch`, {});
    expect(launch).toMatchObject({ status: 400, body: { field: 'inventory_id', missing_inputs: [db] } });
    expect(launch.body.error).toContain(whole);
    const direct = await t.api.post('/v1/runs', { tool: 'ansible', inventory_id: smart.id, command: PLAYBOOK });
    expect(direct).toMatchObject({ status: 400, body: { field: 'inventory_id', missing_inputs: [db] } });
    const pipeline = await t.api.post('/v1/pipelines', { steps: [{ tool: 'bash', command: 'true' }, { tool: 'ansible', inventory_id: smart.id, command: PLAYBOOK }] });
    expect(pipeline).toMatchObject({ status: 400, body: { field: 'steps[1].inventory_id', missing_inputs: [db] } });
    // A rerun and an unattended fire: 409 (its second and third rows).
    const rerun = await t.api.post(`/v1/runs/${smart.run}/rerun`, {});
    expect(rerun.status).toBe(409);
    expect(rerun.body.error).toContain(db);
    const trigger = await created(await t.api.post('/v1/triggers', { name: 'ci composed push', template_id: template.id, enforce_signature: false }));
    const push = JSON.stringify(githubPush());
    const fired = await t.as(null).request('POST', trigger.hook_path, { rawBody: push, headers: forgeHeaders('github', push, trigger.secret, { unsigned: true }) });
    expect(fired.status).toBe(409);
    expect(fired.body.error).toMatch(/^this template cannot launch: /);
    // A run that was already queued fails as it starts, with the reason (the worker's resolution).
    const queued = { id: 'run_x', tool: 'ansible', spec: { command: PLAYBOOK, extra_vars: {}, inventory_id: smart.id } } as unknown as Run;
    await expect(runToolInputs(t.server.context.sql, queued)).rejects.toThrow(new RunInputError(`the smart inventory could not be resolved: input inventory ${db} of inventory ${smart.id} no longer exists`));
  }, 60_000);
});
