import { randomBytes } from 'node:crypto';
import { findIacBinary, OPENTOFU } from '../../embedded/iac-binaries';
import { startTsScript, type ChildHandle } from '../support/processes';
import { testLicense } from '../support/license';
import { apiClient, type ApiClient } from '../support/http';
import { startTestServer, waitForRun, waitForRunEnd, type TestServer } from '../support/server';
import { tempDir } from '../support/temp';
import { FIRST_BUILD_TIMEOUT_MS } from '../support/timeouts';

/**
 * OpenTofu runs on a real relay worker (`cairn worker --server`, no database, no Temporal): the
 * worker plans, hands the plan to the server's plan gate through propose-apply (or, a dry run's,
 * through drift-plan), and applies exactly the plan the gate passed or a person approved.
 */

const LEASE_SECONDS = '3';
const WORKER_TOKEN = 'relay-iac-token-0123456789abcdef';
const QUEUE = 'iac-edge';

let t: TestServer;
let license: { file: string; publicJwk: object };
let relay: ApiClient;
let worker: ChildHandle | undefined;

beforeAll(async () => {
  // Built once into the machine cache (minutes the first time on a machine); the worker finds it there too.
  await findIacBinary(OPENTOFU, (line) => process.stderr.write(`${line}\n`));
  license = await testLicense('team');
  t = await startTestServer(
    {
      CAIRN_LICENSE_FILE: license.file,
      CAIRN_LEASE_SECONDS: LEASE_SECONDS,
      CAIRN_WORKER_TOKEN: WORKER_TOKEN,
      // Plans kept for approval and drift are sealed with the install's key, as on a real install.
      SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
      SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
    },
    { licenseKeys: [license.publicJwk] },
  );
  relay = apiClient(t.url, WORKER_TOKEN);
  worker = startTsScript(
    'test/support/worker-process.ts',
    [JSON.stringify(license.publicJwk), '--server', t.url, '--worker-token', WORKER_TOKEN, '--queue', QUEUE],
    { PATH: process.env.PATH, HOME: process.env.HOME, CAIRN_DATA_DIR: tempDir('cairn-relay-iac-worker'), CAIRN_LEASE_SECONDS: LEASE_SECONDS, CAIRN_LOG_LEVEL: 'info' },
  );
  await worker.waitFor(/relay worker polling/);
}, FIRST_BUILD_TIMEOUT_MS);
afterAll(async () => {
  await worker?.stop('SIGKILL');
  await t?.stop();
});

const twoResources = 'resource "terraform_data" "db" {\n  input = "database"\n}\nresource "terraform_data" "web" {\n  input = "web"\n}\n';
const webOnly = 'resource "terraform_data" "web" {\n  input = "web"\n}\n';

const logOf = async (runId: string) => (await t.api.get(`/v1/runs/${runId}/logs`)).text;
const byHand = (queue: string) => ({ id: 'wrk_by_hand', queue, host: 'test-host', pid: 1, version: 'test' });

test('a relay worker plans and applies; a dry run records drift; a plan deleting a matched type is held, and approval applies exactly its saved plan', async () => {
  const created = await t.api.post('/v1/templates', { name: 'edge infra', tool: 'opentofu', command: twoResources, queue: QUEUE });
  expect(created.status).toBe(201);
  const id = created.body.id as string;
  const launch = async (body: Record<string, unknown> = {}) => {
    const launched = await t.api.post(`/v1/templates/${id}/launch`, body);
    if (launched.status !== 201) throw new Error(`launch: ${launched.status} ${launched.text}`);
    return launched.body;
  };

  // Plan on the worker, passed by the gate (no policy), applied there at once.
  const real = await waitForRunEnd(t.api, (await launch()).id, 120_000);
  expect(real.status).toBe('succeeded');
  const realLog = await logOf(real.id);
  expect(realLog).toContain('Plan: 2 to add');
  expect(realLog).toContain('[cairn] plan: 2 to create, 0 to update, 0 to replace, 0 to delete; digest sha256:');
  expect(realLog).toContain('Apply complete! Resources: 2 added, 0 changed, 0 destroyed.');
  const realView = (await t.api.get(`/v1/runs/${real.id}`)).body;
  expect(realView.plan).toMatchObject({ verdict: 'run', kept: false, totals: { create: 2 } });
  expect(realView.plan.applied_at).not.toBeNull();

  // The configuration loses db: a dry run (a drift check) on the worker hands its plan over through drift-plan.
  expect((await t.api.request('PUT', `/v1/templates/${id}`, { body: { name: 'edge infra', tool: 'opentofu', command: webOnly, queue: QUEUE } })).status).toBe(200);
  const check = await waitForRunEnd(t.api, (await launch({ dry_run: true })).id, 120_000);
  expect(check.status).toBe('succeeded');
  const checkPlan = (await t.api.get(`/v1/runs/${check.id}`)).body.plan;
  expect(checkPlan).toMatchObject({ verdict: 'dry_run', kept: true, sealed: true, totals: { delete: 1 } });
  expect(await logOf(check.id)).not.toContain('Destroy complete');
  const drift = await t.api.get(`/v1/drift?template_id=${id}`);
  expect(drift.body.drift).toEqual([expect.objectContaining({ address: 'terraform_data.db', action: 'delete', check_run_id: check.id, plan_digest: checkPlan.digest, plan_kept: true })]);

  // A policy holds plans that delete terraform_data: the worker's plan is held at the server's gate.
  const policy = await t.api.post('/v1/policies', { name: 'no silent deletes at the edge', tool: 'opentofu', plan_deletes: ['terraform_data'] });
  expect(policy.status).toBe(201);
  const launched = await launch();
  const held = await waitForRun(t.api, launched.id, (r) => r.status === 'held', 120_000);
  expect(held.hold.policies).toEqual([policy.body.id]);
  expect(held.hold.plan.summary).toContain('1 to delete');
  const heldView = (await t.api.get(`/v1/runs/${held.id}`)).body;
  expect(heldView.plan).toMatchObject({ verdict: 'hold', kept: true, sealed: true, digest: held.hold.plan.digest });
  expect(heldView.plan.resources).toEqual([{ address: 'terraform_data.db', type: 'terraform_data', action: 'delete' }]);
  const heldLog = await logOf(held.id);
  expect(heldLog).toContain('[cairn] the plan gate holds this run for approval');
  expect(heldLog).not.toContain('Destroy complete');

  // Approval releases exactly that plan: the next attempt on the worker applies the saved file.
  expect((await t.api.post(`/v1/runs/${held.id}/approve`, { plan_digest: 'sha256:0000' })).status).toBe(409);
  expect((await t.api.post(`/v1/runs/${held.id}/approve`, { plan_digest: held.hold.plan.digest, reason: 'db is retired' })).status).toBeLessThan(300);
  const applied = await waitForRunEnd(t.api, held.id, 120_000);
  expect(applied).toMatchObject({ status: 'succeeded', attempts: 2 });
  const appliedLog = await logOf(held.id);
  expect(appliedLog).toContain(`[cairn] applying the saved plan ${held.hold.plan.digest} that was approved`);
  expect(appliedLog).toContain('Apply complete! Resources: 0 added, 0 changed, 1 destroyed.');
  const appliedView = (await t.api.get(`/v1/runs/${held.id}`)).body;
  expect(appliedView.plan).toMatchObject({ verdict: 'hold', kept: false, digest: held.hold.plan.digest });
  expect(appliedView.plan.applied_at).not.toBeNull();
  const kinds = (await t.api.get(`/v1/runs/${held.id}/events?limit=1000`)).body.events.map((e: any) => e.event);
  expect(kinds).toEqual(expect.arrayContaining(['run.started', 'run.held', 'run.resumed', 'run.finished']));
  // The run was executed by the relay worker, under its Temporal workflow like any run.
  expect(appliedView.exec_host).not.toBeNull();
  await t.api.request('DELETE', `/v1/policies/${policy.body.id}`);
}, 300_000);

