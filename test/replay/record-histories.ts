/**
 * Records the workflow histories that test/replay/replay.test.ts replays: each scenario of
 * scenarios.ts driven through a real server (real HTTP, Temporal, PostgreSQL and tools), its
 * workflows' histories written to test/replay/histories/<scenario>.json.
 *
 *   DATABASE_URL=postgres://… node bin/run-ts.js test/replay/record-histories.ts [scenario…]
 *
 * (Naming scenarios records only those; `notify`, `schedule`, `plan-gate`, `project-update` with `job`,
 * `pull-request` and `key-rotation` are recorded apart from the others, `key-rotation` on the
 * time-skipping Temporal server of test/support/time-skipping.ts.)
 * (Without DATABASE_URL an embedded PostgreSQL is started, as for the tests.) Re-record when a
 * scenario is added, or after a workflow change behind `patched()` to keep a history of the new
 * path beside the old one; commit the new files together with the change. Never re-record to make
 * a failing replay pass: a failing replay means the change would break workflows in flight, and
 * the change goes behind `patched()` instead (docs/architecture.md, "Changing workflow code").
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { chmodSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createLogger } from '../../cli/serve';
import { installTemporalRuntime } from '../../workers/runtime';
import globalSetup from '../support/global-setup';
import globalTeardown from '../support/global-teardown';
import { startTestServer, waitForRun, waitForRunEnd, type TestServer } from '../support/server';
import { historyToPlain } from './history-json';
import { createHash, randomBytes } from 'node:crypto';
import { forgeHeaders, githubPullRequest } from '../support/forge-deliveries';
import { startForgePeer } from '../support/forge-peer';
import { bareRepository } from '../support/git';
import { removeTempDirs, tempDir } from '../support/temp';
import { startReceiver } from '../support/receivers';
import type { HistoryFile, Scenario } from './scenarios';
import { enableTimeSkipping, startTimeSkippingTemporal } from '../support/time-skipping';

const HISTORIES = path.join(__dirname, 'histories');
const SDK_VERSION = (require('@temporalio/worker/package.json') as { version: string }).version;

async function ok(t: TestServer, method: 'get' | 'post', route: string, body?: unknown): Promise<any> {
  const res = method === 'get' ? await t.api.get(route) : await t.api.post(route, body);
  if (res.status >= 300) throw new Error(`${method.toUpperCase()} ${route}: ${res.status} ${res.text}`);
  return res.body;
}

/** The run's children that had a workflow (approval steps and steps never run have none). */
async function childrenOf(t: TestServer, parentId: string, kind: 'steps' | 'shards'): Promise<string[]> {
  return ((await ok(t, 'get', `/v1/runs/${parentId}/${kind}`))[kind] as any[]).filter((c) => c.kind !== 'approval').map((c) => c.id);
}

/** Recording is about the workflow code's decisions, not the machine: which process ran a task is left out. */
function withoutIdentities(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutIdentities);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, k === 'identity' ? 'recorder' : withoutIdentities(v)]));
  }
  return value;
}

