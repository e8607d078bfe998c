import { execFileSync } from 'node:child_process';
import { chmodSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { processesMatching, startTsScript, type ChildHandle } from '../support/processes';
import { waitUntil } from '../support/schedules';
import { testLicense } from '../support/license';
import { connectDatabase } from '../../store/db';
import { apiClient, type ApiClient } from '../support/http';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';
import { tempDir } from '../support/temp';

/**
 * Three renewals of a two-second period: a relay worker silent this long has lost its run. Three
 * seconds lapsed under a loaded machine (a fresh CI building its tools beside the tests): the
 * holders here renew every half second, but an answer could take longer than the lease's last second.
 */
const LEASE_SECONDS = '6';
const WORKER_TOKEN = 'relay-test-token-0123456789abcdef';

let t: TestServer;
let license: { file: string; publicJwk: object };
let relay: ApiClient;
const workers: ChildHandle[] = [];

let gitRoot: string;

beforeAll(async () => {
  license = await testLicense('team');
  gitRoot = tempDir('cairn-relay-git');
  // The run account reads the repository in its sandbox.
  chmodSync(gitRoot, 0o755);
  t = await startTestServer(
    { CAIRN_LICENSE_FILE: license.file, CAIRN_LEASE_SECONDS: LEASE_SECONDS, CAIRN_WORKER_TOKEN: WORKER_TOKEN, CAIRN_PROJECT_LOCAL_ROOTS: gitRoot },
    { licenseKeys: [license.publicJwk] },
  );
  relay = apiClient(t.url, WORKER_TOKEN);
});
afterAll(async () => {
  for (const worker of workers) await worker.stop('SIGKILL');
  await t?.stop();
});

/**
 * A real `cairn worker --server URL --worker-token T --queue Q` process in a data dir of its own,
 * given no database URL and no Temporal address: the relay is all it can reach.
 */
async function startRelayWorkerProcess(queue: string, extra: string[] = []): Promise<ChildHandle> {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    CAIRN_DATA_DIR: tempDir('cairn-relay-worker'),
    CAIRN_LEASE_SECONDS: LEASE_SECONDS,
    CAIRN_LOG_LEVEL: 'info',
  };
  const worker = startTsScript('test/support/worker-process.ts', [JSON.stringify(license.publicJwk), '--server', t.url, '--worker-token', WORKER_TOKEN, '--queue', queue, ...extra], env);
  workers.push(worker);
  await worker.waitFor(/relay worker polling/);
  return worker;
}

async function submit(body: Record<string, unknown>): Promise<any> {
  const { status, body: run } = await t.api.post('/v1/runs', { tool: 'bash', ...body });
  if (status !== 201) throw new Error(`submit: ${status} ${JSON.stringify(run)}`);
  return run;
}

async function eventKinds(runId: string): Promise<string[]> {
  const { body } = await t.api.get(`/v1/runs/${runId}/events?limit=1000`);
  return body.events.map((e: any) => e.event);
}

