import { promises as fs } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { pluginsDir } from '../support/plugins';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';
import { tempDir } from '../support/temp';

/**
 * A real server started with --plugins-dir holding plugins built from the Go SDK: the crashing
 * one is skipped while the server starts, the one declaring a taken name is skipped whole, and
 * the plugin's tool is submitted, gated, run in the sandbox and audited like a built-in tool.
 */
let t: TestServer;
let notifyFile: string;
let leaseDir: string;
const STATIC_SECRET = 'static-Secret-from-the-plugin-42';
/** What the tracker was sent: a local peer answering Jira's REST comment endpoint as Jira does. */
const comments: { key: string; authorization: string | undefined; body: { body: string } }[] = [];
let tracker: http.Server;

beforeAll(async () => {
  const parent = tempDir('plugins-server');
  await fs.chmod(parent, 0o755); // the run account reaches the tool's executable in its sandbox
  const dir = await pluginsDir(path.join(parent, 'plugins'), { '10-hello': 'hello', '20-crash': 'crash', '30-duplicate': 'duplicate', '40-ticket': 'ticket' });
  tracker = http.createServer((req, res) => {
    const match = /^\/rest\/api\/2\/issue\/([^/]+)\/comment$/.exec(req.url ?? '');
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      if (req.method !== 'POST' || !match) return void res.writeHead(404).end('{"errorMessages":["Issue does not exist"]}');
      comments.push({ key: decodeURIComponent(match[1]), authorization: req.headers.authorization, body: JSON.parse(raw) });
      res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ id: String(comments.length), body: JSON.parse(raw).body }));
    });
  });
  await new Promise<void>((resolve) => tracker.listen(0, '127.0.0.1', resolve));
  process.env.SERVICE_PLUGIN_TICKET_URL = `http://127.0.0.1:${(tracker.address() as AddressInfo).port}`;
  process.env.SERVICE_PLUGIN_TICKET_USER = 'cairn@example.com';
  process.env.SERVICE_PLUGIN_TICKET_TOKEN = 'tracker-api-token';
  // Plugins see SERVICE_PLUGIN_* variables of the server's environment (and nothing of its settings).
  notifyFile = path.join(tempDir('plugin-notify'), 'events.jsonl');
  leaseDir = tempDir('plugin-leases');
  process.env.SERVICE_PLUGIN_HELLO_NOTIFY_FILE = notifyFile;
  process.env.SERVICE_PLUGIN_HELLO_LEASE_DIR = leaseDir;
  process.env.SERVICE_PLUGIN_STATIC_TOKEN = STATIC_SECRET;
  t = await startTestServer({ CAIRN_PLUGINS_DIR: dir });
  delete process.env.SERVICE_PLUGIN_HELLO_NOTIFY_FILE;
  delete process.env.SERVICE_PLUGIN_HELLO_LEASE_DIR;
  delete process.env.SERVICE_PLUGIN_STATIC_TOKEN;
  delete process.env.SERVICE_PLUGIN_TICKET_URL;
  delete process.env.SERVICE_PLUGIN_TICKET_USER;
  delete process.env.SERVICE_PLUGIN_TICKET_TOKEN;
  for (const existing of (await t.api.get('/v1/policies')).body.policies) await t.api.request('DELETE', `/v1/policies/${existing.id}`);
  const created = await t.api.post('/v1/policies', { name: 'plugin tool needs approval', tool: 'hello', exclude_dry_run: true });
  expect(created.status).toBe(201);
}, 180_000);
afterAll(async () => {
  await t?.stop();
  tracker?.close();
});

test("a plugin tool's run is held by a policy, approved, run in the sandbox and audited", async () => {
  const submitted = await t.api.post('/v1/runs', { tool: 'hello', command: 'greet', extra_vars: { who: 'operators' } });
  expect(submitted.status).toBe(201);
  expect(submitted.body.status).toBe('held');
  const approved = await t.api.post(`/v1/runs/${submitted.body.id}/approve`, { state_digest: submitted.body.state_digest });
  expect(approved.status).toBe(200);
  const ended = await waitForRunEnd(t.api, submitted.body.id);
  expect(ended).toMatchObject({ status: 'succeeded', exit_code: 0 });
  expect((await t.api.get(`/v1/runs/${submitted.body.id}/logs`)).text).toBe('hello, operators\n');
  const audit = (await t.api.get('/v1/audit?limit=50')).body.entries.filter((e: any) => e.run_id === submitted.body.id || e.body?.run_id === submitted.body.id || JSON.stringify(e).includes(submitted.body.id));
  expect(audit.length).toBeGreaterThan(0);

  // The plugin's notifier is told of the end once, its extra vars redacted.
  const told = async () =>
    (await fs.readFile(notifyFile, 'utf8').catch(() => ''))
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line))
      .filter((e) => e.runId === submitted.body.id);
  const deadline = Date.now() + 10_000;
  while ((await told()).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  const events = await told();
  expect(events).toHaveLength(1); // and still one at the end of the file (the last test)
  expect(events[0]).toMatchObject({ tool: 'hello', status: 'succeeded', exitCode: 0, extraVars: { who: '[redacted]' } });
  expect(JSON.stringify(events[0])).not.toContain('operators');
});

test("a plugin tool's dry run is never change free: exclude_dry_run still holds it", async () => {
  const submitted = await t.api.post('/v1/runs', { tool: 'hello', command: 'greet', dry_run: true });
  expect(submitted.status).toBe(201);
  expect(submitted.body.status).toBe('held');
});

