import { readFileSync } from 'node:fs';
import path from 'node:path';
import { testLicense } from '../support/license';
import { startTsScript, type ChildHandle } from '../support/processes';
import { checkExposition, familyOf, type PromReport } from '../support/prom-check';
import { startTestServer, testTemporalAddress, waitForRun, waitForRunEnd, type TestServer } from '../support/server';

/**
 * `GET /metrics` (spec part A 4.15): run, fleet, queue-depth and worker gauges and a run-duration
 * histogram, read by the Prometheus project's own parser and linter (test/support/prom-check.ts),
 * and every series as docs/operations.md documents it.
 */

let t: TestServer;
/** Runs submitted to the gpu queue, which no worker serves until the worker test starts one. */
const gpuRuns: string[] = [];
let license: { file: string; publicJwk: object };
const children: ChildHandle[] = [];

beforeAll(async () => {
  license = await testLicense('team');
  t = await startTestServer({ CAIRN_LICENSE_FILE: license.file, CAIRN_LEASE_SECONDS: '3' }, { licenseKeys: [license.publicJwk] });
  const policy = await t.api.post('/v1/policies', { name: 'held', command_contains: 'needs-approval' });
  if (policy.status !== 201) throw new Error(policy.text);
});
afterAll(async () => {
  for (const child of children) await child.stop('SIGKILL');
  await t?.stop();
});

async function scrape(): Promise<PromReport> {
  const res = await t.api.get('/metrics');
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return checkExposition(res.text);
}

async function submit(body: Record<string, unknown>): Promise<any> {
  const res = await t.api.post('/v1/runs', { tool: 'bash', command: 'true', ...body });
  if (res.status !== 201) throw new Error(`${res.status} ${res.text}`);
  return res.body;
}

/** One gauge's samples as `label values -> value`, keyed by the labels named, in that order. */
function gauge(report: PromReport, name: string, ...labels: string[]): Record<string, number> {
  const family = familyOf(report, name);
  expect(family.type).toBe('GAUGE');
  return Object.fromEntries(family.samples.map((s) => [labels.map((l) => s.labels[l] ?? '').join('/'), s.value!]));
}

test('queue depth is counted per queue, the default queue as "", held runs and parents apart', async () => {
  for (const queue of ['gpu', 'gpu', 'arm']) {
    const run = await submit({ command: `echo on ${queue}`, queue });
    if (queue === 'gpu') gpuRuns.push(run.id);
  }
  await submit({ command: 'echo needs-approval', queue: 'gpu' });
  const pipeline = await t.api.post('/v1/pipelines', { queue: 'arm', steps: [{ tool: 'bash', command: 'true' }] });
  expect(pipeline.status).toBe(201);
  const report = await scrape();
  expect(report.problems).toEqual([]);
  // The pipeline's step waits on arm; its parent executes nothing and is not counted.
  expect(gauge(report, 'cairn_queue_depth', 'queue')).toEqual({ '': 0, gpu: 2, arm: 2 });
});

