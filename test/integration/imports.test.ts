import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { person } from '../support/access';
import { startTestServer, type TestServer } from '../support/server';
import { tempDir } from '../support/temp';

/**
 * Imports (spec part A 4.14, 2.3, 2.9 rule 5, 2.11 rule 5; part B 8): the AWX export and the
 * Semaphore backup fixtures (test/fixtures/imports/) previewed, applied, read back through the
 * API, re-imported; the AWX-compatible callback address answering for an imported job template;
 * a malformed or half-bad export refused with nothing written; who may import.
 */

let t: TestServer;
/** A local repository standing in for the ones the exports name: the test machine has no network. */
let repository: string;

/** A fixture, its repository addresses pointed at the local repository (the only change made to it). */
function fixture(name: string): any {
  const text = readFileSync(path.join(__dirname, '../fixtures/imports', name), 'utf8');
  return JSON.parse(text.replace(/"(https:\/\/github\.com\/[^"]+|git@github\.com:[^"]+)"/g, JSON.stringify(repository)));
}

beforeAll(async () => {
  const root = tempDir('cairn-import-git');
  chmodSync(root, 0o755);
  repository = path.join(root, 'site.git');
  const work = path.join(root, 'work');
  const env = { PATH: process.env.PATH, HOME: root, GIT_CONFIG_NOSYSTEM: '1', GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@e', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@e' };
  const git = (...args: string[]) => execFileSync('git', args, { cwd: work, env });
  execFileSync('git', ['init', '-q', '--bare', '-b', 'main', repository]);
  mkdirSync(work);
  git('init', '-q', '-b', 'main');
  writeFileSync(path.join(work, 'deploy.yml'), '- hosts: all\n  gather_facts: false\n  tasks: []\n');
  writeFileSync(path.join(work, 'provision.yml'), '- hosts: all\n  gather_facts: false\n  tasks:\n    - debug: { msg: provisioned }\n');
  git('add', '-A');
  git('commit', '-q', '-m', 'playbooks');
  git('push', '-q', repository, 'HEAD:main');
  t = await startTestServer({
    CAIRN_PROJECT_LOCAL_ROOTS: root,
    SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
    SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
  });
}, 60_000);
afterAll(() => t?.stop());

