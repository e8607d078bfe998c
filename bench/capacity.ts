import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type postgres from 'postgres';
import { machineCpuTicks, processTable, processTreeCpuSeconds } from '../embedded/process-cpu';
import { readServiceState } from '../embedded/state';
import { mapLimit } from './concurrency';
import { sampleWaits } from './pg-waits';
import { startServerProcess, startWorkerProcess, type BenchEnvironment, type InstallProcess, type Teardown } from './environment';
import { benchClient, type BenchClient } from './http';
import type { Section } from './report';
import { submitTrue, untilRunsEnded } from './run-client';
import { msSince, sleep } from './stats';

const RUNS = Number(process.env.CAIRN_BENCH_CAPACITY_RUNS ?? 300);
const IN_FLIGHT = 50;
const WARMUP = 20;
/** Seconds each shape is watched with nothing submitted: what its processes cost while idle. */
const IDLE_S = 10;
const TIMEOUT_MS = 600_000;
/** The servers execute one run at a time (as in test/integration/scale-out.test.ts), the workers carry the load. */
const SERVER_SLOTS = 1;
const WORKER_SLOTS = 8;
/** The share of a core the model plans each process to use at the target rates: headroom for bursts and failover. */
const TARGET_UTILIZATION = 0.6;
const TARGET_RATES = [100, 1000];
const STORED_RUNS = 10_000_000;

/** The parts of an install whose CPU the model counts, each a process tree on this machine. */
const COMPONENTS = ['serve', 'worker', 'postgres', 'temporal', 'bench'] as const;
type Component = (typeof COMPONENTS)[number];
/** The components a deployment sizes (the bench's client is not one). */
const DEPLOYED = ['serve', 'worker', 'postgres', 'temporal'] as const;
type PerComponent = Record<Component, number>;

const LABEL: Record<Component, string> = {
  serve: '`cairn serve` (API, outbox, workflows, 1 slot)',
  worker: '`cairn worker` (workflows, runs, their sandboxes)',
  postgres: 'PostgreSQL',
  temporal: 'Temporal dev server',
  bench: 'bench process (HTTP client, first server)',
};

interface Shape {
  servers: InstallProcess[];
  workers: InstallProcess[];
  clients: BenchClient[];
}

interface Watched {
  postgresPid: number;
  temporalPid: number;
}

function cpuNow(shape: Shape, watched: Watched): PerComponent {
  // One read of /proc for every tree, so they are read at the same moment.
  const table = processTable();
  const sum = (processes: InstallProcess[]) => processes.reduce((total, p) => total + processTreeCpuSeconds(p.pid, table), 0);
  return {
    serve: sum(shape.servers),
    worker: sum(shape.workers),
    postgres: processTreeCpuSeconds(watched.postgresPid, table),
    temporal: processTreeCpuSeconds(watched.temporalPid, table),
    // This process alone: the servers, workers and embedded services it started are counted above.
    bench: ownCpuSeconds(),
  };
}