test('worker gauges: every worker process by queue and lease, this process\'s slots, busy count and state', async () => {
  const worker = startTsScript('test/support/worker-process.ts', [JSON.stringify(license.publicJwk), '--queue', 'gpu'], {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    DATABASE_URL: t.databaseUrl,
    TEMPORAL_ADDRESS: testTemporalAddress(),
    CAIRN_POOL_QUEUE: t.config.poolQueue,
    CAIRN_LEASE_SECONDS: '3',
    CAIRN_LICENSE_FILE: license.file,
    CAIRN_LOG_LEVEL: 'info',
  });
  children.push(worker);
  await worker.waitFor(/worker polling/);
  // The gpu runs drain on the new worker, and end there.
  for (const id of gpuRuns) expect((await waitForRunEnd(t.api, id, 60_000)).status).toBe('succeeded');
  const deadline = Date.now() + 60_000;
  let report: PromReport;
  for (;;) {
    report = await scrape();
    if (gauge(report, 'cairn_queue_depth', 'queue').gpu === 0) break;
    if (Date.now() > deadline) throw new Error(`the gpu queue did not drain: ${JSON.stringify(gauge(report, 'cairn_queue_depth', 'queue'))}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  expect(report.problems).toEqual([]);
  expect(gauge(report, 'cairn_workers', 'queue', 'lease')).toEqual({ '/fresh': 1, 'gpu/fresh': 1 });
  expect(gauge(report, 'cairn_worker_slots')).toEqual({ '': t.config.poolSize });
  expect(gauge(report, 'cairn_worker_up')).toEqual({ '': 1 });
  expect(gauge(report, 'cairn_worker_busy')).toEqual({ '': 0 });

  // Killed, it shows as lost once it has missed three renewals.
  await worker.stop('SIGKILL');
  const lostBy = Date.now() + 15_000;
  for (;;) {
    const workers = gauge(await scrape(), 'cairn_workers', 'queue', 'lease');
    if (workers['gpu/lost'] === 1) {
      expect(workers).toEqual({ '/fresh': 1, 'gpu/lost': 1 });
      break;
    }
    if (Date.now() > lostBy) throw new Error(`the killed worker never showed as lost: ${JSON.stringify(workers)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}, 120_000);

test('run gauges, the finished counter and the duration histogram, with buckets that add up', async () => {
  const run = await submit({ command: 'sleep 0.3' });
  const running = await submit({ command: 'sleep 30' });
  await waitForRunEnd(t.api, run.id);
  await waitForRun(t.api, running.id, (r) => r.status === 'running');
  const report = await scrape();
  expect(report.problems).toEqual([]);
  const runs = gauge(report, 'cairn_runs', 'status', 'tool');
  expect(runs['succeeded/bash']).toBeGreaterThanOrEqual(1);
  expect(runs['running/bash']).toBe(1);
  expect(runs['held/bash']).toBe(1);
  expect(gauge(report, 'cairn_worker_busy')).toEqual({ '': 1 });
  const finished = familyOf(report, 'cairn_runs_finished_total');
  expect(finished.type).toBe('COUNTER');
  const succeeded = finished.samples.find((s) => s.labels.status === 'succeeded' && s.labels.tool === 'bash')!;
  expect(succeeded.value).toBeGreaterThanOrEqual(1);
  // Every run reads and writes the database: the statement counter moves with the runs.
  const statements = familyOf(report, 'cairn_db_statements_total');
  expect(statements.type).toBe('COUNTER');
  expect(statements.samples[0].value).toBeGreaterThan(0);
  const submitted = familyOf(report, 'cairn_runs_submitted_total');
  expect(submitted.samples.find((s) => s.labels.tool === 'bash')!.value).toBeGreaterThanOrEqual(6);
  const duration = familyOf(report, 'cairn_run_duration_seconds');
  expect(duration.type).toBe('HISTOGRAM');
  const bash = duration.samples.find((s) => s.labels.tool === 'bash' && s.labels.status === 'succeeded')!;
  expect(bash.count).toBe(succeeded.value);
  expect(bash.sum).toBeGreaterThanOrEqual(0.3);
  const counts = bash.buckets!.map((b) => b.count);
  expect(counts).toEqual([...counts].sort((a, b) => a - b));
  expect(bash.buckets!.find((b) => b.le === '0.25')!.count).toBeLessThan(bash.count!);
  await t.api.post(`/v1/runs/${running.id}/cancel`, {});
});

test('fleet gauges: hosts by the verdict of their latest run', async () => {
  const LOCAL = 'ansible_connection=local ansible_python_interpreter=/usr/bin/python3';
  const inventory = await t.api.post('/v1/inventories', { name: 'metrics hosts', content: `[web]\nfine1 ${LOCAL}\nfine2 ${LOCAL}\nbroken1 ${LOCAL}\n` });
  const play =
    "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.debug:\n        msg: here\n    - ansible.builtin.fail:\n        msg: broken\n      when: inventory_hostname == 'broken1'\n";
  const run = await submit({ tool: 'ansible', command: play, inventory_id: inventory.body.id });
  await waitForRunEnd(t.api, run.id, 120_000);
  const report = await scrape();
  expect(report.problems).toEqual([]);
  expect(gauge(report, 'cairn_fleet_hosts', 'status')).toEqual({ ok: 2, failed: 1 });
}, 180_000);

test('every series is documented in docs/operations.md with its type and labels, and nothing documented is missing', async () => {
  const report = await scrape();
  const docs = readFileSync(path.join(__dirname, '../../docs/operations.md'), 'utf8');
  const lines = docs.slice(docs.indexOf('| series | type | labels | meaning |')).split('\n');
  const rows = lines.slice(2, lines.findIndex((line) => !line.startsWith('|')));
  const documented = new Map(
    rows.map((line) => {
      const [name, type, labels] = line.split('|').slice(1).map((cell) => cell.trim());
      return [name.replace(/`/g, ''), { type: type.toUpperCase(), labels: [...labels.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]).sort() }];
    }),
  );
  expect([...documented.keys()].sort()).toEqual(report.families.map((f) => f.name).sort());
  for (const family of report.families) {
    const doc = documented.get(family.name)!;
    expect({ name: family.name, type: doc.type }).toEqual({ name: family.name, type: family.type });
    const labels = [...new Set(family.samples.flatMap((s) => Object.keys(s.labels)))].sort();
    expect({ name: family.name, labels: doc.labels }).toEqual({ name: family.name, labels });
  }
});
