import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import path from 'node:path';
import { tempDir } from '../support/temp';
import { fillProviderMirror } from '../support/tf-provider';
import { findIacBinary, locateIacBinary, OPENTOFU, TERRAFORM } from '../../embedded/iac-binaries';
import { testLicense } from '../support/license';
import { startTestServer, waitForRun, waitForRunEnd, type TestServer } from '../support/server';
import { git } from '../support/git';
import { FIRST_BUILD_TIMEOUT_MS } from '../support/timeouts';

/**
 * Terraform-style runs against the real OpenTofu binary (built once into the machine cache from
 * its Go module, like the Temporal CLI), and the real Terraform binary where one is at hand, with
 * the built-in terraform_data resource and a real provider from a local filesystem mirror (nothing
 * is downloaded from a registry); modules from a real local HTTP server, one of whose sources never
 * answers; go runs with the machine's Go; the powershell refusal.
 */

let t: TestServer;
let gitRoot: string;
let mirror: string;
/** A module source over HTTP: `/ok/mod.tar.gz` serves a module, `/hang/mod.tar.gz` takes the request and never answers. */
let modules: http.Server;
/** Unset on a machine with no outward IPv4 address (the module case is then not exercised). */
let moduleBase: string | undefined;
const moduleRequests: string[] = [];
/** The module fetch timeout the server is started with: short, so the fetch that hangs is given up within seconds. */
const MODULE_FETCH_TIMEOUT = 4;

beforeAll(async () => {
  // The first build on a machine takes minutes; later runs find it in the cache at once.
  await findIacBinary(OPENTOFU, (line) => process.stderr.write(`${line}\n`));
  gitRoot = tempDir('cairn-iac-git');
  // The run account reads the repositories in its sandbox.
  chmodSync(gitRoot, 0o755);
  // A filesystem mirror holding one real provider, as an operator fills it.
  mirror = tempDir('cairn-iac-mirror');
  await fillProviderMirror(mirror, (line) => process.stderr.write(`${line}\n`));
  // The module server listens on this machine's outward address: a run's isolated network reaches
  // that as it would any outside host, and never the host's loopback.
  const moduleDir = tempDir('cairn-iac-module');
  writeFileSync(path.join(moduleDir, 'main.tf'), 'variable "name" {\n  type = string\n}\nresource "terraform_data" "m" {\n  input = var.name\n}\noutput "greeting" {\n  value = "hello ${var.name}"\n}\n');
  execFileSync('tar', ['-czf', path.join(moduleDir, 'mod.tar.gz'), '-C', moduleDir, 'main.tf']);
  const archive = readFileSync(path.join(moduleDir, 'mod.tar.gz'));
  modules = http.createServer((req, res) => {
    moduleRequests.push(req.url ?? '');
    if (req.url?.startsWith('/ok/mod.tar.gz')) {
      res.writeHead(200, { 'content-type': 'application/gzip', 'content-length': archive.length });
      res.end(archive);
    } else if (!req.url?.startsWith('/hang/')) {
      res.writeHead(404).end();
    }
    // /hang/: the request is taken and never answered.
  });
  const outward = Object.values(networkInterfaces())
    .flat()
    .find((a) => a && a.family === 'IPv4' && !a.internal);
  if (outward) {
    await new Promise<void>((resolve) => modules.listen(0, outward.address, resolve));
    moduleBase = `http://${outward.address}:${(modules.address() as AddressInfo).port}`;
  }
  t = await startTestServer({ CAIRN_PROJECT_LOCAL_ROOTS: gitRoot, CAIRN_IAC_PROVIDER_MIRROR: mirror, CAIRN_MODULE_FETCH_TIMEOUT: `${MODULE_FETCH_TIMEOUT}s` });
}, FIRST_BUILD_TIMEOUT_MS);
afterAll(async () => {
  await t?.stop();
  modules?.closeAllConnections();
  if (modules?.listening) await new Promise((resolve) => modules.close(resolve));
});