/** Writes the scenario's file: each workflow's history once it has closed, or as it stands for those named still open. */
async function save(t: TestServer, scenario: Scenario, workflowIds: string[], stillOpen: string[] = []): Promise<void> {
  const client = t.server.context.temporal;
  const workflows: HistoryFile['workflows'] = [];
  for (const id of workflowIds) {
    const handle = client.workflow.getHandle(id);
    try {
      if (!stillOpen.includes(id)) await handle.result().catch(() => undefined);
      const { type } = await handle.describe();
      workflows.push({ workflow_id: id, workflow_type: type, history: withoutIdentities(historyToPlain(await handle.fetchHistory())) });
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
  }
  const file: HistoryFile = { scenario, recorded_with: `@temporalio/worker ${SDK_VERSION}`, workflows };
  writeFileSync(path.join(HISTORIES, `${scenario}.json`), `${JSON.stringify(file, null, 1)}\n`);
  process.stdout.write(`recorded ${scenario}: ${workflows.map((w) => `${w.workflow_type} ${w.workflow_id}`).join(', ')}\n`);
}

const submit = (t: TestServer, body: Record<string, unknown>) => ok(t, 'post', '/v1/runs', { tool: 'bash', ...body });

/** A release workflow: an approval step behind a deploy, a branch that runs meanwhile, a deny path. */
const release = (extra: Record<string, unknown> = {}) => [
  { name: 'build', tool: 'bash', command: 'echo built' },
  { name: 'deploy-staging', tool: 'bash', command: 'echo staged', depends_on: ['build'] },
  { name: 'smoke', tool: 'bash', command: 'sleep 1; echo smoke ok', depends_on: ['build'] },
  { name: 'promote', type: 'approval', description: 'promote to production?', depends_on: ['deploy-staging'], if_denied: 'rollback', ...extra },
  { name: 'deploy-prod', tool: 'bash', command: 'echo production', depends_on: ['promote'] },
  { name: 'rollback', tool: 'bash', command: 'echo rolled back' },
];

async function launchRelease(t: TestServer, name: string, extra: Record<string, unknown> = {}): Promise<{ workflow: any; promote: any }> {
  const template = await ok(t, 'post', '/v1/templates', { name, steps: release(extra) });
  const workflow = await ok(t, 'post', `/v1/templates/${template.id}/launch`, {});
  const deadline = Date.now() + 30_000;
  for (;;) {
    const steps = Object.fromEntries(((await ok(t, 'get', `/v1/runs/${workflow.id}/steps`)).steps as any[]).map((s) => [s.step_name, s]));
    if (steps.promote.status === 'held' && steps.smoke.finished_at) return { workflow, promote: steps.promote };
    if (Date.now() > deadline) throw new Error(`workflow ${workflow.id} never reached its approval step`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function record(t: TestServer): Promise<void> {
  const run = await submit(t, { command: 'echo hello' });
  await waitForRunEnd(t.api, run.id);
  await save(t, 'run', [run.id]);

  const canceled = await submit(t, { command: 'sleep 30' });
  await waitForRun(t.api, canceled.id, (r) => r.status === 'running');
  await ok(t, 'post', `/v1/runs/${canceled.id}/cancel`);
  await waitForRunEnd(t.api, canceled.id);
  await save(t, 'cancel', [canceled.id]);

  const timedOut = await submit(t, { command: 'sleep 30', timeout: 2 });
  await waitForRunEnd(t.api, timedOut.id);
  await save(t, 'timeout', [timedOut.id]);

  const pipeline = await ok(t, 'post', '/v1/pipelines', {
    steps: [
      { name: 'build', tool: 'bash', command: 'echo build' },
      { name: 'test', tool: 'bash', command: 'echo test' },
      { name: 'ship', tool: 'bash', command: 'echo ship' },
    ],
  });
  await waitForRunEnd(t.api, pipeline.id);
  await save(t, 'pipeline', [pipeline.id, ...(await childrenOf(t, pipeline.id, 'steps'))]);

  const { workflow, promote } = await launchRelease(t, 'release-approved');
  const ran = ((await ok(t, 'get', `/v1/runs/${workflow.id}/steps`)).steps as any[]).filter((s) => s.finished_at && s.kind !== 'approval');
  await save(t, 'approval-waiting', [workflow.id, ...ran.map((s) => s.id)], [workflow.id]);
  await ok(t, 'post', `/v1/runs/${promote.id}/approve`, { reason: 'staging looks good' });
  await waitForRunEnd(t.api, workflow.id);
  await save(t, 'approval-passed', [workflow.id, ...(await childrenOf(t, workflow.id, 'steps'))]);

  const expiring = await launchRelease(t, 'release-expiring', { approval_timeout: 2 });
  await waitForRunEnd(t.api, expiring.workflow.id);
  await save(t, 'approval-timeout', [expiring.workflow.id, ...(await childrenOf(t, expiring.workflow.id, 'steps'))]);

  const split = await submit(t, { command: 'echo "shard $CAIRN_SHARD_INDEX of $CAIRN_SHARD_COUNT"', shards: 3 });
  await waitForRunEnd(t.api, split.id);
  await save(t, 'split', [split.id, ...(await childrenOf(t, split.id, 'shards'))]);
}

/** A webhook target on a template: the run's start arrives, its end fails once and arrives on the retry. */
async function recordNotify(t: TestServer): Promise<void> {
  const receiver = await startReceiver();
  try {
    let ends = 0;
    receiver.answer((r) => (r.json?.event === 'run.finished' && ends++ === 0 ? { status: 500 } : { status: 200 }));
    const template = await ok(t, 'post', '/v1/templates', { name: 'notified', tool: 'bash', command: 'echo hello' });
    const target = await ok(t, 'post', '/v1/notifications', { name: 'hook', kind: 'webhook', url: `${receiver.url}/hook` });
    for (const event of ['started', 'success']) {
      await ok(t, 'post', `/v1/notifications/${target.id}/attachments`, { object_kind: 'template', object_id: template.id, event });
    }
    const run = await ok(t, 'post', `/v1/templates/${template.id}/launch`, {});
    await waitForRunEnd(t.api, run.id);
    await receiver.waitFor((r) => r.filter((x) => x.answered === 200).length >= 2, 30_000, 'both deliveries');
    // The target's workflow stays open a minute for more deliveries: its history is saved as it stands.
    await save(t, 'notify', [target.id], [target.id]);
  } finally {
    await receiver.close();
  }
}

/** An opentofu template run held at the plan gate and approved (terraform_data only: no provider). */
async function recordPlanGate(t: TestServer): Promise<void> {
  const both = 'resource "terraform_data" "db" {\n  input = "db"\n}\nresource "terraform_data" "web" {\n  input = "web"\n}\n';
  const template = await ok(t, 'post', '/v1/templates', { name: 'plan gate', tool: 'opentofu', command: both });
  await waitForRunEnd(t.api, (await ok(t, 'post', `/v1/templates/${template.id}/launch`, {})).id, 120_000);
  const policy = await ok(t, 'post', '/v1/policies', { name: 'deletes', plan_deletes: ['terraform_data'] });
  const put = await t.api.request('PUT', `/v1/templates/${template.id}`, { body: { name: 'plan gate', tool: 'opentofu', command: 'resource "terraform_data" "web" {\n  input = "web"\n}\n' } });
  if (put.status !== 200) throw new Error(`PUT /v1/templates/${template.id}: ${put.status} ${put.text}`);
  const run = await ok(t, 'post', `/v1/templates/${template.id}/launch`, {});
  await waitForRun(t.api, run.id, (r) => r.status === 'held', 120_000);
  await ok(t, 'post', `/v1/runs/${run.id}/approve`, {});
  await waitForRunEnd(t.api, run.id, 120_000);
  await save(t, 'plan-gate', [run.id]);
  await t.api.request('DELETE', `/v1/policies/${policy.id}`);
}

/** The ids of the workflows of a type started since `since`, oldest first (Temporal's visibility). */
async function workflowsOfType(t: TestServer, type: string, since: Date): Promise<string[]> {
  const ids: string[] = [];
  const query = `WorkflowType = '${type}' AND StartTime >= '${since.toISOString()}'`;
  for await (const execution of t.server.context.temporal.workflow.list({ query })) ids.push(execution.workflowId);
  return ids.reverse();
}

/** A project's first update with a save asked for meanwhile, then a job listing its files. */
async function recordProjectWork(t: TestServer, root: string): Promise<void> {
  const since = new Date(Date.now() - 1000);
  const body = { name: 'replayed', url: bareRepository(root, { 'site.yml': '- hosts: localhost\n  gather_facts: false\n  tasks:\n    - debug: { msg: hello }\n' }).bare };
  const project = await ok(t, 'post', '/v1/projects', body);
  // Saved again while the first update runs: the workflow takes the signal and updates once more.
  const saved = await t.api.request('PUT', `/v1/projects/${project.id}`, { body });
  if (saved.status !== 200) throw new Error(`PUT /v1/projects/${project.id}: ${saved.status} ${saved.text}`);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const seen = await ok(t, 'get', `/v1/projects/${project.id}`);
    if (!seen.update_pending && seen.status === 'successful') break;
    if (Date.now() > deadline) throw new Error(`project ${project.id} did not settle: ${JSON.stringify(seen)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  await save(t, 'project-update', await workflowsOfType(t, 'projectUpdateWorkflow', since));
  const files = await ok(t, 'get', `/v1/projects/${project.id}/files`);
  if (!JSON.stringify(files).includes('site.yml')) throw new Error(`the project's files do not list site.yml: ${JSON.stringify(files)}`);
  await save(t, 'job', await workflowsOfType(t, 'jobWorkflow', since));
}

/** A pull request opened on a review trigger of an opentofu template, reported to a local forge peer. */
async function recordPullRequest(t: TestServer): Promise<void> {
  const since = new Date(Date.now() - 1000);
  const peer = await startForgePeer({ id: 'cairn-replay', secret: randomBytes(12).toString('hex'), redirectUri: 'http://127.0.0.1:1/unused' });
  try {
    const template = await ok(t, 'post', '/v1/templates', { name: 'reviewed', tool: 'opentofu', command: 'resource "terraform_data" "web" {\n  input = "web"\n}\n' });
    const trigger = await ok(t, 'post', '/v1/triggers', { name: 'plan pull requests', template_id: template.id, review: { forge: 'github', token: peer.apiToken, api_url: `${peer.url}/api/v3` } });
    const pr = { repository: 'octo/infra', number: 7, headSha: createHash('sha1').update(randomBytes(8)).digest('hex') };
    const raw = JSON.stringify(githubPullRequest(pr));
    const opened = await t.as(null).request('POST', trigger.hook_path, { rawBody: raw, headers: forgeHeaders('github', raw, trigger.secret, { event: 'pull_request' }) });
    if (opened.status !== 201) throw new Error(`the pull request delivery: ${opened.status} ${opened.text}`);
    await waitForRunEnd(t.api, opened.body.run_id, 120_000);
    await peer.waitForPost((p) => p.kind === 'comment' && p.subject === '7');
    await save(t, 'pull-request', await workflowsOfType(t, 'pullRequestWorkflow', since));
  } finally {
    await peer.stop();
  }
}

/** Every run of a workflow that continues as new, oldest first: each run's start names the run before it. */
async function chainOf(t: TestServer, workflowId: string): Promise<HistoryFile['workflows']> {
  const client = t.server.context.temporal;
  await client.workflow.getHandle(workflowId).result().catch(() => undefined);
  const { type } = await client.workflow.getHandle(workflowId).describe();
  const chain: HistoryFile['workflows'] = [];
  for (let runId: string | undefined = undefined; ; ) {
    const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    chain.unshift({ workflow_id: workflowId, workflow_type: type, history: withoutIdentities(historyToPlain(history)) });
    runId = history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
    if (!runId) return chain;
  }
}

/**
 * A schedule saved again while asleep, then firing every second until its COUNT is spent: one more
 * fire than a workflow run makes before it continues as new. Another deleted while asleep.
 */
async function recordSchedule(t: TestServer): Promise<void> {
  const start = new Date(Math.ceil(Date.now() / 1000) * 1000 + 4000);
  const dtstart = start.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  const body = { name: 'every second, 101 times', rrule: `DTSTART:${dtstart}\nRRULE:FREQ=SECONDLY;COUNT=101`, run: { tool: 'bash', command: 'true' } };
  const schedule = await ok(t, 'post', '/v1/schedules', body);
  const renamed = await t.api.request('PUT', `/v1/schedules/${schedule.id}`, { body: { ...body, name: 'renamed while asleep' } });
  if (renamed.status !== 200) throw new Error(`PUT /v1/schedules/${schedule.id}: ${renamed.status} ${renamed.text}`);
  const deleted = await ok(t, 'post', '/v1/schedules', { name: 'deleted while asleep', cron: '0 0 1 1 *', timezone: 'UTC', run: { tool: 'bash', command: 'true' } });
  await new Promise((r) => setTimeout(r, 1000));
  const gone = await t.api.request('DELETE', `/v1/schedules/${deleted.id}`);
  if (gone.status !== 204) throw new Error(`DELETE /v1/schedules/${deleted.id}: ${gone.status} ${gone.text}`);
  const workflows = [...(await chainOf(t, schedule.id)), ...(await chainOf(t, deleted.id))];
  const file: HistoryFile = { scenario: 'schedule', recorded_with: `@temporalio/worker ${SDK_VERSION}`, workflows };
  writeFileSync(path.join(HISTORIES, 'schedule.json'), `${JSON.stringify(file, null, 1)}\n`);
  process.stdout.write(`recorded schedule: ${workflows.map((w) => `${w.workflow_type} ${w.workflow_id}`).join(', ')}\n`);
}

/** A normal key rotation run to its end in simulated time, on a server of its own on the time-skipping Temporal server. */
async function recordKeyRotation(): Promise<void> {
  const temporal = await startTimeSkippingTemporal();
  let t: TestServer | undefined;
  try {
    t = await startTestServer({
      TEMPORAL_ADDRESS: temporal.address,
      CAIRN_FEDERATION_ISSUER: 'https://cairn.example.com',
      SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
      SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
    });
    const rotated = await ok(t, 'post', '/v1/federation/keys/rotate');
    const workflowId: string = rotated.keys.find((k: { state: string }) => k.state === 'next').id;
    await enableTimeSkipping(temporal.client, workflowId);
    await save(t, 'key-rotation', [workflowId]);
  } finally {
    await t?.stop();
    await temporal.teardown();
  }
}

async function main(): Promise<void> {
  // After node, bin/run-ts.js and this script: the scenarios named, if any.
  const only = process.argv.slice(3);
  // One Temporal runtime per process: set up with the server's logging before the dev server's client makes its own.
  installTemporalRuntime(createLogger({ logLevel: 'warn' }));
  await globalSetup();
  const wanted = (scenario: Scenario) => only.length === 0 || only.includes(scenario);
  let t: TestServer | undefined;
  // The recording server's own scenarios; `key-rotation` has a server of its own.
  const apart = ['notify', 'schedule', 'key-rotation', 'plan-gate', 'project-update', 'job', 'pull-request'];
  const gitRoot = tempDir('cairn-replay-git');
  // The run account reads the repository in its sandbox.
  chmodSync(gitRoot, 0o755);
  // A failed scenario still stops the dev server and PostgreSQL globalSetup started, and removes the repository.
  try {
    try {
      if (only.length === 0 || only.some((s) => s !== 'key-rotation')) t = await startTestServer(
        {
          SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
          SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
          SERVICE_EGRESS_ALLOW: '127.0.0.0/8',
          CAIRN_PROJECT_LOCAL_ROOTS: gitRoot,
        },
        { notificationRetryBaseMs: 500 },
      );
      if (t && (only.length === 0 || only.some((s) => !apart.includes(s)))) await record(t);
      if (t && wanted('notify')) await recordNotify(t);
      if (t && wanted('plan-gate')) await recordPlanGate(t);
      if (t && wanted('schedule')) await recordSchedule(t);
      if (t && (wanted('project-update') || wanted('job'))) await recordProjectWork(t, gitRoot);
      if (t && wanted('pull-request')) await recordPullRequest(t);
    } finally {
      await t?.stop();
    }
    if (wanted('key-rotation')) await recordKeyRotation();
  } finally {
    await globalTeardown();
    removeTempDirs();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
