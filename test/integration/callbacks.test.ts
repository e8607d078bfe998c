import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync } from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import { Faults } from '../../services/context';
import { connectDatabase, type Sql } from '../../store/db';
import { testLicense } from '../support/license';
import { startTestServer, waitForRun, waitForRunEnd, type TestServer } from '../support/server';
import { tempDir } from '../support/temp';

/**
 * Provisioning callbacks end to end (spec part A 1.1, 2.3, 4.6; part B 7.5): hosts call from
 * chosen loopback addresses (the client socket bound to 127.0.0.x), with no token, and every
 * status of part B 7.5 is answered as the table says.
 */

const RATE_LIMIT = 10;
const encryption = () => ({
  SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
  SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
});

let t: TestServer;
let sql: Sql;
let inventoryId: string;

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: any;
  text: string;
}

/** A POST from `address` (bound as the socket's local address), JSON or form-encoded, with no token. */
function call(address: string, path: string, body: Record<string, unknown> | string, options: { form?: boolean; method?: string } = {}): Promise<Answer> {
  const url = new URL(t.url);
  const payload = typeof body === 'string' ? body : options.form ? new URLSearchParams(body as Record<string, string>).toString() : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        path,
        method: options.method ?? 'POST',
        localAddress: address,
        headers: { 'content-type': options.form ? 'application/x-www-form-urlencoded' : 'application/json', 'content-length': Buffer.byteLength(payload) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown;
          try {
            parsed = text ? JSON.parse(text) : undefined;
          } catch {
            parsed = undefined;
          }
          resolve({ status: res.statusCode!, headers: res.headers, body: parsed, text });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** A template with callbacks on, over the test inventory, with a minted key. */
async function callbackTemplate(name: string, extra: Record<string, unknown> = {}, inventory: string | null = inventoryId): Promise<{ id: string; key: string }> {
  const body = { name, tool: 'bash', command: 'echo callback for $CAIRN_RUN_ID', allow_callbacks: true, ...extra };
  const created = await t.api.post('/v1/templates', inventory ? { ...body, inventory_id: inventory } : body);
  if (created.status !== 201) throw new Error(`template create: ${created.status} ${created.text}`);
  const minted = await t.api.post(`/v1/templates/${created.body.id}/callback-key`, {});
  if (minted.status !== 200) throw new Error(`key mint: ${minted.status} ${minted.text}`);
  return { id: created.body.id, key: minted.body.host_config_key };
}

let emptyRepository: string;

beforeAll(async () => {
  // Team: deny policies are a licensed feature.
  const license = await testLicense('team');
  const repositories = tempDir('cairn-callback-git');
  chmodSync(repositories, 0o755);
  emptyRepository = path.join(repositories, 'empty.git');
  execFileSync('git', ['init', '-q', '--bare', emptyRepository]);
  t = await startTestServer(
    { ...encryption(), CAIRN_CALLBACK_RATE_LIMIT: String(RATE_LIMIT), CAIRN_LICENSE_FILE: license.file, CAIRN_PROJECT_LOCAL_ROOTS: repositories },
    { faults: new Faults(['callback-record-once']), licenseKeys: [license.publicJwk] },
  );
  sql = connectDatabase(t.databaseUrl, { max: 3 });
  const inventory = await t.api.post('/v1/inventories', {
    name: 'fleet',
    content: '[web]\n127.0.0.2\n127.0.0.3\n127.0.0.4\n127.0.0.5\n127.0.0.6\n127.0.0.7\n127.0.0.8\n127.0.0.11\n127.0.0.12\n127.0.0.13\n127.0.0.14\n127.0.0.15\n127.0.0.16\n[db]\n127.0.0.10\n',
  });
  if (inventory.status !== 201) throw new Error(`inventory: ${inventory.status} ${inventory.text}`);
  inventoryId = inventory.body.id;
});
afterAll(async () => {
  await sql?.end();
  await t?.stop();
});

test('503: a callback that could not be recorded launches nothing, and the claim is given back', async () => {
  const template = await callbackTemplate('recorded');
  const refused = await call('127.0.0.8', `/v1/templates/${template.id}/callback`, { host_config_key: template.key });
  expect(refused.status).toBe(503);
  expect(refused.body.error).toMatch(/nothing was launched/);
  expect((await sql`SELECT count(*)::int AS n FROM runs WHERE template_id = ${template.id}`)[0].n).toBe(0);
  const next = await call('127.0.0.8', `/v1/templates/${template.id}/callback`, { host_config_key: template.key });
  expect(next.status).toBe(201);
  await waitForRunEnd(t.api, next.body.run_id);
});

test('201: the calling host launches the template limited to itself, by JSON or form; the key is shown once and never stored in clear', async () => {
  const template = await callbackTemplate('provision');
  const view = await t.api.get(`/v1/templates/${template.id}`);
  expect(view.body).toMatchObject({ allow_callbacks: true, callback_limit: 'intersect', external_callback: false });
  expect(JSON.stringify(view.body)).not.toContain(template.key);

  const json = await call('127.0.0.2', `/v1/templates/${template.id}/callback`, { host_config_key: template.key });
  expect(json.status).toBe(201);
  expect(json.headers.location).toBe(`/v1/runs/${json.body.run_id}`);
  expect(json.body).toMatchObject({ host: '127.0.0.2', template_id: template.id });
  const run = await waitForRunEnd(t.api, json.body.run_id);
  expect(run).toMatchObject({ status: 'succeeded', source: { kind: 'callback', id: template.id }, template_id: template.id });
  const [stored] = await sql`SELECT spec->>'limit' AS "limit" FROM runs WHERE id = ${json.body.run_id}`;
  expect(stored.limit).toBe('127.0.0.2');

  const form = await call('127.0.0.3', `/v1/templates/${template.id}/callback`, { host_config_key: template.key }, { form: true });
  expect(form.status).toBe(201);
  expect(form.body.host).toBe('127.0.0.3');
  await waitForRunEnd(t.api, form.body.run_id);

  // Never in clear at rest, nor in the chain.
  const [key] = await sql`SELECT key_sealed FROM callback_keys WHERE template_id = ${template.id}`;
  expect(key.key_sealed).not.toContain(template.key);
  const [{ n }] = await sql`SELECT count(*)::int AS n FROM audit_entries WHERE body::text LIKE ${'%' + template.key + '%'}`.catch(() => [{ n: 0 }]);
  expect(n).toBe(0);
});

test('201 held: an approval policy holds a callback run like any launch', async () => {
  const policy = await t.api.post('/v1/policies', { name: 'hold callbacks', effect: 'require_approval', command_contains: 'hold-this-callback' });
  expect(policy.status).toBe(201);
  const template = await callbackTemplate('held', { command: 'echo hold-this-callback' });
  const answer = await call('127.0.0.5', `/v1/templates/${template.id}/callback`, { host_config_key: template.key });
  expect(answer.status).toBe(201);
  expect(answer.body.status).toBe('held');
  // Held counts as not ended: the same host is refused until it ends.
  expect((await call('127.0.0.5', `/v1/templates/${template.id}/callback`, { host_config_key: template.key })).status).toBe(409);
  expect((await t.api.post(`/v1/runs/${answer.body.run_id}/cancel`, {})).status).toBeLessThan(300);
  await waitForRunEnd(t.api, answer.body.run_id);
  expect((await t.api.request('DELETE', `/v1/policies/${policy.body.id}`)).status).toBe(204);
});

test('400: no host at the address, extra_vars in the body, a missing key, a survey nobody can answer', async () => {
  const template = await callbackTemplate('four hundred');
  const path = `/v1/templates/${template.id}/callback`;
  const nobody = await call('127.0.0.50', path, { host_config_key: template.key });
  expect(nobody.status).toBe(400);
  expect(nobody.body.error).toContain('127.0.0.50');
  const vars = await call('127.0.0.2', path, { host_config_key: template.key, extra_vars: { a: 1 } });
  expect([vars.status, vars.body.field]).toEqual([400, 'extra_vars']);
  const varsForm = await call('127.0.0.2', path, { host_config_key: template.key, extra_vars: 'a=1' }, { form: true });
  expect([varsForm.status, varsForm.body.field]).toEqual([400, 'extra_vars']);
  const missing = await call('127.0.0.2', path, {});
  expect([missing.status, missing.body.field]).toEqual([400, 'host_config_key']);

  const surveyed = await callbackTemplate('surveyed', { survey: [{ var: 'size', type: 'text', required: true }] });
  const survey = await call('127.0.0.2', `/v1/templates/${surveyed.id}/callback`, { host_config_key: surveyed.key });
  expect(survey.status).toBe(400);
  expect(survey.body.questions).toEqual(['size']);
  expect((await sql`SELECT count(*)::int AS n FROM runs WHERE template_id = ${surveyed.id}`)[0].n).toBe(0);
});

test('a host named otherwise is matched by its ansible_host or ansible_ssh_host, its own or its group\'s (INI and YAML); two hosts at one address are refused (400)', async () => {
  const ini = await t.api.post('/v1/inventories', {
    name: 'named hosts',
    content:
      '[web]\nweb1 ansible_host=127.0.0.21 ansible_connection=local\nweb2 ansible_ssh_host="127.0.0.22"\n' +
      '[twins]\ntwin-a ansible_host=127.0.0.24\ntwin-b ansible_host=127.0.0.24 # the same machine twice\n',
  });
  expect(ini.status).toBe(201);
  const template = await callbackTemplate('by address', {}, ini.body.id);
  const path = `/v1/templates/${template.id}/callback`;
  const web1 = await call('127.0.0.21', path, { host_config_key: template.key });
  expect(web1.status).toBe(201);
  expect(web1.body.host).toBe('web1');
  const [stored] = await sql`SELECT spec->>'limit' AS "limit" FROM runs WHERE id = ${web1.body.run_id}`;
  expect(stored.limit).toBe('web1');
  const web2 = await call('127.0.0.22', path, { host_config_key: template.key });
  expect([web2.status, web2.body.host]).toEqual([201, 'web2']);
  const twins = await call('127.0.0.24', path, { host_config_key: template.key });
  expect(twins.status).toBe(400);
  expect(twins.body).toMatchObject({ matched: 2, address: '127.0.0.24' });
  expect(twins.body.error).toContain('exactly one');
  expect((await sql`SELECT count(*)::int AS n FROM runs WHERE template_id = ${template.id}`)[0].n).toBe(2);

  const yaml = await t.api.post('/v1/inventories', {
    name: 'named hosts yaml',
    content:
      'all:\n  children:\n    app:\n      hosts:\n        app1:\n          ansible_host: 127.0.0.23\n        app2: { ansible_host: 127.0.0.25 }\n' +
      '    other:\n      hosts:\n        app3:\n          ansible_ssh_host: 127.0.0.25\n' +
      '    cache:\n      vars:\n        ansible_host: 127.0.0.26\n      hosts:\n        cache1:\n',
  });
  expect([yaml.status, yaml.body.format, yaml.body.host_count]).toEqual([201, 'yaml', 4]);
  const fromYaml = await callbackTemplate('by address yaml', {}, yaml.body.id);
  const app1 = await call('127.0.0.23', `/v1/templates/${fromYaml.id}/callback`, { host_config_key: fromYaml.key });
  expect([app1.status, app1.body.host]).toEqual([201, 'app1']);
  const shared = await call('127.0.0.25', `/v1/templates/${fromYaml.id}/callback`, { host_config_key: fromYaml.key });
  expect([shared.status, shared.body.matched]).toEqual([400, 2]);
  // Only its group's vars set this host's ansible_host.
  const cache1 = await call('127.0.0.26', `/v1/templates/${fromYaml.id}/callback`, { host_config_key: fromYaml.key });
  expect([cache1.status, cache1.body.host]).toEqual([201, 'cache1']);
  for (const id of [web1.body.run_id, web2.body.run_id, app1.body.run_id, cache1.body.run_id]) await waitForRunEnd(t.api, id);
});

test('409: a host whose inventory name begins with @ launches nothing, since Ansible would read its limit as a file', async () => {
  const inventory = await t.api.post('/v1/inventories', {
    name: 'a host named like a file',
    content: 'all:\n  hosts:\n    "@/etc/hostname":\n      ansible_host: 127.0.0.27\n',
  });
  expect([inventory.status, inventory.body.host_count]).toEqual([201, 1]);
  const template = await callbackTemplate('file-named host', { callback_limit: 'replace' }, inventory.body.id);
  const answer = await call('127.0.0.27', `/v1/templates/${template.id}/callback`, { host_config_key: template.key });
  expect(answer.status).toBe(409);
  expect(answer.body).toEqual({
    error: 'this template cannot launch: limit must not hold an element beginning with @, which Ansible reads as a file of host names; name the hosts or groups',
    field: 'limit',
  });
  expect((await sql`SELECT count(*)::int AS n FROM runs WHERE template_id = ${template.id}`)[0].n).toBe(0);
});

test('403: a wrong, rotated or revoked key; callbacks off; a deny rule; an unknown template', async () => {
  const template = await callbackTemplate('keys');
  const path = `/v1/templates/${template.id}/callback`;
  expect((await call('127.0.0.6', path, { host_config_key: 'not-the-key' })).status).toBe(403);
  expect((await call('127.0.0.6', `/v1/templates/tpl_nosuch/callback`, { host_config_key: template.key })).status).toBe(403);

  const rotated = await t.api.post(`/v1/templates/${template.id}/callback-key`, {});
  expect(rotated.status).toBe(200);
  expect(rotated.body).toMatchObject({ callback_path: path, template: { id: template.id } });
  expect(rotated.body.host_config_key).not.toBe(template.key);
  expect((await call('127.0.0.6', path, { host_config_key: template.key })).status).toBe(403);

  expect((await t.api.request('DELETE', `/v1/templates/${template.id}/callback-key`)).status).toBe(204);
  expect((await call('127.0.0.6', path, { host_config_key: rotated.body.host_config_key })).status).toBe(403);
  expect((await t.api.request('DELETE', `/v1/templates/${template.id}/callback-key`)).status).toBe(404);

  // Turning allow_callbacks off refuses callbacks and revokes the key; omitted on update means unchanged.
  const other = await callbackTemplate('switched');
  const current = (await t.api.get(`/v1/templates/${other.id}`)).body;
  const { allow_callbacks: _a, callback_limit: _l, ...withoutCallbackFields } = current;
  expect((await t.api.request('PUT', `/v1/templates/${other.id}`, { body: withoutCallbackFields })).body.allow_callbacks).toBe(true);
  expect((await t.api.request('PUT', `/v1/templates/${other.id}`, { body: { ...current, allow_callbacks: false } })).body.allow_callbacks).toBe(false);
  const off = await call('127.0.0.7', `/v1/templates/${other.id}/callback`, { host_config_key: other.key });
  expect(off.status).toBe(403);
  expect(off.body.error).toMatch(/does not accept callbacks/);
  expect((await sql`SELECT count(*)::int AS n FROM callback_keys WHERE template_id = ${other.id}`)[0].n).toBe(0);
  expect((await t.api.post(`/v1/templates/${other.id}/callback-key`, {})).status).toBe(409);

  const policy = await t.api.post('/v1/policies', { name: 'deny callbacks', effect: 'deny', command_contains: 'deny-this-callback' });
  const denied = await callbackTemplate('denied', { command: 'echo deny-this-callback' });
  expect(policy.status).toBe(201);
  const deny = await call('127.0.0.12', `/v1/templates/${denied.id}/callback`, { host_config_key: denied.key });
  expect(deny.status).toBe(403);
  expect(deny.body.error).toMatch(/deny policy/);
  expect((await t.api.request('DELETE', `/v1/policies/${policy.body.id}`)).status).toBe(204);
  // A deny leaves the host free to call again.
  expect((await sql`SELECT count(*)::int AS n FROM callback_claims WHERE template_id = ${denied.id}`)[0].n).toBe(0);
});

test('409: a callback run for the host still running; a template that cannot launch from a callback', async () => {
  const slow = await callbackTemplate('slow', { command: 'sleep 30' });
  const path = `/v1/templates/${slow.id}/callback`;
  const first = await call('127.0.0.4', path, { host_config_key: slow.key });
  expect(first.status).toBe(201);
  await waitForRun(t.api, first.body.run_id, (r) => r.status === 'running');
  const busy = await call('127.0.0.4', path, { host_config_key: slow.key });
  expect(busy.status).toBe(409);
  expect(busy.body).toMatchObject({ host: '127.0.0.4', run_id: first.body.run_id });
  // Another host of the same template is not held up.
  const other = await call('127.0.0.3', path, { host_config_key: slow.key });
  expect(other.status).toBe(201);
  for (const id of [first.body.run_id, other.body.run_id]) {
    await t.api.post(`/v1/runs/${id}/cancel`, {});
    await waitForRunEnd(t.api, id);
  }
  expect((await call('127.0.0.4', path, { host_config_key: slow.key })).status).toBe(201);

  const noInventory = await callbackTemplate('no inventory', {}, null);
  const none = await call('127.0.0.11', `/v1/templates/${noInventory.id}/callback`, { host_config_key: noInventory.key });
  expect(none.status).toBe(409);
  expect(none.body.error).toMatch(/no stored inventory/);

  // A project with no checkout (its repository has no commit to fetch): named, not quoted.
  const project = await t.api.post('/v1/projects', { name: 'nowhere', url: emptyRepository });
  expect(project.status).toBe(201);
  const projected = await callbackTemplate('projected', { project_id: project.body.id });
  const unusable = await call('127.0.0.11', `/v1/templates/${projected.id}/callback`, { host_config_key: projected.key });
  expect(unusable.status).toBe(409);
  expect(unusable.body.error).toMatch(/^this template cannot launch: /);
  expect(unusable.body.error).toContain(project.body.id);

  // The inventory deleted under the template.
  const temporary = await t.api.post('/v1/inventories', { name: 'temporary', content: '127.0.0.6\n' });
  const orphan = await callbackTemplate('orphan', {}, temporary.body.id);
  // The inventory goes while the template still names it, as a delete racing the template's save would leave it.
  await sql`UPDATE templates SET inventory_id = NULL WHERE id = ${orphan.id}`;
  const deleted = await t.api.request('DELETE', `/v1/inventories/${temporary.body.id}`);
  expect(deleted.status).toBe(204);
  await sql`UPDATE templates SET inventory_id = ${temporary.body.id} WHERE id = ${orphan.id}`;
  const gone = await call('127.0.0.13', `/v1/templates/${orphan.id}/callback`, { host_config_key: orphan.key });
  expect(gone.status).toBe(409);
  expect(gone.body.error).toBe('this template cannot launch: inventory not found');
});

test('a limit the template keeps: intersect refuses a host outside it (403) and keeps the limit on the run; replace launches for any matched host', async () => {
  const ansible = { tool: 'ansible', command: undefined, playbook: 'site.yml' };
  const outside = await callbackTemplate('limited', { ...ansible, limit: '127.0.0.2,127.0.0.4' });
  expect((await t.api.get(`/v1/templates/${outside.id}`)).body.limit).toBe('127.0.0.2,127.0.0.4');
  const refused = await call('127.0.0.15', `/v1/templates/${outside.id}/callback`, { host_config_key: outside.key });
  expect(refused.status).toBe(403);
  expect(refused.body.error).toContain('outside the limit');

  // No host or group of the inventory is named so: Ansible selects nothing, and so is the host refused.
  const grouped = await callbackTemplate('grouped', { ...ansible, limit: 'webservers' });
  const unknown = await call('127.0.0.16', `/v1/templates/${grouped.id}/callback`, { host_config_key: grouped.key });
  expect(unknown.status).toBe(403);

  const replaced = await callbackTemplate('replaced', { ...ansible, limit: 'webservers', callback_limit: 'replace' });
  const launched = await call('127.0.0.16', `/v1/templates/${replaced.id}/callback`, { host_config_key: replaced.key });
  expect(launched.status).toBe(201);
  const [stored] = await sql`SELECT spec->>'limit' AS "limit" FROM runs WHERE id = ${launched.body.run_id}`;
  expect(stored.limit).toBe('127.0.0.16');
  await waitForRunEnd(t.api, launched.body.run_id);
});

test("a template's limit is read over the inventory's groups as Ansible reads it: all:!web* refuses a webserver, web* admits it; a regular expression is asked of Ansible", async () => {
  const inventory = await t.api.post('/v1/inventories', {
    name: 'grouped fleet',
    content: '[webservers]\n127.0.0.30\n127.0.0.31\n[dbservers]\n127.0.0.32\n[prod:children]\nwebservers\ndbservers\n',
  });
  expect(inventory.status).toBe(201);
  const ansible = { tool: 'ansible', command: undefined, playbook: 'site.yml' };
  const storedLimit = async (runId: string) => (await sql`SELECT spec->>'limit' AS "limit" FROM runs WHERE id = ${runId}`)[0].limit;

  const notWeb = await callbackTemplate('not web', { ...ansible, limit: 'all:!web*' }, inventory.body.id);
  const webserver = await call('127.0.0.30', `/v1/templates/${notWeb.id}/callback`, { host_config_key: notWeb.key });
  expect([webserver.status, webserver.body.error]).toEqual([403, 'host 127.0.0.30 is outside the limit this template keeps']);
  const database = await call('127.0.0.32', `/v1/templates/${notWeb.id}/callback`, { host_config_key: notWeb.key });
  expect(database.status).toBe(201);
  // The run keeps the template's limit, intersected with the calling host.
  expect(await storedLimit(database.body.run_id)).toBe('all,!web*,&127.0.0.32');
  await waitForRunEnd(t.api, database.body.run_id);

  const web = await callbackTemplate('web', { ...ansible, limit: 'web*' }, inventory.body.id);
  const admitted = await call('127.0.0.31', `/v1/templates/${web.id}/callback`, { host_config_key: web.key });
  expect(admitted.status).toBe(201);
  expect(await storedLimit(admitted.body.run_id)).toBe('web*,&127.0.0.31');
  await waitForRunEnd(t.api, admitted.body.run_id);
  expect((await call('127.0.0.32', `/v1/templates/${web.id}/callback`, { host_config_key: web.key })).status).toBe(403);

  const prodNotDb = await callbackTemplate('prod not db', { ...ansible, limit: 'prod:!dbservers' }, inventory.body.id);
  expect((await call('127.0.0.32', `/v1/templates/${prodNotDb.id}/callback`, { host_config_key: prodNotDb.key })).status).toBe(403);

  // A regular expression is Python's: evaluated by `ansible --list-hosts` in the sandbox.
  const byRegex = await callbackTemplate('by regex', { ...ansible, limit: '~127\\.0\\.0\\.3[01]$' }, inventory.body.id);
  const regexOutside = await call('127.0.0.32', `/v1/templates/${byRegex.id}/callback`, { host_config_key: byRegex.key });
  expect(regexOutside.status).toBe(403);
  const regexInside = await call('127.0.0.30', `/v1/templates/${byRegex.id}/callback`, { host_config_key: byRegex.key });
  expect(regexInside.status).toBe(201);
  await waitForRunEnd(t.api, regexInside.body.run_id);
});

test('the external-compatible address: with and without the slash, off answers as a wrong key, 410 once deleted; nothing else under /api/', async () => {
  const template = await callbackTemplate('imported');
  // An import binds the external id; the address may then be turned on.
  const before = (await t.api.get(`/v1/templates/${template.id}`)).body;
  const refused = await t.api.request('PUT', `/v1/templates/${template.id}`, { body: { ...before, external_callback: true } });
  expect([refused.status, refused.body.field]).toEqual([400, 'external_callback']);
  await sql`UPDATE templates SET external_job_template_id = '42' WHERE id = ${template.id}`;
  const path = '/api/v2/job_templates/42/callback/';
  expect((await call('127.0.0.14', path, { host_config_key: template.key })).status).toBe(403);
  const { external_job_template_id: _e, external_callback_called_at: _c, ...sendable } = (await t.api.get(`/v1/templates/${template.id}`)).body;
  const on = await t.api.request('PUT', `/v1/templates/${template.id}`, { body: { ...sendable, external_callback: true } });
  expect(on.status).toBe(200);
  expect(on.body.external_callback).toBe(true);

  const slash = await call('127.0.0.14', path, { host_config_key: template.key }, { form: true });
  expect(slash.status).toBe(201);
  await waitForRunEnd(t.api, slash.body.run_id);
  expect((await t.api.get(`/v1/templates/${template.id}`)).body.external_callback_called_at).not.toBeNull();
  const bare = await call('127.0.0.14', '/api/v2/job_templates/42/callback', { host_config_key: template.key });
  expect(bare.status).toBe(201);
  await waitForRunEnd(t.api, bare.body.run_id);
  expect((await call('127.0.0.14', '/api/v2/job_templates/7777/callback/', { host_config_key: template.key })).status).toBe(403);
  expect((await call('127.0.0.14', path, { host_config_key: 'wrong' })).status).toBe(403);
  expect((await call('127.0.0.14', path, '', { method: 'GET' })).status).toBe(405);
  expect((await call('127.0.0.14', '/api/v2/job_templates/', '', { method: 'GET' })).status).toBe(404);
  expect((await call('127.0.0.14', '/api/v2/ping/', {})).status).toBe(404);

  expect((await t.api.request('DELETE', `/v1/templates/${template.id}`)).status).toBe(204);
  const gone = await call('127.0.0.14', path, { host_config_key: template.key });
  expect(gone.status).toBe(410);
});

test('429: too many callbacks from one address in a minute, naming the limit and its flag, with Retry-After', async () => {
  const template = await callbackTemplate('noisy');
  const path = `/v1/templates/${template.id}/callback`;
  for (let i = 0; i < RATE_LIMIT; i++) expect((await call('127.0.0.99', path, { host_config_key: 'guess' })).status).toBe(403);
  const limited = await call('127.0.0.99', path, { host_config_key: template.key });
  expect(limited.status).toBe(429);
  expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
  expect(limited.body).toMatchObject({ flag: '--callback-rate-limit', limit: RATE_LIMIT });
  expect(limited.body.error).toContain('--callback-rate-limit');
  // Another address is counted on its own.
  expect((await call('127.0.0.98', path, { host_config_key: 'guess' })).status).toBe(403);
});

test('minting a key without the encryption key is 409 naming SERVICE_ENCRYPTION_KEY and SERVICE_ENCRYPTION_SALT', async () => {
  const bare = await startTestServer();
  try {
    const created = await bare.api.post('/v1/templates', { name: 'no key', tool: 'bash', command: 'true', allow_callbacks: true });
    expect(created.status).toBe(201);
    const minted = await bare.api.post(`/v1/templates/${created.body.id}/callback-key`, {});
    expect(minted.status).toBe(409);
    expect(minted.body.error).toContain('SERVICE_ENCRYPTION_KEY');
    expect(minted.body.error).toContain('SERVICE_ENCRYPTION_SALT');
  } finally {
    await bare.stop();
  }
});