function ownCpuSeconds(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

const minus = (a: PerComponent, b: PerComponent): PerComponent => Object.fromEntries(COMPONENTS.map((c) => [c, a[c] - b[c]])) as PerComponent;
const total = (a: PerComponent) => COMPONENTS.reduce((sum, c) => sum + a[c], 0);

/** CPU seconds each component spends per second with nothing submitted. */
async function idleRates(shape: Shape, watched: Watched): Promise<PerComponent> {
  const before = cpuNow(shape, watched);
  await sleep(IDLE_S * 1000);
  const used = minus(cpuNow(shape, watched), before);
  return Object.fromEntries(COMPONENTS.map((c) => [c, used[c] / IDLE_S])) as PerComponent;
}

interface Batch {
  rate: number;
  seconds: number;
  /** CPU seconds per component over the batch. */
  cpu: PerComponent;
  /** The machine's busy share of all its cores over the batch. */
  machineBusy: number;
  /** Bytes the install's database grew by, per run. */
  bytesPerRun: number;
  /** What PostgreSQL's sessions were doing over the batch. */
  waits: string;
}

/** `count` trivial runs, IN_FLIGHT submissions at once spread over the shape's servers, timed from the first POST until every one has ended. */
async function batch(shape: Shape, watched: Watched, sql: postgres.Sql, count: number): Promise<Batch> {
  const [{ size: sizeBefore }] = await sql<{ size: string }[]>`SELECT pg_database_size(current_database())::text AS size`;
  const cpuBefore = cpuNow(shape, watched);
  const ticksBefore = machineCpuTicks();
  const sampler = sampleWaits(sql);
  const start = process.hrtime.bigint();
  const since = Date.now();
  const ids = await mapLimit(count, IN_FLIGHT, async (i) => (await submitTrue(shape.clients[i % shape.clients.length])).id);
  await untilRunsEnded(sql, 'capacity', { ids, since, timeoutMs: TIMEOUT_MS });
  const seconds = msSince(start) / 1000;
  const waits = await sampler.stop();
  const cpu = minus(cpuNow(shape, watched), cpuBefore);
  const ticksAfter = machineCpuTicks();
  const failed = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM runs WHERE id IN ${sql(ids)} AND status <> 'succeeded'`;
  if (failed[0].n > 0) throw new Error(`capacity: ${failed[0].n} of ${count} runs did not succeed`);
  const [{ size: sizeAfter }] = await sql<{ size: string }[]>`SELECT pg_database_size(current_database())::text AS size`;
  const machineBusy = ticksBefore && ticksAfter ? (ticksAfter.busy - ticksBefore.busy) / (ticksAfter.total - ticksBefore.total) : Number.NaN;
  return { rate: count / seconds, seconds, cpu, machineBusy, bytesPerRun: (Number(sizeAfter) - Number(sizeBefore)) / count, waits };
}

/** A shape measured: its idle cost, one batch, and the CPU each component spent per run beyond idling. */
interface Measured {
  idle: PerComponent;
  batch: Batch;
  perRun: PerComponent;
}

/** Warms the shape up, lets it settle, watches it idle, then runs the batch. */
async function measureShape(shape: Shape, watched: Watched, sql: postgres.Sql): Promise<Measured> {
  await mapLimit(WARMUP, IN_FLIGHT, (i) => submitTrue(shape.clients[i % shape.clients.length]));
  await sleep(3000);
  const idle = await idleRates(shape, watched);
  const measured = await batch(shape, watched, sql, RUNS);
  const perRun = Object.fromEntries(COMPONENTS.map((c) => [c, Math.max(0, measured.cpu[c] - idle[c] * measured.seconds) / RUNS])) as PerComponent;
  return { idle, batch: measured, perRun };
}

/** The embedded Temporal dev server's pid, on record in the data dir. */
export async function temporalPid(env: BenchEnvironment): Promise<number> {
  const pid = (await readServiceState(env.server.context.config.dataDir, 'temporal'))?.pid;
  if (!pid) throw new Error("the embedded Temporal dev server's pid is not on record");
  return pid;
}

/**
 * The postmaster's pid: the embedded cluster's, on record in the data dir; otherwise the first
 * line of postmaster.pid in the cluster's data directory (read by PostgreSQL, which needs a
 * superuser connection, as BENCH_DATABASE_URL's usually is on a bench machine).
 */
export async function postmasterPid(env: BenchEnvironment): Promise<number> {
  const embedded = (await readServiceState(env.server.context.config.dataDir, 'postgres'))?.pid;
  if (embedded) return embedded;
  const [{ pid }] = await env.sql<{ pid: string }[]>`SELECT pg_read_file('postmaster.pid', 0, 16) AS pid`;
  return Number(pid.split('\n')[0]);
}

/**
 * (s) Capacity: what one run costs each part of an install in CPU, and whether that predicts a
 * scaled-out install. First one `cairn serve` and one `cairn worker` (separate processes on one
 * pool queue) run a batch; each component's CPU over the batch, less what it spends idle, over the
 * runs, is its cost per run. The model: with the CPU the components got in that batch, a shape
 * runs (CPU available - its processes' idle CPU) / (CPU per run) runs a second. Then a second
 * server and a second worker join and the same batch runs through both servers; the measured rate
 * is set beside the predicted one (budget: within 20%). The per-run costs give the cores each
 * component needs at 100 and 1,000 runs a second, and the database size per run gives PostgreSQL's
 * size for 10 million stored runs (docs/operations.md, "Capacity model").
 */
export async function capacityBenchmark(env: BenchEnvironment, teardown: Teardown): Promise<Section> {
  const watched: Watched = { postgresPid: await postmasterPid(env), temporalPid: await temporalPid(env) };
  const placement = { poolQueue: `cairn-bench-capacity-${randomBytes(4).toString('hex')}` };
  const addServer = async (shape: Shape) => {
    const server = await startServerProcess(env, teardown, { ...placement, poolSize: SERVER_SLOTS });
    const client = benchClient(server.url, env.adminToken);
    teardown.push('closing a capacity server\'s HTTP client', async () => client.close());
    shape.servers.push(server);
    shape.clients.push(client);
  };
  const addWorker = async (shape: Shape) => shape.workers.push(await startWorkerProcess(env, teardown, { ...placement, poolSize: WORKER_SLOTS }));

  const shape: Shape = { servers: [], workers: [], clients: [] };
  await addServer(shape);
  await addWorker(shape);
  const { idle: idleOne, batch: one, perRun } = await measureShape(shape, watched, env.sql);
  // The CPU the components got, each second of the batch: the model's budget for the next shape.
  const cpuPerSecond = total(one.cpu) / one.seconds;

  await Promise.all([addServer(shape), addWorker(shape)]);
  const { idle: idleTwo, batch: two, perRun: perRunTwo } = await measureShape(shape, watched, env.sql);
  // Stopped now (the teardown would only at the end of the pass), so the sections after this one
  // share the machine with none of its processes.
  await Promise.all([...shape.servers, ...shape.workers].map((p) => p.stop()));
  // Predicted from the first shape's costs and the second's idle CPU, measured before its batch.
  const predicted = (cpuPerSecond - total(idleTwo)) / total(perRun);

  const ms = (s: number) => `${(s * 1000).toFixed(1)} ms`;
  const cores = (rate: number, c: Component) => (rate * perRun[c]) / TARGET_UTILIZATION;
  const deployment = TARGET_RATES.map(
    (rate) =>
      `at ${rate} runs/s (${TARGET_UTILIZATION * 100}% of each core): ` +
      DEPLOYED.map((c) => `${c} ${cores(rate, c).toFixed(1)} cores`).join(', ') +
      `; worker slots for runs of D seconds: ${rate} x D`,
  );
  return {
    rows: [
      { metric: `capacity: 1 serve + 1 worker, ${RUNS} runs, ${IN_FLIGHT} in flight`, value: one.rate, baseline: one.rate, unit: 'runs/s' },
      { metric: 'capacity: 2 serve + 2 workers, measured', value: two.rate, baseline: predicted, unit: 'runs/s' },
      { metric: 'capacity: measured over the model\'s prediction', value: two.rate / predicted, baseline: 1, unit: 'x', budget: { min: 0.8, max: 1.2 } },
      ...COMPONENTS.map((c) => ({ metric: `capacity: CPU per run, ${LABEL[c]}`, value: perRun[c] * 1000, baseline: perRunTwo[c] * 1000, unit: 'ms' })),
      { metric: 'capacity: database growth per run (trivial run)', value: one.bytesPerRun / 1024, baseline: two.bytesPerRun / 1024, unit: 'KiB' },
    ],
    notes: [
      `capacity: ${os.availableParallelism()} cores; servers ${SERVER_SLOTS} slot each, workers ${WORKER_SLOTS}; runs are bash -c true submitted through the servers in turn. ` +
        `One of each: ${one.rate.toFixed(1)} runs/s in ${one.seconds.toFixed(1)} s, machine ${(one.machineBusy * 100).toFixed(0)}% busy, the components ${cpuPerSecond.toFixed(2)} cores; ` +
        `idle ${COMPONENTS.map((c) => `${c} ${(idleOne[c] * 100).toFixed(1)}%`).join(', ')} of a core. ` +
        `Two of each: ${two.rate.toFixed(1)} runs/s in ${two.seconds.toFixed(1)} s, machine ${(two.machineBusy * 100).toFixed(0)}% busy, the components ${(total(two.cpu) / two.seconds).toFixed(2)} cores; ` +
        `idle ${COMPONENTS.map((c) => `${c} ${(idleTwo[c] * 100).toFixed(1)}%`).join(', ')}. ` +
        `Predicted (${cpuPerSecond.toFixed(2)} cores - ${total(idleTwo).toFixed(2)} idle) / ${ms(total(perRun))} per run = ${predicted.toFixed(1)} runs/s.`,
      `capacity: per run (one of each; baseline column two of each): ${COMPONENTS.map((c) => `${c} ${ms(perRun[c])}`).join(', ')}; ` +
        `runs/s per core: ${DEPLOYED.map((c) => `${c} ${(1 / perRun[c]).toFixed(0)}`).join(', ')}. ` +
        deployment.join('; ') +
        `. ${STORED_RUNS.toLocaleString('en')} stored runs of this kind: ${((one.bytesPerRun * STORED_RUNS) / 2 ** 30).toFixed(1)} GiB of database, plus their logs.`,
      `capacity: PostgreSQL over the batch, one of each: ${one.waits}`,
      `capacity: PostgreSQL over the batch, two of each: ${two.waits}`,
    ],
  };
}