test('the skipped plugins registered nothing, and an unknown tool is refused naming the field', async () => {
  const unknown = await t.api.post('/v1/runs', { tool: 'duplicate-notifier', command: 'greet' });
  expect(unknown.status).toBe(400);
  expect(JSON.stringify(unknown.body)).toContain('tool');
  expect(t.server.context.extensions?.notifiers.names()).toEqual(['hello-file', 'ticket-system']);
});

describe('credentials from extension secret sources', () => {
  const COMMAND = ['echo "token=$VAULT_TOKEN"', 'printf %s "$VAULT_TOKEN" | cut -c1-13 | sed "s/^/prefix=/"', 'echo "length=${#VAULT_TOKEN}"'].join('\n');

  async function launchWith(secretSources: Record<string, { source: string; ref: string }>) {
    const credential = await t.api.post('/v1/credentials', { name: `from ${Object.values(secretSources)[0].source}`, kind: 'hashicorp_token', inputs: { url: 'http://127.0.0.1:8200' }, secret_sources: secretSources });
    expect(credential.status).toBe(201);
    expect(credential.body).toMatchObject({ status: 'ready', secrets_set: ['token'], secret_sources: secretSources });
    expect(JSON.stringify(credential.body)).not.toContain(STATIC_SECRET);
    const template = await t.api.post('/v1/templates', { name: `uses ${credential.body.id}`, tool: 'bash', credentials: [credential.body.id], command: COMMAND });
    expect(template.status).toBe(201);
    // The only policy holds `hello` runs, not bash ones.
    const launched = await t.api.post(`/v1/templates/${template.body.id}/launch`, {});
    expect(launched.status).toBe(201);
    const ended = await waitForRunEnd(t.api, launched.body.id);
    return { ended, log: (await t.api.get(`/v1/runs/${launched.body.id}/logs`)).text };
  }

  test('a static source is read at run time, injected and masked, and never stored', async () => {
    const { ended, log } = await launchWith({ token: { source: 'hello-env', ref: 'SERVICE_PLUGIN_STATIC_TOKEN' } });
    expect(ended.status).toBe('succeeded');
    expect(log).toBe(`token=[masked]\nprefix=static-Secret\nlength=${STATIC_SECRET.length}\n`);
  });

  test("a dynamic source mints a secret for the run and the lease is revoked when the run ends", async () => {
    const { ended, log } = await launchWith({ token: { source: 'hello-lease', ref: 'role-deploy' } });
    expect(ended.status).toBe('succeeded');
    expect(log).toMatch(/^token=\[masked\]\nprefix=lease-secret-\nlength=\d+\n$/);
    // The lease file the plugin made for the run is gone: revoked by the plugin that minted it.
    expect(await fs.readdir(leaseDir)).toEqual([]);
  });

  test('a source this server lacks, or a non-secret field, is refused naming the field', async () => {
    const unknown = await t.api.post('/v1/credentials', { name: 'x', kind: 'hashicorp_token', inputs: { url: 'http://x' }, secret_sources: { token: { source: 'nope', ref: 'a' } } });
    expect(unknown.status).toBe(400);
    expect(unknown.body.field).toBe('secret_sources.token');
    const plain = await t.api.post('/v1/credentials', { name: 'y', kind: 'hashicorp_token', inputs: { token: 't' }, secret_sources: { url: { source: 'hello-env', ref: 'a' } } });
    expect(plain.status).toBe(400);
    expect(plain.body.field).toBe('secret_sources.url');
  });
});

test('every ended top-level run was told to the notifier exactly once', async () => {
  // The last run launched above has ended; wait for its notice, then count every run's.
  const lines = async () => (await fs.readFile(notifyFile, 'utf8').catch(() => '')).split('\n').filter(Boolean).map((line) => JSON.parse(line));
  const ended = (await t.api.get('/v1/runs?limit=100')).body.runs.filter((r: any) => r.finished_at);
  expect(ended.length).toBeGreaterThanOrEqual(3);
  const deadline = Date.now() + 10_000;
  while ((await lines()).length < ended.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  const told = await lines();
  expect(told.map((e) => e.runId).sort()).toEqual(ended.map((r: any) => r.id).sort());
});

test('the ticket-system notifier notes a run labelled with an issue key on that ticket, and only such a run', async () => {
  const labelled = await t.api.post('/v1/runs', { tool: 'bash', command: 'exit 3', change: 'OPS-42' });
  const unlabelled = await t.api.post('/v1/runs', { tool: 'bash', command: 'true', change: 'spring cleanup' });
  expect([labelled.status, unlabelled.status]).toEqual([201, 201]);
  await waitForRunEnd(t.api, labelled.body.id);
  await waitForRunEnd(t.api, unlabelled.body.id);
  const deadline = Date.now() + 10_000;
  while (!comments.some((c) => c.body.body.includes(labelled.body.id)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  const noted = comments.filter((c) => c.body.body.includes(labelled.body.id));
  expect(noted).toHaveLength(1);
  expect(noted[0].key).toBe('OPS-42');
  expect(noted[0].authorization).toBe(`Basic ${Buffer.from('cairn@example.com:tracker-api-token').toString('base64')}`);
  expect(noted[0].body.body).toBe(`Cairn run ${labelled.body.id} (bash) ended failed, exit code 3. /v1/runs/${labelled.body.id}`);
  expect(comments.some((c) => c.body.body.includes(unlabelled.body.id))).toBe(false);
});
