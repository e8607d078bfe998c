import os from 'node:os';
import { startCairn, startTsScript, type ChildHandle } from '../support/processes';
import { testLicense } from '../support/license';
import { startTestServer, testTemporalAddress, waitForRunEnd, type TestServer } from '../support/server';
import { runExecutions } from '../support/run-executions';

/** Three renewals of a one-second period: a worker lost this long ago shows as lost. */
const LEASE_SECONDS = '3';

let t: TestServer;
let license: { file: string; publicJwk: object };
const workers: ChildHandle[] = [];

beforeAll(async () => {
  license = await testLicense('team');
  t = await startTestServer({ CAIRN_LICENSE_FILE: license.file, CAIRN_LEASE_SECONDS: LEASE_SECONDS }, { licenseKeys: [license.publicJwk] });
});
afterAll(async () => {
  for (const worker of workers) await worker.stop('SIGKILL');
  await t?.stop();
});

/** The settings a worker process joining the test server's install is started with. */
function installEnvironment(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    DATABASE_URL: t.databaseUrl,
    TEMPORAL_ADDRESS: testTemporalAddress(),
    CAIRN_POOL_QUEUE: t.config.poolQueue,
    CAIRN_LEASE_SECONDS: LEASE_SECONDS,
    CAIRN_LOG_LEVEL: 'info',
    ...extra,
  };
}

/** A real `cairn worker --queue NAME` process with the Team license, trusting the test's key. */
async function startQueueWorkerProcess(queue: string): Promise<ChildHandle> {
  const worker = startTsScript('test/support/worker-process.ts', [JSON.stringify(license.publicJwk), '--queue', queue], installEnvironment({ CAIRN_LICENSE_FILE: license.file }));
  workers.push(worker);
  await worker.waitFor(/worker polling/);
  return worker;
}

async function submit(body: Record<string, unknown>): Promise<any> {
  const { status, body: run } = await t.api.post('/v1/runs', { tool: 'bash', ...body });
  if (status !== 201) throw new Error(`submit: ${status} ${JSON.stringify(run)}`);
  return run;
}

/** Where Temporal scheduled the run's tool and which worker process picked it up (`<pid>@<host>`). */
async function execution(runId: string): Promise<{ taskQueue: string; executedBy: string }> {
  const { taskQueue, startedBy } = await runExecutions(t.server.context.temporal, runId);
  return { taskQueue, executedBy: startedBy[0] ?? '' };
}

async function listWorkers(token?: string): Promise<any> {
  const { status, body } = await t.api.get('/v1/workers', token);
  expect(status).toBe(200);
  return body;
}