/** Fails naming the answer's text when the status is not the one expected. */
function answered(res: { status: number; text: string }, status: number): void {
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${res.text}`);
}
/** The project once its latest update has ended. */
async function settledProject(id: string): Promise<any> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const { body } = await t.api.get(`/v1/projects/${id}`);
    if ((body.status === 'successful' || body.status === 'failed') && !body.update_pending) return body;
    if (Date.now() > deadline) throw new Error(`project ${id} did not update: ${JSON.stringify(body)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
const names = async (list: string, key: string) => ((await t.api.get(`/v1/${list}?limit=200`)).body[key] as { name: string }[]).map((o) => o.name);
const byName = async (list: string, key: string, name: string) => ((await t.api.get(`/v1/${list}?limit=200`)).body[key] as any[]).find((o) => o.name === name);

// The server runs in this process: curl is waited for without blocking it.
const execFileAsync = promisify(execFile);

test('a viewer or an operator may not import; an unknown format is refused naming the supported ones', async () => {
  for (const role of ['viewer', 'operator'] as const) {
    const who = await person(t.api, role);
    expect((await t.api.post('/v1/import/tmplauto', fixture('awx-export.json'), who.token)).status).toBe(403);
  }
  const unknown = await t.api.post('/v1/import/awx', {});
  expect([unknown.status, unknown.body.field, unknown.body.supported]).toEqual([400, 'format', ['tmplauto', 'projrunner', 'cookbook', 'manifest', 'jobsched', 'ciserver']]);
  const cron = await t.api.request('POST', '/v1/import/cron', { rawBody: '@daily echo hi\n', headers: { 'content-type': 'text/plain' } });
  expect([cron.status, cron.body.field, cron.body.error]).toEqual([400, 'format', expect.stringContaining('only from the command line, with cairn import cron')]);
  const badQuery = await t.api.post('/v1/import/tmplauto?apply=yes', {});
  expect([badQuery.status, badQuery.body.field]).toEqual([400, 'apply']);
  // A format read from JSON refuses a body that is not, before reading anything.
  const xml = await t.api.request('POST', '/v1/import/tmplauto', { rawBody: '<?xml version="1.1" encoding="UTF-8"?><project><builders/></project>', headers: { 'content-type': 'application/xml' } });
  expect(xml.status).toBe(400);
  // A fleet format takes no inventory parameter; only a fleet format takes a name.
  expect((await t.api.post('/v1/import/cookbook?inventory=inv_1', fixture('chef-nodes.json'))).body.field).toBe('inventory');
  expect((await t.api.post('/v1/import/tmplauto?name=x', fixture('awx-export.json'))).body.field).toBe('name');
});

test('AWX export: a preview writes nothing; apply creates every object once, each with its chain entry; a re-import skips them', async () => {
  const preview = await t.api.post('/v1/import/tmplauto', fixture('awx-export.json'));
  answered(preview, 200);
  expect(preview.body.applied).toBe(false);
  const planned = preview.body.created.map((o: any) => `${o.kind}:${o.name}`);
  expect(planned).toEqual([
    'credential:Deploy SSH',
    'credential:GitHub read-only',
    'project:site-playbooks',
    'inventory:Production web',
    'notification_target:Ops Slack',
    'notification_target:On-call mail',
    'template:Deploy web',
    'template:Provision host',
    'template:Migrate database',
    'template:Release train',
    'schedule:Nightly deploy',
    'schedule:Friday release',
  ]);
  const reasons = Object.fromEntries(preview.body.skipped.map((s: any) => [s.name, s.reason]));
  expect(reasons['Insights']).toContain('custom credential type');
  expect(reasons['scratch']).toContain('manual project');
  expect(reasons['All Linux (smart)']).toContain('smart');
  expect(reasons['IRC bot']).toContain('irc');
  expect(preview.body.created.some((o: any) => 'id' in o)).toBe(false);
  expect(await names('templates', 'templates')).not.toContain('Deploy web');

  const auditBefore = (await t.api.get('/v1/audit?limit=1')).body.total;
  const applied = await t.api.post('/v1/import/tmplauto?apply=true', fixture('awx-export.json'));
  answered(applied, 201);
  expect(applied.body.created.map((o: any) => `${o.kind}:${o.name}`)).toEqual(planned);
  // One chain entry per object created and per attachment made (three), each under the import's path.
  const audit = (await t.api.get(`/v1/audit?limit=100&order=desc`)).body;
  expect(audit.total - auditBefore).toBe(planned.length + 3);
  expect(audit.entries.slice(0, planned.length + 3).every((e: any) => e.path === '/v1/import/tmplauto')).toBe(true);

  const id = (kind: string, name: string) => applied.body.created.find((o: any) => o.kind === kind && o.name === name).id;
  // A job template: its playbook, controls, inventory, project, credential, survey and external id.
  const deploy = (await t.api.get(`/v1/templates/${id('template', 'Deploy web')}`)).body;
  expect(deploy).toMatchObject({
    tool: 'ansible',
    playbook: 'deploy.yml',
    limit: 'webservers',
    tags: ['deploy', 'restart'],
    skip_tags: ['debug'],
    forks: 10,
    timeout: 1800,
    extra_vars: { release_channel: 'stable', serial: 2 },
    inventory_id: id('inventory', 'Production web'),
    project_id: id('project', 'site-playbooks'),
    credentials: [id('credential', 'Deploy SSH')],
    external_job_template_id: '7',
  });
  expect(deploy.survey.map((f: any) => [f.var, f.type])).toEqual([
    ['release', 'text'],
    ['batch', 'int'],
    ['target_env', 'choice'],
    ['vault_pass', 'secret'],
  ]);
  expect(deploy.survey[2].choices).toEqual(['staging', 'production']);
  expect(applied.body.created.find((o: any) => o.name === 'Deploy web').notes.join(' ')).toContain('regions');

  // A workflow: the approval step with its timeout, its deny path, dependencies, step inventories.
  const train = (await t.api.get(`/v1/templates/${id('template', 'Release train')}`)).body;
  const steps = Object.fromEntries(train.steps.map((s: any) => [s.name, s]));
  expect(steps['Change manager sign-off']).toMatchObject({ type: 'approval', approval_timeout: 3600, depends_on: ['Migrate database'], if_denied: 'Migrate database (a1b2c3d4-0004)' });
  expect(steps['Deploy web']).toMatchObject({ tool: 'ansible', playbook: 'deploy.yml', depends_on: ['Change manager sign-off'], inventory_id: id('inventory', 'Production web') });

  // Schedules in their DTSTART's zone; the disabled one stays off.
  const nightly = (await t.api.get(`/v1/schedules/${id('schedule', 'Nightly deploy')}`)).body;
  expect(nightly).toMatchObject({ timezone: 'Europe/Paris', enabled: true, template_id: deploy.id });
  expect((await t.api.get(`/v1/schedules/${id('schedule', 'Friday release')}`)).body).toMatchObject({ timezone: 'America/New_York', enabled: false, template_id: train.id });

  // The inventory's hosts and groups; the disabled host is left out, from its group too.
  const inventory = (await t.api.get(`/v1/inventories/${id('inventory', 'Production web')}`)).body;
  expect(inventory.host_count).toBe(3);
  expect(inventory.content).toContain('"webservers"');
  expect(inventory.content).not.toContain('web3');

  // Credentials and targets wait for their secret; an email target has none to wait for.
  const ssh = (await t.api.get(`/v1/credentials/${id('credential', 'Deploy SSH')}`)).body;
  expect(ssh).toMatchObject({ kind: 'machine', status: 'needs_secret', secrets_set: [], inputs: expect.objectContaining({ username: 'deploy', become_method: 'sudo' }) });
  const slack = (await t.api.get(`/v1/notifications/${id('notification_target', 'Ops Slack')}`)).body;
  expect(slack).toMatchObject({ kind: 'chat_a', needs_secret: true, delivery: expect.objectContaining({ state: 'needs_secret', missing: ['url'] }) });
  expect((await t.api.get(`/v1/notifications/${id('notification_target', 'On-call mail')}`)).body).toMatchObject({ kind: 'email', needs_secret: false });
  // AWX's notification lists became attachments: error as failure, approvals as approval.
  const attachments = async (target: string) => ((await t.api.get(`/v1/notifications/${id('notification_target', target)}/attachments`)).body.attachments as any[]).map((a) => [a.object_id, a.event]);
  expect(await attachments('Ops Slack')).toEqual(expect.arrayContaining([[id('template', 'Deploy web'), 'failure'], [id('template', 'Release train'), 'failure']]));
  expect(await attachments('On-call mail')).toEqual([[id('template', 'Release train'), 'approval']]);
  // The project's first fetch, carried out once the import committed, waits for its credential's secret; once set, a fetch succeeds.
  const projectId = id('project', 'site-playbooks');
  const waiting = await settledProject(projectId);
  expect([waiting.status, waiting.last_error]).toEqual(['failed', expect.stringContaining(id('credential', 'GitHub read-only'))]);
  const scm = (await t.api.get(`/v1/credentials/${id('credential', 'GitHub read-only')}`)).body;
  answered(await t.api.request('PUT', `/v1/credentials/${scm.id}`, { body: { name: scm.name, kind: 'scm', inputs: { username: 'ci-bot', password: 'a-token' } } }), 200);
  const { id: _p, status: _s, commit: _c, last_error: _l, update_pending: _u, last_updated_at: _a, owner_id: _o, created_by: _b, created_at: _ca, updated_at: _ua, ...project } = waiting;
  answered(await t.api.request('PUT', `/v1/projects/${projectId}`, { body: project }), 200);
  expect((await settledProject(projectId)).status).toBe('successful');
  // A launch needing the machine credential, still waiting, is refused naming it.
  const launch = await t.api.post(`/v1/templates/${deploy.id}/launch`, { answers: { release: 'v1', target_env: 'staging' } });
  answered(launch, 409);
  expect(launch.body.error).toContain(ssh.id);

  // A re-import finds every object by its external id and creates nothing.
  const again = await t.api.post('/v1/import/tmplauto?apply=true', fixture('awx-export.json'));
  expect(again.status).toBe(200);
  expect(again.body.created).toEqual([]);
  expect(again.body.skipped.filter((s: any) => s.reason === 'imported before from this source').map((s: any) => s.id)).toEqual(applied.body.created.map((o: any) => o.id));
  expect((await names('templates', 'templates')).filter((n) => n === 'Deploy web')).toHaveLength(1);

  // The AWX-compatible callback address answers for the imported job template's AWX id once a key is minted.
  const provision = id('template', 'Provision host');
  expect((await t.api.get(`/v1/templates/${provision}`)).body).toMatchObject({ external_job_template_id: '12', allow_callbacks: true, external_callback: true });
  const key = (await t.api.post(`/v1/templates/${provision}/callback-key`, {})).body.host_config_key;
  // The request AWX's own request_tower_configuration.sh sends, by curl with its flags, from the
  // host (127.0.0.41); the script reads the status from the first line and succeeds on any 2xx.
  const { stdout: curl } = await execFileAsync('curl', ['-s', '-i', '-X', 'POST', '-H', 'Content-Type:application/json', '--interface', '127.0.0.41', '--data', `{"host_config_key": "${key}"}`, `${t.url}/api/v2/job_templates/12/callback/`]);
  expect(curl.split('\n')[0].split(' ')[1]).toMatch(/^2[0-9]+$/);
  const answer = JSON.parse(curl.slice(curl.indexOf('\r\n\r\n') + 4));
  expect((await t.api.get(`/v1/runs/${answer.run_id}`)).body).toMatchObject({ template_id: provision });
  expect((await callFrom('127.0.0.41', '/api/v2/job_templates/12/callback/', { host_config_key: 'wrong' })).status).toBe(403);
}, 40_000);

test('Semaphore backup: templates with surveys, cron schedules, ini inventories, keys waiting for their secret', async () => {
  const applied = await t.api.post('/v1/import/projrunner?apply=true', fixture('semaphore-backup.json'));
  answered(applied, 201);
  const created = applied.body.created.map((o: any) => `${o.kind}:${o.name}`);
  expect(created).toEqual([
    'credential:Git deploy key',
    'credential:Server root',
    'project:infra',
    'inventory:Production',
    'template:Patch servers',
    'template:Disk report',
    'schedule:Patch servers, cron 0 3 1 * *',
    'schedule:Disk report, cron */30 * * * *',
  ]);
  const reasons = Object.fromEntries(applied.body.skipped.map((s: any) => [s.name, s.reason]));
  expect(reasons['Plan network']).toContain('terraform');
  expect(reasons['local scripts']).toContain('on this server');
  expect(reasons['Terraform state']).toContain('terraform-workspace');
  expect(reasons['Maintenance']).toContain('views');

  const id = (kind: string, name: string) => applied.body.created.find((o: any) => o.kind === kind && o.name === name).id;
  const patch = (await t.api.get(`/v1/templates/${id('template', 'Patch servers')}`)).body;
  expect(patch).toMatchObject({
    tool: 'ansible',
    playbook: 'playbooks/patch.yml',
    inventory_id: id('inventory', 'Production'),
    project_id: id('project', 'infra'),
    credentials: [id('credential', 'Server root')],
    extra_vars: { patch_window: 'sunday', serial: 3 },
  });
  expect(patch.survey).toEqual([
    expect.objectContaining({ var: 'reboot', type: 'choice', label: 'Reboot afterwards', required: true, choices: ['yes', 'no'] }),
    expect.objectContaining({ var: 'max_fail', type: 'int' }),
    expect.objectContaining({ var: 'ticket', type: 'text', required: true }),
    expect.objectContaining({ var: 'smtp_pass', type: 'secret' }),
  ]);
  expect((await t.api.get(`/v1/templates/${id('template', 'Disk report')}`)).body).toMatchObject({ tool: 'bash', command: 'bash "scripts/disk-report.sh"' });
  expect((await t.api.get(`/v1/schedules/${id('schedule', 'Patch servers, cron 0 3 1 * *')}`)).body).toMatchObject({ cron: '0 3 1 * *', template_id: patch.id });
  expect((await t.api.get(`/v1/inventories/${id('inventory', 'Production')}`)).body).toMatchObject({ format: 'ini', host_count: 3 });
  expect((await t.api.get(`/v1/credentials/${id('credential', 'Git deploy key')}`)).body).toMatchObject({ kind: 'scm', status: 'needs_secret' });
  expect((await t.api.get(`/v1/projects/${id('project', 'infra')}`)).body.credential_id).toBe(id('credential', 'Git deploy key'));
});

test('a Chef fleet and a PuppetDB fleet each become one inventory: hosts, role, environment and OS groups; a re-import skips it', async () => {
  const chef = await t.api.post('/v1/import/cookbook?apply=true&name=Chef%20fleet', fixture('chef-nodes.json'));
  answered(chef, 201);
  expect(chef.body.created.map((o: any) => `${o.kind}:${o.name}`)).toEqual(['inventory:Chef fleet']);
  expect(chef.body.skipped).toEqual([expect.objectContaining({ kind: 'environment', name: 'production' })]);
  const chefInventory = (await t.api.get(`/v1/inventories/${chef.body.created[0].id}`)).body;
  expect(chefInventory).toMatchObject({ format: 'yaml', host_count: 4 });
  expect(chefInventory.content).toContain('"role_webserver":\n      vars:\n        {"nginx":{"worker_processes":8,"listen_port":80}}');
  expect(chefInventory.content).toMatch(/"role_base":[\s\S]*children:\n {8}"role_webserver": \{\}\n {8}"role_database": \{\}/);
  const again = await t.api.post('/v1/import/cookbook?apply=true&name=Chef%20fleet', fixture('chef-nodes.json'));
  expect([again.status, again.body.skipped.map((s: any) => s.reason)]).toEqual([200, ["a Chef environment is not part of a fleet's inventory", 'imported before from this source']]);

  const puppet = await t.api.post('/v1/import/manifest?apply=true', fixture('puppetdb-nodes.json'));
  answered(puppet, 201);
  expect(puppet.body.skipped).toEqual([expect.objectContaining({ kind: 'host', name: 'old-app.example.net', reason: expect.stringContaining('deactivated') })]);
  const puppetInventory = (await t.api.get(`/v1/inventories/${puppet.body.created[0].id}`)).body;
  expect(puppetInventory).toMatchObject({ name: 'PuppetDB nodes', host_count: 3 });
  for (const group of ['env_production', 'env_staging', 'os_RedHat', 'os_Debian', 'role_app']) expect(puppetInventory.content).toContain(`"${group}":`);
  expect(puppetInventory.content).toContain('"ansible_host":"10.30.0.12"');
});

test('a malformed export is refused naming the object and field; one object refused late refuses the import and nothing is written', async () => {
  const awx = fixture('awx-export.json');
  delete awx.job_templates[1].playbook;
  const malformed = await t.api.post('/v1/import/tmplauto?apply=true', awx);
  expect([malformed.status, malformed.body.field]).toEqual([400, 'job_templates[1].playbook']);
  expect((await t.api.post('/v1/import/tmplauto', { hello: 'world' })).body.error).toContain('not an awx export');

  // Everything reads well, but the schedule's rule fails the create path's own check after the template was written.
  const late = {
    job_templates: [
      {
        name: 'Half written',
        playbook: 'site.yml',
        natural_key: { name: 'Half written', organization: { name: 'Other', type: 'organization' }, type: 'job_template' },
        related: { schedules: [{ name: 'Broken', rrule: 'DTSTART:20240101T000000Z RRULE:FREQ=NEVERLY', enabled: true }] },
      },
    ],
  };
  const refused = await t.api.post('/v1/import/tmplauto?apply=true', late);
  expect(refused.status).toBe(400);
  expect(refused.body.field).toMatch(/^job_templates\[0\]\.related\.schedules\[0\]/);
  expect(refused.body.error).toContain('Broken');
  expect(await byName('templates', 'templates', 'Half written')).toBeUndefined();

  // NUL in any object is refused before anything is read, naming the field.
  const nul = await t.api.request('POST', '/v1/import/tmplauto?apply=true', { rawBody: '{"job_templates":[{"name":"a\\u0000b"}]}', headers: { 'content-type': 'application/json' } });
  expect(nul.status).toBe(400);
  expect(nul.body.field).toBe('job_templates[0].name');
});

test('an import body over 25 MiB answers 413; one under it is read', async () => {
  const padding = 'x'.repeat(25 * 1024 * 1024);
  const over = await t.api.request('POST', '/v1/import/projrunner', { rawBody: JSON.stringify({ meta: { name: padding }, templates: [] }), headers: { 'content-type': 'application/json' } });
  expect(over.status).toBe(413);
  const under = await t.api.request('POST', '/v1/import/projrunner', { rawBody: JSON.stringify({ meta: { name: 'x'.repeat(2 * 1024 * 1024) }, templates: [] }), headers: { 'content-type': 'application/json' } });
  expect(under.status).toBe(200);
});

/** A POST from `address` (bound as the socket's local address) with no token, as a provisioning host calls. */
function callFrom(address: string, route: string, body: Record<string, unknown>): Promise<{ status: number; body: any }> {
  const url = new URL(t.url);
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: url.hostname, port: url.port, path: route, method: 'POST', localAddress: address, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : undefined });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}