const twoResources = `
resource "terraform_data" "db" {
  input = "database"
}
resource "terraform_data" "web" {
  input = "web"
}
`;

async function template(name: string, command: string): Promise<string> {
  const created = await t.api.post('/v1/templates', { name, tool: 'opentofu', command });
  expect(created.status).toBe(201);
  return created.body.id;
}

async function setCommand(id: string, name: string, command: string): Promise<void> {
  const put = await t.api.request('PUT', `/v1/templates/${id}`, { body: { name, tool: 'opentofu', command } });
  expect(put.status).toBe(200);
}

async function launch(id: string, body: Record<string, unknown> = {}): Promise<any> {
  const launched = await t.api.post(`/v1/templates/${id}/launch`, body);
  if (launched.status !== 201) throw new Error(`launch: ${launched.status} ${launched.text}`);
  return launched.body;
}

const logOf = async (runId: string) => (await t.api.get(`/v1/runs/${runId}/logs`)).text;

test('a dry run plans and changes nothing; a real run plans then applies; state persists between runs of a template', async () => {
  const id = await template('two resources', twoResources);
  const dry = await waitForRunEnd(t.api, (await launch(id, { dry_run: true })).id, 120_000);
  expect(dry.status).toBe('succeeded');
  const dryView = (await t.api.get(`/v1/runs/${dry.id}`)).body;
  expect(dryView.plan).toMatchObject({ verdict: 'dry_run', classified: true, totals: { create: 2, update: 0, replace: 0, delete: 0 }, applied_at: null });
  expect(dryView.plan.by_type).toEqual({ terraform_data: { create: 2, update: 0, replace: 0, delete: 0 } });
  expect(dryView.plan.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
  expect(await logOf(dry.id)).toContain('Plan: 2 to add, 0 to change, 0 to destroy');
  expect(await logOf(dry.id)).not.toContain('Apply complete');

  // The dry run changed nothing: a real run still creates both.
  const real = await waitForRunEnd(t.api, (await launch(id)).id, 120_000);
  expect(real.status).toBe('succeeded');
  const realLog = await logOf(real.id);
  expect(realLog).toContain('Plan: 2 to add');
  expect(realLog).toContain('Apply complete! Resources: 2 added, 0 changed, 0 destroyed.');
  const realView = (await t.api.get(`/v1/runs/${real.id}`)).body;
  expect(realView.plan).toMatchObject({ verdict: 'run', kept: false, totals: { create: 2 } });
  expect(realView.plan.applied_at).not.toBeNull();

  // The template's state persists: the next run finds nothing to change.
  const again = await waitForRunEnd(t.api, (await launch(id)).id, 120_000);
  expect(again.status).toBe('succeeded');
  expect(await logOf(again.id)).toContain('No changes.');
  expect((await t.api.get(`/v1/runs/${again.id}`)).body.plan).toMatchObject({ changes: false, totals: { create: 0, delete: 0 } });
}, 300_000);

test('a plan deleting a matched type is held; approval applies exactly the saved plan', async () => {
  const id = await template('held deletes', twoResources);
  expect((await waitForRunEnd(t.api, (await launch(id)).id, 120_000)).status).toBe('succeeded');
  const policy = await t.api.post('/v1/policies', { name: 'no silent deletes', tool: 'opentofu', plan_deletes: ['terraform_data'] });
  expect(policy.status).toBe(201);
  expect(policy.body.plan_deletes).toEqual(['terraform_data']);
  try {
    // Removing `db` from the configuration plans its delete.
    await setCommand(id, 'held deletes', 'resource "terraform_data" "web" {\n  input = "web"\n}\n');
    const launched = await launch(id);
    // Not held at submission: the policy has a plan condition, judged once there is a plan.
    expect(launched.status).toBe('pending');
    const held = await waitForRun(t.api, launched.id, (r) => r.status === 'held', 120_000);
    expect(held.hold.policies).toEqual([policy.body.id]);
    expect(held.hold.plan.digest).toMatch(/^sha256:/);
    expect(held.hold.plan.summary).toContain('1 to delete');
    const view = (await t.api.get(`/v1/runs/${held.id}`)).body;
    expect(view.plan).toMatchObject({ verdict: 'hold', kept: true, totals: { delete: 1 }, digest: held.hold.plan.digest });
    expect(view.plan.resources).toEqual([{ address: 'terraform_data.db', type: 'terraform_data', action: 'delete' }]);
    expect(await logOf(held.id)).not.toContain('Destroy complete');
    const attention = await t.api.get('/v1/attention?blocker=approval_needed');
    const item = JSON.stringify(attention.body);
    expect(item).toContain(held.id);
    expect(item).toContain('at the plan gate (plan: 0 to create, 0 to update, 0 to replace, 1 to delete (deletes terraform_data ×1))');
    expect(item).toContain(`applies exactly its saved plan ${held.hold.plan.digest}`);

    // A decision on another plan is refused; on this one it applies it.
    expect((await t.api.post(`/v1/runs/${held.id}/approve`, { plan_digest: 'sha256:0000' })).status).toBe(409);
    const approved = await t.api.post(`/v1/runs/${held.id}/approve`, { plan_digest: held.hold.plan.digest, reason: 'db is retired' });
    expect(approved.status).toBe(200);
    const done = await waitForRunEnd(t.api, held.id, 120_000);
    expect(done.status).toBe('succeeded');
    const log = await logOf(held.id);
    expect(log).toContain(`applying the saved plan ${held.hold.plan.digest}`);
    expect(log).toContain('Apply complete! Resources: 0 added, 0 changed, 1 destroyed.');
    const after = (await t.api.get(`/v1/runs/${held.id}`)).body.plan;
    expect(after.applied_at).not.toBeNull();
    expect(after.kept).toBe(false);
  } finally {
    await t.api.request('DELETE', `/v1/policies/${policy.body.id}`);
  }
}, 300_000);

test('a rejected plan is not applied', async () => {
  const id = await template('rejected deletes', twoResources);
  expect((await waitForRunEnd(t.api, (await launch(id)).id, 120_000)).status).toBe('succeeded');
  const policy = await t.api.post('/v1/policies', { name: 'any delete', plan_deletes: ['*'] });
  expect(policy.status).toBe(201);
  try {
    // A run without a project and with no configuration is refused naming command.
    const empty = await t.api.post('/v1/runs', { tool: 'opentofu', command: '  ' });
    expect(empty.status).toBe(400);
    expect(empty.body.field).toBe('command');
    await setCommand(id, 'rejected deletes', 'resource "terraform_data" "web" {\n  input = "web"\n}\n');
    const held = await waitForRun(t.api, (await launch(id)).id, (r) => r.status === 'held', 120_000);
    expect((await t.api.post(`/v1/runs/${held.id}/reject`, {})).status).toBe(200);
    const done = await waitForRunEnd(t.api, held.id, 30_000);
    expect(done.status).toBe('rejected');
    // The state still holds db: a plan of the original configuration changes nothing.
    await setCommand(id, 'rejected deletes', twoResources);
    const check = await waitForRunEnd(t.api, (await launch(id, { dry_run: true })).id, 120_000);
    expect((await t.api.get(`/v1/runs/${check.id}`)).body.plan.changes).toBe(false);
  } finally {
    await t.api.request('DELETE', `/v1/policies/${policy.body.id}`);
  }
}, 300_000);

test('a run held at the plan gate can be canceled, and is then no longer waiting', async () => {
  const id = await template('cancel and deny', twoResources);
  expect((await waitForRunEnd(t.api, (await launch(id)).id, 120_000)).status).toBe('succeeded');
  await setCommand(id, 'cancel and deny', 'resource "terraform_data" "web" {\n  input = "web"\n}\n');
  const hold = await t.api.post('/v1/policies', { name: 'hold deletes', plan_deletes: ['*'] });
  expect(hold.status).toBe(201);
  try {
    const held = await waitForRun(t.api, (await launch(id)).id, (r) => r.status === 'held', 120_000);
    const canceled = await t.api.post(`/v1/runs/${held.id}/cancel`, undefined);
    expect([200, 202]).toContain(canceled.status);
    const ended = await waitForRunEnd(t.api, held.id, 30_000);
    expect(ended.status).toBe('canceled');
    expect((await t.api.post(`/v1/runs/${held.id}/approve`, {})).status).toBe(409);
  } finally {
    await t.api.request('DELETE', `/v1/policies/${hold.body.id}`);
  }
}, 300_000);

test('a second concurrent run of a template waits on its state lock', async () => {
  const slow = `
resource "terraform_data" "slow" {
  input = "\${timestamp()}"
  provisioner "local-exec" {
    command = "sleep 3"
  }
}
`;
  const id = await template('locked state', slow);
  const first = await launch(id);
  await waitForRun(t.api, first.id, (r) => r.status === 'running', 60_000);
  const second = await launch(id);
  const [a, b] = await Promise.all([waitForRunEnd(t.api, first.id, 180_000), waitForRunEnd(t.api, second.id, 180_000)]);
  expect(a.status).toBe('succeeded');
  expect(b.status).toBe('succeeded');
  const logs = [await logOf(first.id), await logOf(second.id)];
  // One of them waited for the other's lock (which one got it first is up to the workers).
  expect(logs.filter((l) => l.includes('waiting for the state lock')).length).toBeGreaterThanOrEqual(1);
  const waited = logs.findIndex((l) => l.includes('waiting for the state lock'));
  expect(logs[waited]).toContain('state lock taken');
}, 300_000);

test('a project run plans and applies the configuration in the directory its command names', async () => {
  const bare = path.join(gitRoot, 'infra.git');
  const work = path.join(gitRoot, 'infra');
  execFileSync('git', ['init', '-q', '--bare', '-b', 'main', bare]);
  mkdirSync(path.join(work, 'envs', 'prod'), { recursive: true });
  git(work, 'init', '-q', '-b', 'main');
  git(work, 'remote', 'add', 'origin', bare);
  writeFileSync(path.join(work, 'envs', 'prod', 'main.tf'), 'variable "size" {\n  type = number\n}\nresource "terraform_data" "prod" {\n  input = var.size\n}\noutput "size" {\n  value = terraform_data.prod.output\n}\n');
  writeFileSync(path.join(work, 'README'), 'infrastructure\n');
  git(work, 'add', '-A');
  git(work, 'commit', '-q', '-m', 'prod');
  git(work, 'push', '-q', 'origin', 'HEAD:main');
  const project = await t.api.post('/v1/projects', { name: 'infra', url: bare });
  expect(project.status).toBe(201);
  const deadline = Date.now() + 30_000;
  while ((await t.api.get(`/v1/projects/${project.body.id}`)).body.status !== 'successful') {
    if (Date.now() > deadline) throw new Error('the project did not update');
    await new Promise((r) => setTimeout(r, 100));
  }
  const created = await t.api.post('/v1/templates', { name: 'prod', tool: 'opentofu', command: 'envs/prod', project_id: project.body.id, extra_vars: { size: 3 } });
  expect(created.status).toBe(201);
  const run = await waitForRunEnd(t.api, (await launch(created.body.id)).id, 120_000);
  expect(run.status).toBe('succeeded');
  const log = await logOf(run.id);
  expect(log).toContain('Apply complete! Resources: 1 added, 0 changed, 0 destroyed.');
  expect(log).toContain('size = 3');
}, 240_000);

test('a provider is installed from the filesystem mirror, and one the mirror lacks fails init naming it', async () => {
  const withProvider = (source: string, version: string) =>
    `terraform {\n  required_providers {\n    cairntest = {\n      source  = "${source}"\n      version = "${version}"\n    }\n  }\n}\nresource "cairntest_note" "n" {\n  text = "from the mirror"\n}\n`;
  const ok = await waitForRunEnd(t.api, (await t.api.post('/v1/runs', { tool: 'opentofu', command: withProvider('cairn/cairntest', '0.1.0') })).body.id, 120_000);
  expect(ok.status).toBe('succeeded');
  const log = await logOf(ok.id);
  expect(log).toContain('Installing cairn/cairntest v0.1.0');
  expect(log).toContain('cairntest_note.n: Creation complete');
  expect((await t.api.get(`/v1/runs/${ok.id}`)).body.plan).toMatchObject({ by_type: { cairntest_note: { create: 1, update: 0, replace: 0, delete: 0 } } });

  const missing = await waitForRunEnd(t.api, (await t.api.post('/v1/runs', { tool: 'opentofu', command: withProvider('cairn/cairntest', '9.9.9') })).body.id, 120_000);
  expect(missing.status).toBe('failed');
  expect(await logOf(missing.id)).toContain('cairn/cairntest');
}, 240_000);

const callingModule = (source: string) => `module "greet" {\n  source = "${source}"\n  name   = "cairn"\n}\noutput "greeting" {\n  value = module.greet.greeting\n}\n`;

test('a remote module is fetched before the plan; a fetch that runs out of time holds the run unclassified and applies nothing', async () => {
  if (!moduleBase) {
    process.stderr.write('this machine has no outward IPv4 address a run\'s isolated network could reach: the module case is not exercised\n');
    return;
  }
  const fetched = await waitForRunEnd(t.api, (await t.api.post('/v1/runs', { tool: 'opentofu', command: callingModule(`${moduleBase}/ok/mod.tar.gz`) })).body.id, 120_000);
  expect(fetched.status).toBe('succeeded');
  const fetchedLog = await logOf(fetched.id);
  expect(fetchedLog).toContain(`fetching the configuration's modules (at most ${MODULE_FETCH_TIMEOUT}s, --module-fetch-timeout)`);
  expect(fetchedLog).toContain('Apply complete! Resources: 1 added, 0 changed, 0 destroyed.');
  expect(fetchedLog).toContain('greeting = "hello cairn"');
  expect(moduleRequests.some((u) => u.startsWith('/ok/'))).toBe(true);

  // The same call to a source that never answers, as a real run and as a dry run, side by side.
  const hanging = callingModule(`${moduleBase}/hang/mod.tar.gz`);
  const [real, dry] = await Promise.all([
    t.api.post('/v1/runs', { tool: 'opentofu', command: hanging }),
    t.api.post('/v1/runs', { tool: 'opentofu', command: hanging, dry_run: true }),
  ]);
  expect(real.status).toBe(201);
  expect(dry.status).toBe(201);
  const why = `the module fetch ran out of time after ${MODULE_FETCH_TIMEOUT}s (--module-fetch-timeout); no plan was made`;
  const held = await waitForRun(t.api, real.body.id, (r) => r.status === 'held', 120_000);
  expect(moduleRequests.some((u) => u.startsWith('/hang/'))).toBe(true);
  // No policy has a plan condition: a plan never made is held all the same, there being nothing the gate could judge.
  expect(held.hold).toMatchObject({ policies: [], plan: { summary: `plan not classified: ${why}`, not_made: why } });
  const view = (await t.api.get(`/v1/runs/${held.id}`)).body;
  expect(view.plan).toMatchObject({ verdict: 'hold', classified: false, reason: why, kept: false, applied_at: null });
  const attention = JSON.stringify((await t.api.get('/v1/attention?blocker=approval_needed')).body);
  expect(attention).toContain(`held for approval: the plan gate could judge no plan at the plan gate (plan not classified: ${why})`);
  expect(attention).toContain(`run ${held.id} applies nothing and ends failed: no plan was made`);

  // The check fails: it could not plan, so it finds neither drift nor its absence.
  const check = await waitForRunEnd(t.api, dry.body.id, 120_000);
  expect(check.status).toBe('failed');
  expect(check.error).toBe(why);
  expect((await t.api.get(`/v1/runs/${check.id}`)).body.plan).toMatchObject({ verdict: 'dry_run', classified: false, kept: false });

  // Approval has nothing to apply: the run ends failed saying so.
  expect((await t.api.post(`/v1/runs/${held.id}/approve`, { plan_digest: held.hold.plan.digest })).status).toBe(200);
  const ended = await waitForRunEnd(t.api, held.id, 60_000);
  expect(ended.status).toBe('failed');
  expect(ended.error).toContain(`not applied: no plan was made to apply (${why})`);
  expect(await logOf(held.id)).not.toContain('Apply complete');
}, 300_000);

// Terraform is built only on demand (its first run, or `cairn tools install terraform`), never by
// the suite: this runs where a terraform binary is at hand already (CAIRN_TERRAFORM, PATH, the cache).
test('a terraform run installs a provider from the mirror, plans and applies; a delete is held and approval applies exactly that plan', async () => {
  const found = await locateIacBinary(TERRAFORM).catch(() => undefined);
  if (!found) {
    process.stderr.write('terraform is not installed here and the suite does not build it: the terraform case is not exercised\n');
    return;
  }
  const config = (withDb: boolean) =>
    `terraform {\n  required_providers {\n    cairntest = {\n      source  = "cairn/cairntest"\n      version = "0.1.0"\n    }\n  }\n}\n` +
    'resource "cairntest_note" "n" {\n  text = "from the mirror"\n}\n' +
    (withDb ? 'resource "terraform_data" "db" {\n  input = "database"\n}\n' : '');
  const created = await t.api.post('/v1/templates', { name: 'terraform two', tool: 'terraform', command: config(true) });
  expect(created.status).toBe(201);
  const run = await waitForRunEnd(t.api, (await launch(created.body.id)).id, 120_000);
  expect(run.status).toBe('succeeded');
  const log = await logOf(run.id);
  expect(log).toMatch(/\[cairn\] plan with Terraform v\d/);
  expect(log).toContain('Installing cairn/cairntest v0.1.0');
  expect(log).toContain('Apply complete! Resources: 2 added, 0 changed, 0 destroyed.');
  expect((await t.api.get(`/v1/runs/${run.id}`)).body.plan).toMatchObject({
    verdict: 'run',
    totals: { create: 2 },
    by_type: { cairntest_note: { create: 1, update: 0, replace: 0, delete: 0 }, terraform_data: { create: 1, update: 0, replace: 0, delete: 0 } },
  });

  const policy = await t.api.post('/v1/policies', { name: 'terraform deletes', tool: 'terraform', plan_deletes: ['terraform_data'] });
  expect(policy.status).toBe(201);
  try {
    const put = await t.api.request('PUT', `/v1/templates/${created.body.id}`, { body: { name: 'terraform two', tool: 'terraform', command: config(false) } });
    expect(put.status).toBe(200);
    const held = await waitForRun(t.api, (await launch(created.body.id)).id, (r) => r.status === 'held', 120_000);
    expect(held.hold.policies).toEqual([policy.body.id]);
    expect(held.hold.plan.summary).toBe('plan: 0 to create, 0 to update, 0 to replace, 1 to delete (deletes terraform_data ×1)');
    expect((await t.api.get(`/v1/runs/${held.id}`)).body.plan.resources).toEqual([{ address: 'terraform_data.db', type: 'terraform_data', action: 'delete' }]);
    expect((await t.api.post(`/v1/runs/${held.id}/approve`, { plan_digest: held.hold.plan.digest })).status).toBe(200);
    const done = await waitForRunEnd(t.api, held.id, 120_000);
    expect(done.status).toBe('succeeded');
    const applied = await logOf(held.id);
    expect(applied).toContain(`applying the saved plan ${held.hold.plan.digest}`);
    expect(applied).toContain('Apply complete! Resources: 0 added, 0 changed, 1 destroyed.');
  } finally {
    await t.api.request('DELETE', `/v1/policies/${policy.body.id}`);
  }
}, 300_000);

test('a go run runs main.go with go run', async () => {
  // No import: the install's build cache starts empty, and every package a program imports is compiled into it first.
  const program = 'package main\n\nfunc main() {\n\tprintln("hello from go")\n}\n';
  const created = await t.api.post('/v1/runs', { tool: 'go', command: program });
  expect(created.status).toBe(201);
  const run = await waitForRunEnd(t.api, created.body.id, 180_000);
  expect(run.status).toBe('succeeded');
  expect(await logOf(run.id)).toContain('hello from go');
}, 240_000);

test('a CAIRN_TOFU that names no executable refuses opentofu runs with 400 naming tool and the variable', async () => {
  const before = process.env.CAIRN_TOFU;
  process.env.CAIRN_TOFU = '/nonexistent/tofu';
  try {
    const refused = await t.api.post('/v1/runs', { tool: 'opentofu', command: 'resource "terraform_data" "a" {}' });
    expect(refused.status).toBe(400);
    expect(refused.body).toEqual({ field: 'tool', error: 'the opentofu tool is missing on this server: CAIRN_TOFU is set to /nonexistent/tofu, which is not an executable file' });
  } finally {
    if (before === undefined) delete process.env.CAIRN_TOFU;
    else process.env.CAIRN_TOFU = before;
  }
});

test('powershell is refused with 400 naming pwsh when it is not installed', async () => {
  const refused = await t.api.post('/v1/runs', { tool: 'powershell', command: 'Write-Output hi' });
  expect(refused.status).toBe(400);
  expect(refused.body.field).toBe('tool');
  expect(refused.body.error).toContain('pwsh');
});

describe('drift on the Team tier, plans sealed with the install key', () => {
  let team: TestServer;
  beforeAll(async () => {
    const license = await testLicense('team');
    team = await startTestServer(
      {
        CAIRN_LICENSE_FILE: license.file,
        SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
        SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
      },
      { licenseKeys: [license.publicJwk] },
    );
  }, 120_000);
  afterAll(async () => {
    await team?.stop();
  });

  test('a check that finds changes records drift; reconcile proposes its saved plan, held; approval applies it and the drift clears', async () => {
    const created = await team.api.post('/v1/templates', { name: 'drifting', tool: 'opentofu', command: twoResources });
    const id = created.body.id as string;
    const go = async (body: Record<string, unknown> = {}) => (await team.api.post(`/v1/templates/${id}/launch`, body)).body;
    expect((await waitForRunEnd(team.api, (await go()).id, 120_000)).status).toBe('succeeded');
    const none = await team.api.get(`/v1/drift?template_id=${id}`);
    expect(none.status).toBe(200);
    expect(none.body).toMatchObject({ drift: [], total: 0 });
    expect((await team.api.post('/v1/drift/reconcile', { template_id: id })).status).toBe(409);

    // The configuration no longer has db: a check (a dry run) finds it would delete it.
    const put = await team.api.request('PUT', `/v1/templates/${id}`, { body: { name: 'drifting', tool: 'opentofu', command: 'resource "terraform_data" "web" {\n  input = "web"\n}\n' } });
    expect(put.status).toBe(200);
    const check = await waitForRunEnd(team.api, (await go({ dry_run: true })).id, 120_000);
    expect(check.status).toBe('succeeded');
    const checkPlan = (await team.api.get(`/v1/runs/${check.id}`)).body.plan;
    expect(checkPlan).toMatchObject({ verdict: 'dry_run', kept: true, sealed: true });
    const drift = await team.api.get(`/v1/drift?template_id=${id}`);
    expect(drift.body.drift).toEqual([
      {
        kind: 'resource',
        tool: 'opentofu',
        template_id: id,
        address: 'terraform_data.db',
        type: 'terraform_data',
        action: 'delete',
        check_run_id: check.id,
        checked_at: expect.any(String),
        plan_digest: checkPlan.digest,
        plan_kept: true,
      },
    ]);
    // A viewer who may not read the template's runs sees none of it.
    await team.api.post('/v1/users', { username: 'vera', role: 'viewer' });
    const vera = await team.api.post('/v1/tokens', { name: 'vera', username: 'vera' });
    expect((await team.as(vera.body.token).get(`/v1/drift?template_id=${id}`)).body.total).toBe(0);

    expect((await team.api.post('/v1/drift/reconcile', {})).body.field).toBe('template_id');
    const proposal = await team.api.post('/v1/drift/reconcile', { template_id: id });
    expect(proposal.status).toBe(201);
    expect(proposal.body.status).toBe('held');
    expect(proposal.body.hold.plan.digest).toBe(checkPlan.digest);
    expect(proposal.body.hold.plan.summary).toContain(`reconciles the drift check ${check.id}`);
    expect((await team.api.post(`/v1/runs/${proposal.body.id}/approve`, { plan_digest: checkPlan.digest })).status).toBe(200);
    const applied = await waitForRunEnd(team.api, proposal.body.id, 120_000);
    expect(applied.status).toBe('succeeded');
    expect((await team.api.get(`/v1/runs/${applied.id}/logs`)).text).toContain('Apply complete! Resources: 0 added, 0 changed, 1 destroyed.');
    expect((await team.api.get(`/v1/drift?template_id=${id}`)).body.total).toBe(0);
  }, 300_000);

  test('a deny policy with a plan condition refuses the apply, and nothing is applied', async () => {
    const created = await team.api.post('/v1/templates', { name: 'denied', tool: 'opentofu', command: twoResources });
    const id = created.body.id as string;
    const go = async (body: Record<string, unknown> = {}) => (await team.api.post(`/v1/templates/${id}/launch`, body)).body;
    expect((await waitForRunEnd(team.api, (await go()).id, 120_000)).status).toBe('succeeded');
    const deny = await team.api.post('/v1/policies', { name: 'never delete data', effect: 'deny', plan_deletes: ['terraform_data'] });
    expect(deny.status).toBe(201);
    try {
      await team.api.request('PUT', `/v1/templates/${id}`, { body: { name: 'denied', tool: 'opentofu', command: 'resource "terraform_data" "web" {\n  input = "web"\n}\n' } });
      const refused = await waitForRunEnd(team.api, (await go()).id, 120_000);
      expect(refused.status).toBe('failed');
      expect(refused.error).toBe(`a deny policy refuses this plan (${deny.body.id}); nothing was applied`);
      expect((await team.api.get(`/v1/runs/${refused.id}`)).body.plan).toMatchObject({ verdict: 'deny', kept: false, applied_at: null });
      expect((await team.api.get(`/v1/runs/${refused.id}/logs`)).text).not.toContain('Apply complete');
    } finally {
      await team.api.request('DELETE', `/v1/policies/${deny.body.id}`);
    }
  }, 300_000);

  test('reconcile is Team: the Community install answers 403 naming the feature', async () => {
    const refused = await t.api.post('/v1/drift/reconcile', { template_id: 'tpl_x' });
    expect(refused.status).toBe(403);
    expect(refused.body.feature).toBe('drift_reconcile');
  });
});