async function waitForWorker(predicate: (worker: any) => boolean, timeoutMs = 15_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = (await listWorkers()).workers.find(predicate);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`no worker matched; listed ${JSON.stringify((await listWorkers()).workers)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

test('a run on a named queue waits pending until a worker serving that queue starts, then executes on that worker', async () => {
  const run = await submit({ command: 'echo on the gpu queue', queue: 'gpu' });
  await new Promise((r) => setTimeout(r, 3000));
  const waiting = (await t.api.get(`/v1/runs/${run.id}`)).body;
  expect(waiting).toMatchObject({ status: 'pending', queue: 'gpu', started_at: null, attempts: 0 });

  const worker = await startQueueWorkerProcess('gpu');
  const ended = await waitForRunEnd(t.api, run.id);
  expect(ended).toMatchObject({ status: 'succeeded', queue: 'gpu' });
  expect((await t.api.get(`/v1/runs/${run.id}/logs`)).text).toBe('on the gpu queue\n');
  expect(await execution(run.id)).toEqual({ taskQueue: `${t.config.poolQueue}/gpu`, executedBy: `${worker.child.pid}@${os.hostname()}` });
});

test('a run waiting for a queue no worker serves is canceled at once', async () => {
  const run = await submit({ command: 'echo never', queue: 'nobody-serves-this' });
  await new Promise((r) => setTimeout(r, 500));
  const { body } = await t.api.post(`/v1/runs/${run.id}/cancel`, {});
  expect(body).toMatchObject({ status: 'canceled', started_at: null });
});

test('a run with no queue still runs on the server\'s own pool while a named-queue worker is connected', async () => {
  const ended = await waitForRunEnd(t.api, (await submit({ command: 'echo on the pool' })).id);
  expect(ended).toMatchObject({ status: 'succeeded', queue: '' });
  expect(await execution(ended.id)).toEqual({ taskQueue: t.config.poolQueue, executedBy: `${process.pid}@${os.hostname()}` });
});

test('GET /v1/workers lists the server\'s pool worker and the named-queue worker, each with its queue, host, pid and a fresh lease', async () => {
  const gpu = workers[0];
  const body = await listWorkers();
  expect(body).toMatchObject({ count: 2, total: 2 });
  const byQueue = Object.fromEntries(body.workers.map((w: any) => [w.queue, w]));
  expect(byQueue['']).toMatchObject({ host: os.hostname(), pid: process.pid, lease: 'fresh', renew_seconds: 1 });
  expect(byQueue.gpu).toMatchObject({ host: os.hostname(), pid: gpu.child.pid, lease: 'fresh', renew_seconds: 1 });
  for (const worker of body.workers) {
    expect(worker.id).toMatch(/^wrk_[0-9a-z]{26}$/);
    expect(worker.started_at).toMatch(ISO);
    expect(worker.renewed_at).toMatch(ISO);
  }
  // Renewed while it runs (every second): a later read shows a later renewal, with the lease fresh.
  const again = await waitForWorker((w) => w.queue === 'gpu' && Date.parse(w.renewed_at) > Date.parse(byQueue.gpu.renewed_at), 10_000);
  expect(again).toMatchObject({ id: byQueue.gpu.id, lease: 'fresh' });
});

test('any signed-in account may list workers; an anonymous caller may not', async () => {
  const username = `viewer-${Date.now()}`;
  expect((await t.api.post('/v1/users', { username, role: 'viewer' })).status).toBe(201);
  const minted = await t.api.post('/v1/tokens', { name: 'test', username });
  expect((await listWorkers(minted.body.token)).count).toBeGreaterThanOrEqual(1);
  expect((await t.as(null).get('/v1/workers')).status).toBe(401);
});

test('a worker killed without a clean stop shows as lost after three missed renewals', async () => {
  const gpu = workers[0];
  const row = await waitForWorker((w) => w.pid === gpu.child.pid);
  await gpu.stop('SIGKILL');
  const killedAt = Date.now();
  expect((await waitForWorker((w) => w.id === row.id)).lease).toBe('fresh');
  const lost = await waitForWorker((w) => w.id === row.id && w.lease === 'lost', 10_000);
  // Its last renewal was at most one period before the kill: lost no sooner than two periods after.
  expect(Date.now() - killedAt).toBeGreaterThanOrEqual(2000);
  expect(Date.parse(lost.renewed_at)).toBeLessThanOrEqual(killedAt);
  // The pool worker renews on: still fresh.
  expect((await waitForWorker((w) => w.queue === '')).lease).toBe('fresh');
});

test('a worker stopped cleanly takes its row with it', async () => {
  const worker = await startQueueWorkerProcess('cleanly');
  const row = await waitForWorker((w) => w.pid === worker.child.pid);
  expect(row).toMatchObject({ queue: 'cleanly', lease: 'fresh' });
  await worker.stop('SIGTERM');
  expect(await worker.exited).toBe(0);
  expect((await listWorkers()).workers.find((w: any) => w.id === row.id)).toBeUndefined();
});

test('cairn worker without a Team license exits 2 with one line naming the feature and the tier, even for the default pool', async () => {
  const worker = startCairn(['worker'], installEnvironment());
  expect(await worker.exited).toBe(2);
  expect(worker.output()).toBe('cairn: a worker (cairn worker) needs the Team tier; this install runs Community\n');
});

test('an inventory takes a named queue; a run over it, and a template launch over it, inherit it and execute on that queue', async () => {
  // The first gpu worker was killed above: this one serves the queue now.
  const gpu = await startQueueWorkerProcess('gpu');
  const LOCAL = 'ansible_connection=local ansible_python_interpreter=/usr/bin/python3';
  const inventory = await t.api.post('/v1/inventories', { name: 'gpu hosts', content: `[gpu]\ngpu1 ${LOCAL}\n`, queue: 'gpu' });
  expect(inventory).toMatchObject({ status: 201, body: { queue: 'gpu' } });
  const play = '- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.debug:\n        msg: "on {{ inventory_hostname }}"\n';
  const run = await submit({ tool: 'ansible', command: play, inventory_id: inventory.body.id });
  expect(run.queue).toBe('gpu');
  expect(await waitForRunEnd(t.api, run.id, 120_000)).toMatchObject({ status: 'succeeded', queue: 'gpu' });
  expect(await execution(run.id)).toEqual({ taskQueue: `${t.config.poolQueue}/gpu`, executedBy: `${gpu.child.pid}@${os.hostname()}` });
  const template = await t.api.post('/v1/templates', { name: 'gpu play', tool: 'ansible', command: play, inventory_id: inventory.body.id });
  expect(template.body.queue).toBe('');
  const launched = await t.api.post(`/v1/templates/${template.body.id}/launch`, {});
  expect(launched).toMatchObject({ status: 201, body: { queue: 'gpu' } });
  expect(await waitForRunEnd(t.api, launched.body.id, 120_000)).toMatchObject({ status: 'succeeded', queue: 'gpu' });
  // A queue the template names itself wins over its inventory's.
  const own = await t.api.post('/v1/templates', { name: 'own queue', tool: 'ansible', command: play, inventory_id: inventory.body.id, queue: 'elsewhere' });
  const ownLaunch = await t.api.post(`/v1/templates/${own.body.id}/launch`, {});
  expect(ownLaunch).toMatchObject({ status: 201, body: { queue: 'elsewhere' } });
  await t.api.post(`/v1/runs/${ownLaunch.body.id}/cancel`, {});
}, 240_000);

test('cairn worker --queue without a Team license exits 2 with one line naming the feature and the tier', async () => {
  const worker = startCairn(['worker', '--queue', 'gpu'], installEnvironment());
  expect(await worker.exited).toBe(2);
  expect(worker.output()).toBe('cairn: a named queue needs the Team tier; this install runs Community\n');
});