async function waitForLog(runId: string, pattern: RegExp, timeoutMs = 20_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const log = (await t.api.get(`/v1/runs/${runId}/logs`)).text;
    if (pattern.test(log)) return log;
    if (Date.now() > deadline) throw new Error(`log of ${runId} never matched ${pattern}: ${JSON.stringify(log)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const worker = (queue: string) => ({ id: 'wrk_by_hand', queue, host: 'test-host', pid: 1, version: 'test' });

/** A by-hand holder's heartbeat for a run it claimed with `capability` headers. */
const heartbeat = (runId: string, capability: Record<string, string>) =>
  relay.request('POST', `/relay/v1/heartbeat`, { body: { run_id: runId, worker: worker('by-hand') }, headers: capability });

/** Renews a by-hand holder's lease every half second, as a worker does, until the returned stop is called. */
function keepRenewing(runId: string, capability: Record<string, string>): () => void {
  const timer = setInterval(() => void heartbeat(runId, capability).catch(() => undefined), 500);
  return () => clearInterval(timer);
}

test('a relay worker with only a URL and a token runs a named queue’s bash run end to end: log, exit, and the fleet view', async () => {
  await startRelayWorkerProcess('edge');
  const run = await submit({ command: 'echo "from the edge $CAIRN_RUN_ATTEMPT"; echo to stderr >&2; exit 3', queue: 'edge' });
  const ended = await waitForRunEnd(t.api, run.id, 30_000);
  expect(ended).toMatchObject({ status: 'failed', exit_code: 3, attempts: 1 });
  const log = (await t.api.get(`/v1/runs/${run.id}/logs`)).text;
  expect(log).toContain('from the edge 1\n');
  expect(log).toContain('to stderr\n');
  const kinds = await eventKinds(run.id);
  expect(kinds.filter((k) => k === 'run.started')).toHaveLength(1);
  expect(kinds.filter((k) => k === 'run.finished')).toHaveLength(1);

  const listed = (await t.api.get('/v1/workers')).body.workers.find((w: any) => w.kind === 'relay' && w.queue === 'edge');
  expect(listed).toMatchObject({ kind: 'relay', queue: 'edge', lease: 'fresh', runs_held: 0 });
  expect(typeof listed.version).toBe('string');
  expect(Date.parse(listed.last_contact)).toBeGreaterThan(Date.now() - 10_000);

  // The Temporal history shows the attempt like any other: scheduled on the queue's task queue.
  const history = await t.server.context.temporal.workflow.getHandle(run.id).fetchHistory();
  expect(history.events?.some((e) => e.activityTaskCompletedEventAttributes)).toBe(true);
});

test('a project-backed run on a relay worker gets its tree through the relay, with no shared projects directory', async () => {
  const bare = path.join(gitRoot, 'site.git');
  const work = path.join(gitRoot, 'work');
  const git = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd, encoding: 'utf8' }).trim();
  execFileSync('git', ['init', '-q', '--bare', '-b', 'main', bare]);
  execFileSync('git', ['init', '-q', '-b', 'main', work]);
  git(work, 'config', 'user.email', 't@example.com');
  git(work, 'config', 'user.name', 't');
  writeFileSync(path.join(work, 'hello.txt'), 'hello from the project\n');
  git(work, 'add', '-A');
  git(work, 'commit', '-q', '-m', 'first');
  git(work, 'push', '-q', bare, 'HEAD:main');
  const project = await t.api.post('/v1/projects', { name: 'relay site', url: bare });
  expect(project.status).toBe(201);
  const deadline = Date.now() + 20_000;
  while ((await t.api.get(`/v1/projects/${project.body.id}`)).body.status !== 'successful') {
    if (Date.now() > deadline) throw new Error('the project did not update');
    await new Promise((r) => setTimeout(r, 100));
  }
  const template = await t.api.post('/v1/templates', { name: 'relay from git', tool: 'bash', command: 'cat hello.txt', project_id: project.body.id, queue: 'edge' });
  expect(template.status).toBe(201);
  const launched = await t.api.post(`/v1/templates/${template.body.id}/launch`, {});
  expect(launched.status).toBe(201);
  const ended = await waitForRunEnd(t.api, launched.body.id, 30_000);
  expect(ended.status).toBe('succeeded');
  expect((await t.api.get(`/v1/runs/${launched.body.id}/logs`)).text).toBe('hello from the project\n');
});

test('an ansible run on a relay worker: per-host and per-task results and gathered facts come through the relay', async () => {
  const inventory = await t.api.post('/v1/inventories', {
    name: 'relay two',
    content: '[web]\nh1 ansible_connection=local ansible_python_interpreter=/usr/bin/python3\nh2 ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n',
  });
  expect(inventory.status).toBe(201);
  const playbook = '- hosts: all\n  tasks:\n    - name: system\n      ansible.builtin.debug:\n        msg: "system is {{ ansible_system }}"\n    - name: fail on h2\n      ansible.builtin.fail:\n        msg: h2 is broken\n      when: inventory_hostname == \'h2\'\n';
  const template = await t.api.post('/v1/templates', { name: 'relay play', tool: 'ansible', command: playbook, inventory_id: inventory.body.id, use_fact_cache: true, queue: 'edge' });
  expect(template.status).toBe(201);
  const launched = await t.api.post(`/v1/templates/${template.body.id}/launch`, {});
  expect(launched.status).toBe(201);
  const ended = await waitForRunEnd(t.api, launched.body.id, 120_000);
  expect(ended.status).toBe('failed');
  const doc = (await t.api.get(`/v1/runs/${launched.body.id}/evidence?format=json`)).body;
  expect(Object.fromEntries(doc.hosts.map((h: any) => [h.host, h.status]))).toEqual({ h1: 'ok', h2: 'failed' });
  expect(doc.tasks.map((task: any) => task.task)).toEqual(expect.arrayContaining(['system', 'fail on h2']));
  const facts = await t.api.get(`/v1/inventories/${inventory.body.id}/facts`);
  expect(facts.body.hosts.map((h: any) => [h.host, h.run_id])).toEqual([
    ['h1', launched.body.id],
    ['h2', launched.body.id],
  ]);
}, 150_000);

test('the relay refuses a wrong worker token (401), another run’s capability (403), and takes the holder’s end report', async () => {
  expect((await apiClient(t.url, 'not-the-worker-token-at-all').post('/relay/v1/claim', { worker: worker('by-hand') })).status).toBe(401);
  expect((await apiClient(t.url).get('/relay/v1/policies')).status).toBe(401);
  expect((await relay.get('/relay/v1/policies')).status).toBe(200);
  const bad = await relay.post('/relay/v1/claim', { worker: { ...worker('by-hand'), id: 'nope' } });
  expect(bad.status).toBe(400);
  expect(bad.body.field).toBe('worker.id');

  // A claim with nothing waiting holds for its wait, then answers 204.
  const asked = Date.now();
  expect((await relay.post('/relay/v1/claim', { worker: worker('by-hand'), wait_seconds: 1 })).status).toBe(204);
  expect(Date.now() - asked).toBeGreaterThanOrEqual(900);

  const first = await submit({ command: 'echo first', queue: 'by-hand' });
  const second = await submit({ command: 'echo second', queue: 'by-hand' });
  const claimA = await relay.post('/relay/v1/claim', { worker: worker('by-hand'), wait_seconds: 15 });
  expect(claimA.status).toBe(200);
  // Either may be claimed first: each run's attempt waits for a worker once its workflow has reached it.
  expect([first.id, second.id]).toContain(claimA.body.run_id);
  const other = claimA.body.run_id === first.id ? second : first;
  const capA = { 'cairn-capability': claimA.body.capability };
  // The holder renews its lease as a worker does, so a slow machine never lets it lapse mid-test.
  const stopRenewing = keepRenewing(claimA.body.run_id, capA);

  // A's capability opens nothing of B, and no capability opens nothing at all.
  const foreign = await relay.request('POST', `/relay/v1/runs/${other.id}/log`, { body: { data: Buffer.from('forged').toString('base64') }, headers: capA });
  expect(foreign.status).toBe(403);
  expect((await relay.request('GET', `/relay/v1/runs/${other.id}`, { headers: capA })).status).toBe(403);
  expect((await relay.post(`/relay/v1/runs/${claimA.body.run_id}/save`, { outcome: { kind: 'exited', exit_code: 0 } })).status).toBe(403);
  // A worker may not pose as the lifecycle.
  const posing = await relay.request('POST', `/relay/v1/runs/${claimA.body.run_id}/events`, { body: { events: [{ kind: 'run.finished', body: {} }] }, headers: capA });
  expect(posing.status).toBe(400);

  // The holder starts, logs and ends its run.
  const started = await relay.request('POST', `/relay/v1/runs/${claimA.body.run_id}/start`, { body: { worker: worker('by-hand'), work_root: '/tmp/nowhere' }, headers: capA });
  expect(started.status).toBe(200);
  expect(started.body).toMatchObject({ state: 'running', attempt: 1, execution: { binary: 'bash' } });
  expect((await heartbeat(claimA.body.run_id, capA)).body).toEqual({ action: 'continue' });
  expect((await relay.request('POST', `/relay/v1/runs/${claimA.body.run_id}/log`, { body: { data: Buffer.from('by hand\n').toString('base64') }, headers: capA })).status).toBe(204);
  expect((await relay.request('POST', `/relay/v1/runs/${claimA.body.run_id}/events`, { body: { events: [{ kind: 'worker.note', body: { said: 'hi' } }] }, headers: capA })).status).toBe(204);
  stopRenewing();
  const saved = await relay.request('POST', `/relay/v1/runs/${claimA.body.run_id}/save`, { body: { outcome: { kind: 'exited', exit_code: 0, signal: null } }, headers: capA });
  expect(saved.status).toBe(200);
  const endedA = await waitForRunEnd(t.api, claimA.body.run_id);
  expect(endedA.status).toBe('succeeded');
  expect((await t.api.get(`/v1/runs/${claimA.body.run_id}/logs`)).text).toBe('by hand\n');
  // Its capability is spent with its attempt.
  expect((await relay.request('POST', `/relay/v1/runs/${claimA.body.run_id}/log`, { body: { data: '' }, headers: capA })).status).toBe(403);

  // B is canceled while its holder runs it: the holder's next heartbeat is told to cancel.
  const claimB = await relay.post('/relay/v1/claim', { worker: worker('by-hand'), wait_seconds: 15 });
  expect(claimB.body.run_id).toBe(other.id);
  const capB = { 'cairn-capability': claimB.body.capability };
  // The holder heartbeats from its claim on, as a worker does (a slow machine must not let its
  // lease lapse while the cancel is asked), until a heartbeat tells it to cancel.
  let told: unknown;
  const hearing = (async () => {
    for (const deadline = Date.now() + 30_000; Date.now() < deadline; ) {
      told = (await heartbeat(claimB.body.run_id, capB)).body;
      if ((told as { action?: string })?.action === 'cancel') return;
      await new Promise((r) => setTimeout(r, 300));
    }
  })();
  await relay.request('POST', `/relay/v1/runs/${claimB.body.run_id}/start`, { body: { worker: worker('by-hand'), work_root: '/tmp/nowhere' }, headers: capB });
  expect((await t.api.post(`/v1/runs/${claimB.body.run_id}/cancel`, {})).status).toBeLessThan(300);
  await hearing;
  expect(told).toEqual({ action: 'cancel' });
  // A worker stopping its tool keeps renewing until it reports the end; so does this holder.
  const stopRenewingB = keepRenewing(claimB.body.run_id, capB);
  try {
    await relay.request('POST', `/relay/v1/runs/${claimB.body.run_id}/save`, { body: { outcome: { kind: 'canceled' } }, headers: capB });
  } finally {
    stopRenewingB();
  }
  expect((await waitForRunEnd(t.api, claimB.body.run_id)).status).toBe('canceled');
});

test('a waiting claim is woken by the attempt recorded for its queue (a NOTIFY), not at its next look', async () => {
  // The queue's dispatch is served from the first claim on: this one only starts it.
  expect((await relay.post('/relay/v1/claim', { worker: worker('woken'), wait_seconds: 1 })).status).toBe(204);
  const claiming = relay.post('/relay/v1/claim', { worker: worker('woken'), wait_seconds: 15 });
  // Past its first look: unwoken, it would look again 2 s after it.
  await new Promise((resolve) => setTimeout(resolve, 300));
  const run = await submit({ command: 'echo woken', queue: 'woken' });
  const claim = await claiming;
  expect(claim.status).toBe(200);
  expect(claim.body.run_id).toBe(run.id);
  const db = connectDatabase(t.databaseUrl, { max: 1 });
  try {
    const [lease] = await db<{ ms: number }[]>`SELECT (extract(epoch FROM claimed_at - dispatched_at) * 1000)::float8 AS ms FROM relay_leases WHERE run_id = ${run.id}`;
    expect(lease.ms).toBeLessThan(1000);
  } finally {
    await db.end();
  }
  const capability = { 'cairn-capability': claim.body.capability };
  const stopRenewing = keepRenewing(run.id, capability);
  try {
    expect((await relay.request('POST', `/relay/v1/runs/${run.id}/start`, { body: { worker: worker('woken'), work_root: '/tmp/nowhere' }, headers: capability })).status).toBe(200);
    expect((await relay.request('POST', `/relay/v1/runs/${run.id}/save`, { body: { outcome: { kind: 'exited', exit_code: 0, signal: null } }, headers: capability })).status).toBe(200);
  } finally {
    stopRenewing();
  }
  expect((await waitForRunEnd(t.api, run.id)).status).toBe('succeeded');
});

test('a holder silent past its lease has a stale capability: refused, and the next claim gets the run as a new attempt', async () => {
  const run = await submit({ command: 'true', queue: 'stale' });
  const first = await relay.post('/relay/v1/claim', { worker: worker('stale'), wait_seconds: 15 });
  expect(first.body.run_id).toBe(run.id);
  const stale = { 'cairn-capability': first.body.capability };
  await relay.request('POST', `/relay/v1/runs/${run.id}/start`, { body: { worker: worker('stale'), work_root: '/tmp/nowhere' }, headers: stale });
  // No heartbeat: after three renewal periods Temporal times the attempt out and retries it, and
  // the retry replaces the lease (reading the run renews nothing).
  const deadline = Date.now() + 20_000;
  while ((await relay.request('GET', `/relay/v1/runs/${run.id}`, { headers: stale })).status === 200) {
    if (Date.now() > deadline) throw new Error('the silent holder kept its lease');
    await new Promise((r) => setTimeout(r, 200));
  }
  expect((await relay.request('POST', '/relay/v1/heartbeat', { body: { run_id: run.id, worker: worker('stale') }, headers: stale })).status).toBe(403);
  expect((await relay.request('POST', `/relay/v1/runs/${run.id}/save`, { body: { outcome: { kind: 'exited', exit_code: 0 } }, headers: stale })).status).toBe(403);

  const second = await relay.post('/relay/v1/claim', { worker: worker('stale'), wait_seconds: 15 });
  expect(second.body).toMatchObject({ run_id: run.id });
  expect(second.body.attempt).toBeGreaterThan(first.body.attempt);
  const fresh = { 'cairn-capability': second.body.capability };
  const started = await relay.request('POST', `/relay/v1/runs/${run.id}/start`, { body: { worker: worker('stale'), work_root: '/tmp/nowhere' }, headers: fresh });
  expect(started.body).toMatchObject({ state: 'running', attempt: 2 });
  expect(started.body.preface).toContain('running it again (attempt 2)');
  await relay.request('POST', `/relay/v1/runs/${run.id}/save`, { body: { outcome: { kind: 'exited', exit_code: 0, signal: null } }, headers: fresh });
  expect(await waitForRunEnd(t.api, run.id)).toMatchObject({ status: 'succeeded', attempts: 2 });
  expect((await eventKinds(run.id)).filter((k) => k === 'run.requeued')).toHaveLength(1);
});

test('with a delivery key the execution travels sealed to it: only the holder of the private half opens it', async () => {
  const { generateKeyPairSync } = await import('node:crypto');
  const jose = await import('jose');
  const mine = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const other = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const publicJwk = mine.publicKey.export({ format: 'jwk' });

  const run = await submit({ command: 'echo sealed', queue: 'sealed' });
  const claim = await relay.post('/relay/v1/claim', { worker: worker('sealed'), wait_seconds: 15 });
  expect(claim.body.run_id).toBe(run.id);
  const cap = { 'cairn-capability': claim.body.capability };
  const privateSent = await relay.request('POST', `/relay/v1/runs/${run.id}/start`, {
    body: { worker: worker('sealed'), work_root: '/tmp/nowhere', delivery_key: mine.privateKey.export({ format: 'jwk' }) },
    headers: cap,
  });
  expect(privateSent.status).toBe(400);
  expect(privateSent.body.field).toBe('delivery_key');
  expect((await t.api.get(`/v1/runs/${run.id}`)).body.status).toBe('pending');

  const started = await relay.request('POST', `/relay/v1/runs/${run.id}/start`, { body: { worker: worker('sealed'), work_root: '/tmp/nowhere', delivery_key: publicJwk }, headers: cap });
  expect(started.status).toBe(200);
  expect(started.body).not.toHaveProperty('execution');
  // The run's record is its own to show; what the tool is given (argv, environment, files) is sealed.
  expect(started.text).not.toContain('"argv"');
  const opened = JSON.parse(new TextDecoder().decode((await jose.compactDecrypt(started.body.execution_sealed, mine.privateKey)).plaintext));
  expect(opened).toMatchObject({ binary: 'bash', argv: ['bash', 'script.sh'] });
  expect(Object.values(opened.files).join('\n')).toContain('echo sealed');
  await expect(jose.compactDecrypt(started.body.execution_sealed, other.privateKey)).rejects.toThrow();
  await relay.request('POST', `/relay/v1/runs/${run.id}/save`, { body: { outcome: { kind: 'exited', exit_code: 0, signal: null } }, headers: cap });
  expect((await waitForRunEnd(t.api, run.id)).status).toBe('succeeded');

  // A real worker with --delivery-key opens what is sealed to it and runs the run.
  const keyFile = path.join(tempDir('cairn-relay-key'), 'delivery.pem');
  writeFileSync(keyFile, mine.privateKey.export({ format: 'pem', type: 'pkcs8' }), { mode: 0o600 });
  await startRelayWorkerProcess('sealed-edge', ['--delivery-key', keyFile]);
  const remote = await submit({ command: 'echo "opened on the worker"', queue: 'sealed-edge' });
  expect(await waitForRunEnd(t.api, remote.id, 30_000)).toMatchObject({ status: 'succeeded' });
  expect((await t.api.get(`/v1/runs/${remote.id}/logs`)).text).toBe('opened on the worker\n');
});

test('cancel reaches the remote worker on its next call and stops the tool', async () => {
  await startRelayWorkerProcess('cancel-edge');
  const run = await submit({ command: 'echo begun; sleep 60; echo never', queue: 'cancel-edge' });
  await waitForLog(run.id, /begun/);
  const asked = Date.now();
  await t.api.post(`/v1/runs/${run.id}/cancel`, {});
  const ended = await waitForRunEnd(t.api, run.id, 15_000);
  expect(ended.status).toBe('canceled');
  expect(Date.now() - asked).toBeLessThan(10_000);
  expect((await t.api.get(`/v1/runs/${run.id}/logs`)).text).not.toContain('never');
});

test('a run on a relay worker past its timeout ends timed out, and its worker stops the tool', async () => {
  await startRelayWorkerProcess('timeout-edge');
  const tag = String(Date.now() % 1_000_000).padStart(6, '0');
  const run = await submit({ command: `echo begun; sleep 61.${tag}; echo never`, queue: 'timeout-edge', timeout: 6 });
  await waitForLog(run.id, /begun/);
  const ended = await waitForRunEnd(t.api, run.id, 30_000);
  expect(ended).toMatchObject({ status: 'failed', error: 'timed out after 6 s' });
  // Temporal timed the execution out; the worker's next lease renewal is refused and it stops the tool.
  await waitUntil('the timed out tool to be stopped', async () => processesMatching(`sleep 61[.]${tag}`).length === 0, 10_000);
  expect((await t.api.get(`/v1/runs/${run.id}/logs`)).text).toBe('begun\n');
});

test('a relay worker killed mid-run loses its lease: the run is requeued to another worker and ends once', async () => {
  // Two workers on the queue; the one that holds the run is killed.
  const both = await Promise.all([startRelayWorkerProcess('lossy'), startRelayWorkerProcess('lossy')]);
  const ids = await Promise.all(both.map(async (w) => (await w.waitFor(/"workerId":"(wrk_[^"]+)"/))[1]));
  // The first attempt waits until its worker is killed, however long a busy machine takes to get there.
  const run = await submit({
    command: 'echo "attempt $CAIRN_RUN_ATTEMPT"; if [ "$CAIRN_RUN_ATTEMPT" = 1 ]; then sleep 120; fi; echo "done $CAIRN_RUN_ATTEMPT"',
    queue: 'lossy',
  });
  await waitForLog(run.id, /attempt 1/);
  const listed = (await t.api.get('/v1/workers')).body.workers;
  const holder = listed.find((w: any) => ids.includes(w.id) && w.runs_held === 1);
  expect(holder).toBeDefined();
  await both[ids.indexOf(holder.id)].stop('SIGKILL');
  const ended = await waitForRunEnd(t.api, run.id, 30_000);
  expect(ended).toMatchObject({ status: 'succeeded', attempts: 2 });
  const log = (await t.api.get(`/v1/runs/${run.id}/logs`)).text;
  expect(log).toMatch(/^attempt 1\n\n\[cairn\] the worker running this run was lost; running it again \(attempt 2\)\nattempt 2\ndone 2\n$/);
  const kinds = await eventKinds(run.id);
  expect(kinds.filter((k) => k === 'run.requeued')).toHaveLength(1);
  expect(kinds.filter((k) => k === 'run.finished')).toHaveLength(1);
});
