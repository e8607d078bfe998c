import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { runAccountDir } from '../../runtime/sandbox-setup';
import { grant, person, type Person } from '../support/access';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';
import { tempDir } from '../support/temp';

/**
 * Dynamic inventory sources (spec part A 4.12): a script source run in the run sandbox with a
 * scrubbed environment and a timeout, its `--list` JSON written into its inventory; a project_file
 * source read within a project's checkout; failures recorded as `last_error` with a 422 and the
 * inventory left as it was; access owned by the inventory; chain entries without the script. And a
 * rerun of a run whose inventory or project has been deleted answers 409 naming it (part B 7.3).
 */

let t: TestServer;
/** YAML read by PyYAML, as ansible reads it. */
const yamlOf = (text: string) =>
  JSON.parse(execFileSync('python3', ['-c', 'import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))'], { input: text, encoding: 'utf8' }));
let bare: string;
let work: string;
let operator: Person;
let viewer: Person;

async function created(res: { status: number; text: string; body: any }) {
  if (res.status !== 201) throw new Error(`${res.status} ${res.text}`);
  return res.body;
}

async function settledProject(id: string): Promise<any> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const { body } = await t.api.get(`/v1/projects/${id}`);
    if (!body.update_pending && (body.status === 'successful' || body.status === 'failed')) return body;
    if (Date.now() > deadline) throw new Error(`project ${id} did not settle: ${JSON.stringify(body)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const SCRIPT = `#!/usr/bin/env python3
import json, os, sys
assert sys.argv[1:] == ['--list'], sys.argv
print(json.dumps({
    'web': {'hosts': ['web1', 'web2'], 'vars': {'tier': 'front'}, 'children': ['edge']},
    'edge': ['edge1'],
    'db': {'hosts': ['db1']},
    '_meta': {'hostvars': {'web1': {'env_names': sorted(os.environ), 'cwd_files': sorted(os.listdir('.'))}}},
}))
print('a note on standard error', file=sys.stderr)
`;
import { git } from '../support/git';

beforeAll(async () => {
  const root = tempDir('cairn-git');
  // The run account reads the repository in its sandbox.
  chmodSync(root, 0o755);
  t = await startTestServer({ CAIRN_PROJECT_LOCAL_ROOTS: root });
  operator = await person(t.api, 'operator');
  viewer = await person(t.api, 'viewer');
  bare = path.join(root, 'repo.git');
  work = path.join(root, 'work');
  execFileSync('git', ['init', '-q', '--bare', '-b', 'main', bare]);
  mkdirSync(work);
  git(work, 'init', '-q', '-b', 'main');
  git(work, 'remote', 'add', 'origin', bare);
  mkdirSync(path.join(work, 'inventories'));
  writeFileSync(path.join(work, 'inventories', 'hosts.ini'), '[app]\napp[1:3]\n[cache]\nredis1\n');
  writeFileSync(path.join(work, 'inventories', 'broken.yml'), 'all: [this is: not: valid\n');
  writeFileSync(path.join(work, 'site.yml'), '- hosts: localhost\n  gather_facts: false\n  tasks: []\n');
  git(work, 'add', '-A');
  git(work, 'commit', '-q', '-m', 'first');
  git(work, 'push', '-q', 'origin', 'HEAD:main');
});
afterAll(async () => {
  await t?.stop();
});

describe('inventory sources', () => {
  let inventoryId: string;
  let scriptSource: any;

  beforeAll(async () => {
    inventoryId = (await created(await t.api.post('/v1/inventories', { name: 'dynamic', content: 'placeholder\n' }))).id;
  });

  test('a script source refreshes into its inventory: sandboxed, scrubbed environment, hosts counted, chain entries without the script', async () => {
    scriptSource = await created(await t.api.post('/v1/inventory-sources', { inventory_id: inventoryId, name: 'cloud', kind: 'script', script: SCRIPT }));
    expect(scriptSource).toMatchObject({ inventory_id: inventoryId, kind: 'script', status: 'never', last_error: null, host_count: null, script: SCRIPT, timeout_seconds: 60 });

    const refreshed = await t.api.post(`/v1/inventory-sources/${scriptSource.id}/refresh`);
    expect([refreshed.status, refreshed.text]).toEqual([200, expect.any(String)]);
    expect(refreshed.body).toMatchObject({ status: 'successful', last_error: null, host_count: 4 });
    expect(refreshed.body.last_refreshed_at).toEqual(expect.any(String));

    const inventory = (await t.api.get(`/v1/inventories/${inventoryId}`)).body;
    expect(inventory).toMatchObject({ format: 'yaml', host_count: 4 });
    const doc = yamlOf(inventory.content);
    expect(Object.keys(doc.all.children).sort()).toEqual(['db', 'edge', 'web']);
    expect(doc.all.children.web.vars).toEqual({ tier: 'front' });
    expect(doc.all.children.web.children).toEqual({ edge: null });
    // The script saw only the scrubbed environment, in a scratch dir of its own.
    const envNames: string[] = doc.all.children.web.hosts.web1.env_names;
    expect(envNames).toEqual(expect.arrayContaining(['HOME', 'LANG', 'PATH', 'TMPDIR']));
    for (const name of envNames) expect(['HOME', 'LANG', 'PATH', 'TMPDIR', 'PWD', 'SHLVL', '_', 'LC_CTYPE']).toContain(name);
    expect(doc.all.children.web.hosts.web1.cwd_files).toEqual(['.cairn-job.out', 'inventory-script']);
    // ansible-inventory reads what was written.
    const preview = await t.api.post(`/v1/inventories/${inventoryId}/preview`, {});
    expect(preview.status).toBe(200);
    expect([...preview.body.hosts].sort()).toEqual(['db1', 'edge1', 'web1', 'web2']);
    // The scratch dir is gone.
    expect(readdirSync(await runAccountDir(t.config, 'runs', () => undefined)).filter((n) => n.startsWith(scriptSource.id))).toEqual([]);

    const audit = (await t.api.get('/v1/audit?limit=1000')).text;
    expect(audit).toContain('inventory_source.created');
    expect(audit).toContain('inventory_source.refreshed');
    expect(audit).not.toContain('a note on standard error');
    expect(audit).not.toContain('sorted(os.environ)');
  });

  test('a failing, slow or malformed script fails the refresh with 422 and last_error; the inventory stays as it was', async () => {
    const before = (await t.api.get(`/v1/inventories/${inventoryId}`)).body.content;
    const cases: [string, string, number | undefined, string][] = [
      ['exits', '#!/bin/sh\necho "cloud API said no" >&2\nexit 3\n', undefined, 'the script exited with code 3: cloud API said no'],
      ['slow', '#!/bin/sh\nsleep 30\n', 1, 'the script did not finish within 1 s and was stopped'],
      ['not json', '#!/bin/sh\necho hello\n', undefined, "the script's output is not JSON"],
      ['bad hosts', '#!/bin/sh\necho \'{"web": {"hosts": [1, 2]}}\'\n', undefined, 'group web: hosts must be a list of host names'],
    ];
    for (const [name, script, timeout, reason] of cases) {
      const source = await created(await t.api.post('/v1/inventory-sources', { inventory_id: inventoryId, name, kind: 'script', script, timeout_seconds: timeout }));
      const started = Date.now();
      const res = await t.api.post(`/v1/inventory-sources/${source.id}/refresh`);
      expect([name, res.status]).toEqual([name, 422]);
      expect(res.body.error).toContain(reason);
      if (timeout) expect(Date.now() - started).toBeLessThan(10_000);
      const read = (await t.api.get(`/v1/inventory-sources/${source.id}`)).body;
      expect(read).toMatchObject({ status: 'failed', host_count: null });
      expect(read.last_error).toContain(reason);
    }
    expect((await t.api.get(`/v1/inventories/${inventoryId}`)).body.content).toBe(before);
    expect((await t.api.get('/v1/audit?limit=1000')).text).toContain('inventory_source.refresh_failed');
  }, 60_000);

  test('a project_file source reads an inventory within the checkout; paths leaving it are refused', async () => {
    const project = await created(await t.api.post('/v1/projects', { name: 'inventories repo', url: bare }));
    expect((await settledProject(project.id)).status).toBe('successful');
    const target = (await created(await t.api.post('/v1/inventories', { name: 'from git', content: 'x\n' }))).id;
    const source = await created(await t.api.post('/v1/inventory-sources', { inventory_id: target, name: 'git', kind: 'project_file', project_id: project.id, path: 'inventories/hosts.ini' }));
    const refreshed = await t.api.post(`/v1/inventory-sources/${source.id}/refresh`);
    expect(refreshed.status).toBe(200);
    expect(refreshed.body.host_count).toBe(4);
    expect((await t.api.get(`/v1/inventories/${target}`)).body).toMatchObject({ format: 'ini', host_count: 4, content: '[app]\napp[1:3]\n[cache]\nredis1\n' });

    for (const escape of ['../../etc/passwd', '/etc/passwd', '.git/config']) {
      const res = await t.api.post('/v1/inventory-sources', { inventory_id: target, name: `bad ${escape}`, kind: 'project_file', project_id: project.id, path: escape });
      expect([escape, res.status, res.body.field]).toEqual([escape, 400, 'path']);
    }
    const broken = await created(await t.api.post('/v1/inventory-sources', { inventory_id: target, name: 'broken', kind: 'project_file', project_id: project.id, path: 'inventories/broken.yml' }));
    const failed = await t.api.post(`/v1/inventory-sources/${broken.id}/refresh`);
    expect(failed.status).toBe(422);
    expect(failed.body.error).toContain('does not parse');
    const missing = await created(await t.api.post('/v1/inventory-sources', { inventory_id: target, name: 'missing', kind: 'project_file', project_id: project.id, path: 'nope.ini' }));
    expect((await t.api.post(`/v1/inventory-sources/${missing.id}/refresh`)).status).toBe(422);
    // Field faults name the field.
    expect((await t.api.post('/v1/inventory-sources', { inventory_id: target, name: 'x', kind: 'project_file', path: 'a.ini' })).body.field).toBe('project_id');
    expect((await t.api.post('/v1/inventory-sources', { inventory_id: target, name: 'x', kind: 'script' })).body.field).toBe('script');
    expect((await t.api.post('/v1/inventory-sources', { inventory_id: target, name: 'x', kind: 'ldap' })).body.field).toBe('kind');
    expect((await t.api.post('/v1/inventory-sources', { inventory_id: 'inv_missing', name: 'x', kind: 'script', script: '#!/bin/sh\n' })).body.field).toBe('inventory_id');
    expect((await t.api.post('/v1/inventory-sources', { inventory_id: target, name: 'git', kind: 'script', script: '#!/bin/sh\n' })).status).toBe(409);
  }, 60_000);

  test('access is the inventory’s: read to see a source, manage to write or refresh; the script is shown to admins only', async () => {
    const asOperator = t.as(operator.token);
    const asViewer = t.as(viewer.token);
    expect((await asViewer.get(`/v1/inventory-sources/${scriptSource.id}`)).status).toBe(404);
    expect((await asViewer.get('/v1/inventory-sources')).body.inventory_sources).toEqual([]);
    expect((await asOperator.post('/v1/inventory-sources', { inventory_id: inventoryId, name: 'mine', kind: 'script', script: '#!/bin/sh\n' })).status).toBe(400);
    expect((await asViewer.post('/v1/inventory-sources', { inventory_id: inventoryId, name: 'mine', kind: 'script', script: '#!/bin/sh\n' })).status).toBe(403);

    await grant(t.api, inventoryId, 'read', { user_id: operator.id });
    const read = await asOperator.get(`/v1/inventory-sources/${scriptSource.id}`);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ script: null, script_withheld: true });
    expect((await asOperator.get('/v1/inventory-sources')).body.inventory_sources.map((s: any) => s.id)).toContain(scriptSource.id);
    expect((await asOperator.post(`/v1/inventory-sources/${scriptSource.id}/refresh`)).status).toBe(403);
    expect((await asOperator.request('DELETE', `/v1/inventory-sources/${scriptSource.id}`)).status).toBe(403);

    await grant(t.api, inventoryId, 'manage', { user_id: operator.id });
    expect((await asOperator.post(`/v1/inventory-sources/${scriptSource.id}/refresh`)).status).toBe(200);
    const updated = await asOperator.request('PUT', `/v1/inventory-sources/${scriptSource.id}`, { body: { ...read.body, name: 'cloud renamed', script: SCRIPT, timeout_seconds: 30 } });
    expect([updated.status, updated.body.name, updated.body.timeout_seconds, updated.status === 200 || updated.text]).toEqual([200, 'cloud renamed', 30, true]);
  });

  test('deleting an inventory deletes its sources', async () => {
    const doomed = (await created(await t.api.post('/v1/inventories', { name: 'doomed', content: 'x\n' }))).id;
    const source = await created(await t.api.post('/v1/inventory-sources', { inventory_id: doomed, name: 's', kind: 'script', script: '#!/bin/sh\n' }));
    expect((await t.api.request('DELETE', `/v1/inventories/${doomed}`)).status).toBe(204);
    expect((await t.api.get(`/v1/inventory-sources/${source.id}`)).status).toBe(404);
    const deleted = await created(await t.api.post('/v1/inventory-sources', { inventory_id: inventoryId, name: 'short lived', kind: 'script', script: '#!/bin/sh\n' }));
    expect((await t.api.request('DELETE', `/v1/inventory-sources/${deleted.id}`)).status).toBe(204);
    expect((await t.api.get('/v1/audit?limit=1000')).text).toContain('inventory_source.deleted');
  });
});

describe('smart and constructed inventory previews', () => {
  let a: string;
  let b: string;
  beforeAll(async () => {
    a = (await created(await t.api.post('/v1/inventories', { name: 'composed a', content: '[web]\nweb1 env=prod\nweb2 env=dev\n[db]\ndb1 env=prod\n' }))).id;
    b = (await created(await t.api.post('/v1/inventories', { name: 'composed b', content: 'all:\n  hosts:\n    cache1:\n      env: prod\n' }))).id;
  });

  test('a smart inventory is a host pattern over its inputs', async () => {
    const preview = async (host_filter: string) => t.api.post('/v1/inventories/preview', { kind: 'smart', inputs: [a, b], host_filter });
    const web = await preview('web*');
    expect([web.status, web.text.slice(0, 300)]).toEqual([200, expect.any(String)]);
    expect(web.body).toMatchObject({ kind: 'smart', engine: 'ansible-inventory', count: 2, inventory_id: null, inputs: [a, b] });
    expect(web.body.ansible_core).toEqual(expect.any(String));
    expect([...web.body.hosts].sort()).toEqual(['web1', 'web2']);
    expect([...(await preview('all:!db1')).body.hosts].sort()).toEqual(['cache1', 'web1', 'web2']);
    expect((await preview('nothing-like-this*')).body).toMatchObject({ hosts: [], count: 0 });
  }, 60_000);

  test('a constructed inventory runs the constructed plugin over its inputs', async () => {
    const res = await t.api.post('/v1/inventories/preview', {
      kind: 'constructed',
      inputs: [a, b],
      source_vars: { strict: false, keyed_groups: [{ key: 'env', prefix: 'env' }], groups: { webby: "inventory_hostname.startswith('web')" } },
    });
    expect([res.status, res.text.slice(0, 300)]).toEqual([200, expect.any(String)]);
    expect(res.body).toMatchObject({ kind: 'constructed', engine: 'ansible-inventory', count: 4 });
    expect([...res.body.groups.env_prod].sort()).toEqual(['cache1', 'db1', 'web1']);
    expect([...res.body.groups.webby].sort()).toEqual(['web1', 'web2']);
  }, 60_000);

  test('what cannot resolve is a 422 with the reason', async () => {
    const missing = await t.api.post('/v1/inventories/preview', { kind: 'smart', inputs: [a, 'inv_gone'], host_filter: 'all' });
    expect([missing.status, missing.body.field, missing.body.error]).toEqual([422, 'inputs[1]', 'inputs[1]: inventory inv_gone not found']);
    const strict = { kind: 'constructed', inputs: [a], source_vars: { strict: true, compose: { x: 'no_such_variable + 1' } } };
    const admin = await t.api.post('/v1/inventories/preview', strict);
    expect(admin.status).toBe(422);
    expect(admin.body.error).toContain('no_such_variable');
    const plugin = await t.api.post('/v1/inventories/preview', { kind: 'constructed', inputs: [a], source_vars: { plugin: 'script' } });
    expect([plugin.status, plugin.body.field]).toEqual([422, 'source_vars.plugin']);
    expect((await t.api.post('/v1/inventories/preview', { kind: 'dynamic', inputs: [a] })).status).toBe(400);
    expect((await t.api.post('/v1/inventories/preview', { kind: 'smart', inputs: [] , host_filter: 'all' })).status).toBe(400);

    // Below admin: inputs need read, and Ansible's reason is not quoted.
    const other = await person(t.api, 'operator');
    const asOther = t.as(other.token);
    const unreadable = await asOther.post('/v1/inventories/preview', { kind: 'smart', inputs: [a], host_filter: 'all' });
    expect([unreadable.status, unreadable.body.field]).toEqual([422, 'inputs[0]']);
    await grant(t.api, a, 'read', { user_id: other.id });
    expect((await asOther.post('/v1/inventories/preview', { kind: 'smart', inputs: [a], host_filter: 'db*' })).body.hosts).toEqual(['db1']);
    const quiet = await asOther.post('/v1/inventories/preview', strict);
    expect(quiet.status).toBe(422);
    expect(quiet.body.error).toBe('the constructed inventory could not be resolved by Ansible (an admin reads the reason)');
  }, 90_000);
});

describe('rerunning a run whose inventory or project is gone', () => {
  test('answers 409 naming the inventory', async () => {
    const inventory = await created(await t.api.post('/v1/inventories', { name: 'for rerun', content: 'localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n' }));
    // A host that fails, so relaunch-failed has a host to run again and reaches the inventory.
    const run = await created(await t.api.post('/v1/runs', { tool: 'ansible', inventory_id: inventory.id, command: '- hosts: all\n  gather_facts: false\n  tasks:\n    - fail: msg=down\n' }));
    expect((await waitForRunEnd(t.api, run.id, 60_000)).status).toBe('failed');
    expect((await t.api.request('DELETE', `/v1/inventories/${inventory.id}`)).status).toBe(204);
    for (const action of ['rerun', 'relaunch-failed']) {
      const res = await t.api.post(`/v1/runs/${run.id}/${action}`);
      expect([action, res.status]).toEqual([action, 409]);
      expect(res.body.error).toContain(`inventory ${inventory.id} no longer exists`);
      expect(res.body.missing).toEqual([{ kind: 'inventory', id: inventory.id }]);
    }
  }, 90_000);

  test('answers 409 naming the project', async () => {
    const project = await created(await t.api.post('/v1/projects', { name: 'for rerun', url: bare }));
    await settledProject(project.id);
    const template = await created(await t.api.post('/v1/templates', { name: 'project rerun', tool: 'bash', command: 'ls site.yml', project_id: project.id }));
    const launched = await created(await t.api.post(`/v1/templates/${template.id}/launch`, {}));
    expect((await waitForRunEnd(t.api, launched.id)).status).toBe('succeeded');
    expect((await t.api.request('DELETE', `/v1/templates/${template.id}`)).status).toBe(204);
    expect((await t.api.request('DELETE', `/v1/projects/${project.id}`)).status).toBe(204);
    const res = await t.api.post(`/v1/runs/${launched.id}/rerun`);
    expect(res.status).toBe(409);
    expect(res.body.error).toBe(`run ${launched.id} cannot run again: its project ${project.id} no longer exists`);
    expect(res.body.missing).toEqual([{ kind: 'project', id: project.id }]);
  }, 60_000);
});
