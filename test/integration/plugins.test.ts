import { promises as fs } from 'node:fs';
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

beforeAll(async () => {
  const parent = tempDir('plugins-server');
  await fs.chmod(parent, 0o755); // the run account reaches the tool's executable in its sandbox
  const dir = await pluginsDir(path.join(parent, 'plugins'), { '10-hello': 'hello', '20-crash': 'crash', '30-duplicate': 'duplicate' });
  t = await startTestServer({ CAIRN_PLUGINS_DIR: dir });
  for (const existing of (await t.api.get('/v1/policies')).body.policies) await t.api.request('DELETE', `/v1/policies/${existing.id}`);
  const created = await t.api.post('/v1/policies', { name: 'plugin tool needs approval', tool: 'hello', exclude_dry_run: true });
  expect(created.status).toBe(201);
}, 180_000);
afterAll(async () => {
  await t?.stop();
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
  expect(t.server.context.extensions?.notifiers.names()).toEqual(['hello-file']);
});