test('plan reports need the token and a held capability, only from a plan phase of a plan tool, within their bounds', async () => {
  // A body past the plan reports' bound is refused, naming the bound.
  const huge = await relay.request('POST', '/relay/v1/runs/run_any/propose-apply', { body: { plan: 'A'.repeat(73 * 1024 * 1024), plan_json: null } });
  expect(huge.status).toBe(413);
  expect(huge.body.error).toContain('72 MiB limit for relay plan reports');

  const submitted = await t.api.post('/v1/runs', { tool: 'bash', command: 'true', queue: 'by-hand' });
  expect(submitted.status).toBe(201);
  const claim = await relay.post('/relay/v1/claim', { worker: byHand('by-hand'), wait_seconds: 15 });
  expect(claim.status).toBe(200);
  const runPath = `/relay/v1/runs/${claim.body.run_id}`;
  const cap = { 'cairn-capability': claim.body.capability };
  const report = { plan: Buffer.from('not really a plan').toString('base64'), plan_json: '{}' };

  expect((await apiClient(t.url, 'not-the-worker-token-at-all').request('POST', `${runPath}/propose-apply`, { body: report, headers: cap })).status).toBe(401);
  expect((await relay.request('POST', `${runPath}/propose-apply`, { body: report, headers: { 'cairn-capability': 'cairn_cap_forged' } })).status).toBe(403);
  const notStarted = await relay.request('POST', `${runPath}/propose-apply`, { body: report, headers: cap });
  expect(notStarted.status).toBe(400);
  expect(notStarted.body.error).toContain('only terraform and opentofu runs report plans');
  const notBase64 = await relay.request('POST', `${runPath}/drift-plan`, { body: { ...report, plan: '***' }, headers: cap });
  expect(notBase64.status).toBe(400);
  expect(notBase64.body.field).toBe('plan');

  await relay.request('POST', `${runPath}/start`, { body: { worker: byHand('by-hand'), work_root: '/tmp/nowhere' }, headers: cap });
  expect((await relay.request('POST', `${runPath}/save`, { body: { outcome: { kind: 'exited', exit_code: 0, signal: null } }, headers: cap })).status).toBe(200);
  expect((await waitForRunEnd(t.api, claim.body.run_id)).status).toBe('succeeded');
  // Its attempt over, the capability holds no run: a plan report on it is refused.
  expect((await relay.request('POST', `${runPath}/propose-apply`, { body: report, headers: cap })).status).toBe(403);
}, 60_000);

test('a fast tool’s output larger than one log call carries reaches the log whole and once', async () => {
  // 3 MB at full speed: the worker's log batches grow past the 1 MiB body bound and go in slices.
  const submitted = await t.api.post('/v1/runs', { tool: 'bash', command: "yes 'relay output 0123456789 abcdefghijklmnopqrstuvwxyz' | head -c 3000000", queue: QUEUE });
  expect(submitted.status).toBe(201);
  const ended = await waitForRunEnd(t.api, submitted.body.id, 60_000);
  expect(ended.status).toBe('succeeded');
  expect((await t.api.get(`/v1/runs/${ended.id}`)).body.log_bytes).toBe(3_000_000);
}, 60_000);
