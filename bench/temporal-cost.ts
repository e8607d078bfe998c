import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Client } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import type postgres from 'postgres';
import { mapLimit } from './concurrency';
import type { BenchClient } from './http';
import type { Section } from './report';
import { countWithStatus, submitTrue } from './run-client';
import { describeActions, historyCost, processesStarted, transactionsCommitted, type HistoryCost } from './run-cost';
import { startStatementTally, statementsSentSoFar, statementTally } from '../store/db';
import { machineCpuTicks, processTable, processTreeCpuSeconds, TICKS_PER_SECOND } from '../embedded/process-cpu';
import { spawnTrue } from './spawn-baseline';
import { trueStarter } from './true-starter';
import type { RunIsolationSettings } from '../runtime/sandbox-setup';
import { msSince, percentile, sleep } from './stats';

const RUNS = Number(process.env.CAIRN_BENCH_COST_RUNS ?? 500);
const IN_FLIGHT = 50;
const WARMUP = 20;
const POLL_MS = 100;
const TIMEOUT_MS = 300_000;
/** Statement kinds the per-run breakdown names, most sent first. */
const TALLY_KINDS = 14;
/** Histories read for the per-run event and action counts (each side). */
const HISTORY_SAMPLE = 50;

export interface TemporalTarget {
  temporalAddress: string;
  namespace: string;
  /** The Cairn worker's settings, copied onto the bare worker. */
  poolSize: number;
  /** The server's sandbox settings: the sandboxed bare batches start their tool in the same sandbox. */
  isolation: RunIsolationSettings;
  /** The Temporal dev server's and PostgreSQL's process trees, whose CPU each batch is charged. */
  temporalPid: number;
  postgresPid: number;
}

/**
 * CPU seconds so far, split the way a run's cost is: the machine's (every core); the Temporal dev
 * server's and PostgreSQL's process trees; this process's own (every thread, and the children it
 * has reaped: the in-process server and the benchmark's client, or the bare worker, its client and
 * the `bash` it spawned); and its living children apart from those two (the server's tool launcher,
 * the sandboxes it started and their tools). What is left of the machine's is the rest: processes
 * reaped by others (a sandbox whose parent ended first goes to init) and the kernel's own threads.
 */
export interface CpuSoFar {
  machine: number;
  temporal: number;
  postgres: number;
  process: number;
  children: number;
  /** Not the machine's: what the hypervisor gave other guests while this one wanted to run. */
  steal: number;
}

const CPU_PARTS = ['machine', 'temporal', 'postgres', 'process', 'children', 'steal'] as const;

export function cpuSoFar(target: Pick<TemporalTarget, 'temporalPid' | 'postgresPid'>): CpuSoFar {
  const table = processTable();
  const ticks = machineCpuTicks();
  const own = table.get(process.pid)?.cpu ?? Number.NaN;
  return {
    machine: ticks ? ticks.busy / TICKS_PER_SECOND : Number.NaN,
    temporal: processTreeCpuSeconds(target.temporalPid, table),
    postgres: processTreeCpuSeconds(target.postgresPid, table),
    process: own,
    children: processTreeCpuSeconds(process.pid, table, [target.temporalPid, target.postgresPid]) - own,
    steal: ticks ? ticks.steal / TICKS_PER_SECOND : Number.NaN,
  };
}

/** Each part of a CPU reading, worked out by `part`. */
const eachPart = (part: (key: (typeof CPU_PARTS)[number]) => number) => Object.fromEntries(CPU_PARTS.map((key) => [key, part(key)])) as unknown as CpuSoFar;

/** A batch's CPU per run, in milliseconds. */
function cpuPerRun(before: CpuSoFar, after: CpuSoFar, runs: number): CpuSoFar {
  return eachPart((key) => ((after[key] - before[key]) * 1000) / runs);
}

/** The rest of the machine's CPU: what none of the measured parts account for. */
const restOf = (cpu: CpuSoFar) => cpu.machine - cpu.temporal - cpu.postgres - cpu.process - cpu.children;

/**
 * (a) Cairn's cost over Temporal's own: the same batch of trivial runs, 50 submissions in flight,
 * through Cairn (POST /v1/runs, `bash -c true`) and as a bare Temporal workflow whose one activity
 * spawns `bash -c true`, on the same dev server with the worker's concurrency settings. Throughput
 * is the batch over the time from its first submission to its last end; latency is each run's
 * start to end as the record keeps it (Cairn: created_at to finished_at; bare: the workflow's start
 * and close times in Temporal). The bare batch runs once before Cairn's and once after, and the
 * baseline is the two together: a batch run later on the same dev server costs it more.
 *
 * Beside it, the same bare workflow whose activity starts the tool as Cairn's worker does, in the
 * run's sandbox with the server's settings, also once just before Cairn's batch and once just
 * after: what is left over that is what Cairn itself adds (records, events, audit, the API), apart
 * from what isolating a run costs.
 */
export async function temporalCostBenchmark(client: BenchClient, sql: postgres.Sql, target: TemporalTarget): Promise<Section> {
  const bareBefore = await bareBatch(target, 'bash');
  const sandboxedBefore = await bareBatch(target, 'sandboxed');

  await mapLimit(WARMUP, IN_FLIGHT, () => submitTrue(client));
  await waitIdle(client, process.hrtime.bigint());
  const before = { statements: statementsSentSoFar(), transactions: await transactionsCommitted(sql), processes: processesStarted() };
  startStatementTally();
  const cpuBefore = cpuSoFar(target);
  const start = process.hrtime.bigint();
  const ids = await mapLimit(RUNS, IN_FLIGHT, async () => (await submitTrue(client)).id);
  const polls = await waitIdle(client, start);
  const elapsed = msSince(start);
  const cpu = cpuPerRun(cpuBefore, cpuSoFar(target), RUNS);
  const tally = statementTally();
  const after = { statements: statementsSentSoFar(), transactions: await transactionsCommitted(sql), processes: processesStarted() };
  // The batch's end is found by polling the API: what those polls cost is measured and taken off.
  const pollCost = await costPerPoll(client, sql);
  const perRun = {
    statements: (after.statements - before.statements - polls * pollCost.statements) / RUNS,
    transactions: (after.transactions - before.transactions - polls * pollCost.transactions) / RUNS,
    processes: (after.processes - before.processes) / RUNS,
  };
  const cairnHistory = await withTemporalClient(target, (temporal) => historyCost(temporal, ids.slice(0, HISTORY_SAMPLE)));
  const rows = await sql<{ ms: number; status: string }[]>`
    SELECT extract(epoch FROM finished_at - created_at) * 1000 AS ms, status FROM runs WHERE id IN ${sql(ids)}`;
  if (rows.some((r) => r.status !== 'succeeded')) throw new Error(`cost: ${rows.filter((r) => r.status !== 'succeeded').length} runs did not succeed`);
  const cairnLatency = rows.map((r) => Number(r.ms));
  const cairnRate = RUNS / (elapsed / 1000);

  // The dev server's cost per workflow grows with the workflows it holds (SQLite, caches), so a
  // batch run second pays more than the same batch run first: the baseline is the bare batch's
  // mean over one before Cairn's and one after.
  const sandboxedAfter = await bareBatch(target, 'sandboxed');
  const bareAfter = await bareBatch(target, 'bash');
  const bare = bothBatches(bareBefore, bareAfter);
  const sandboxed = bothBatches(sandboxedBefore, sandboxedAfter);
  const rateRatio = cairnRate / bare.rate;
  const p50Ratio = percentile(cairnLatency, 50) / percentile(bare.latency, 50);
  return {
    rows: [
      { metric: `cost over Temporal: throughput (${RUNS} runs, ${IN_FLIGHT} in flight)`, value: cairnRate, baseline: bare.rate, unit: 'runs/s' },
      { metric: 'cost over Temporal: throughput ratio to bare', value: rateRatio, baseline: 1, unit: 'x', budget: { min: 0.9 } },
      { metric: 'cost over Temporal: run latency p50 (start to end)', value: percentile(cairnLatency, 50), baseline: percentile(bare.latency, 50), unit: 'ms' },
      { metric: 'cost over Temporal: p50 ratio to bare', value: p50Ratio, baseline: 1, unit: 'x', budget: { max: 1.1 } },
      // Beside the same workflow starting the tool as a worker does, in the run's sandbox: what
      // Cairn costs over Temporal and the sandbox together (no budget of its own: see the note).
      { metric: 'cost over Temporal: throughput, bare in the sandbox', value: sandboxed.rate, baseline: bare.rate, unit: 'runs/s' },
      { metric: 'cost over Temporal: throughput ratio to bare in the sandbox', value: cairnRate / sandboxed.rate, baseline: 1, unit: 'x' },
      { metric: 'cost over Temporal: p50 ratio to bare in the sandbox', value: percentile(cairnLatency, 50) / percentile(sandboxed.latency, 50), baseline: 1, unit: 'x' },
      { metric: 'per run: PostgreSQL statements (round trips)', value: perRun.statements, baseline: 0, unit: '' },
      { metric: 'per run: PostgreSQL transactions committed', value: perRun.transactions, baseline: 0, unit: '' },
      { metric: 'per run: Temporal history events', value: cairnHistory.events, baseline: bare.history.events, unit: '' },
      { metric: 'per run: Temporal billable actions', value: cairnHistory.actions, baseline: bare.history.actions, unit: '' },
      { metric: 'per run: processes started', value: perRun.processes, baseline: bare.processesPerRun, unit: '' },
      { metric: 'per run: CPU of the machine (every process)', value: cpu.machine, baseline: bare.cpu.machine, unit: 'ms' },
      { metric: 'per run: CPU of the Temporal dev server', value: cpu.temporal, baseline: bare.cpu.temporal, unit: 'ms' },
      { metric: 'per run: CPU of PostgreSQL', value: cpu.postgres, baseline: bare.cpu.postgres, unit: 'ms' },
      { metric: 'per run: CPU of the server (bare: the worker)', value: cpu.process, baseline: bare.cpu.process, unit: 'ms' },
      { metric: 'per run: CPU of the tool launcher, sandboxes, tools', value: cpu.children, baseline: bare.cpu.children, unit: 'ms' },
      { metric: 'per run: CPU of the rest of the machine', value: restOf(cpu), baseline: restOf(bare.cpu), unit: 'ms' },
      { metric: 'per run: CPU of the machine, bare in the sandbox', value: sandboxed.cpu.machine, baseline: bare.cpu.machine, unit: 'ms' },
      { metric: 'per run: CPU of the tool launcher, sandboxes, tools, bare in the sandbox', value: sandboxed.cpu.children, baseline: bare.cpu.children, unit: 'ms' },
      { metric: 'per run: CPU of the rest of the machine, bare in the sandbox', value: restOf(sandboxed.cpu), baseline: restOf(bare.cpu), unit: 'ms' },
    ],
    notes: [
      `per-run cost: PostgreSQL counts are the batch's less the API polls that found its end (${pollCost.statements.toFixed(1)} statements each), over ${RUNS} runs; ` +
        `history counts over ${HISTORY_SAMPLE} histories each side; CPU is each batch's over its runs, the API polls and whatever else the machine did in the while included ` +
        `(the server runs in this process, so its CPU includes the benchmark's HTTP client, as the worker's includes the bare client; ` +
        `the rest is processes reaped by others, such as sandboxes whose parent ended first, and the kernel's threads; ` +
        `the hypervisor's steal is counted in none of them: ${cpu.steal.toFixed(1)} ms a run beside Cairn's, ${bare.cpu.steal.toFixed(1)} beside the bare workflow's); ` +
        `actions as Temporal Cloud bills them, heartbeats aside (they never reach a history): ` +
        `Cairn ${describeActions(cairnHistory)}; bare ${describeActions(bare.history)}; processes are the machine's forks over the batch (Temporal's and PostgreSQL's included)`,
      `cost: ${RUNS} runs after ${WARMUP} warm-up each side, ${IN_FLIGHT} submissions in flight; the bare side is one workflow + one activity spawning bash -c true ` +
        `on the same Temporal dev server, task queue of its own, maxConcurrentActivityTaskExecutions ${target.poolSize} like Cairn's pool, ` +
        `one batch before Cairn's and one after, the baseline their mean (${describeBatch(bareBefore)} before; ${describeBatch(bareAfter)} after); ` +
        `the same workflow whose activity starts bash -c true as Cairn's worker starts a run's tool (a work dir of its own, a tool launcher, the run's sandbox with the server's settings: network ${target.isolation.runNetwork}), ` +
        `one batch just before Cairn's and one just after (${describeBatch(sandboxedBefore)} before; ${describeBatch(sandboxedAfter)} after); ` +
        `the budgets are against the bare side as the issue sets them, bash -c true spawned straight from the worker; ` +
        `Cairn ${cairnRate.toFixed(1)} runs/s in ${(elapsed / 1000).toFixed(1)} s, p50 ${percentile(cairnLatency, 50).toFixed(0)} ms, p95 ${percentile(cairnLatency, 95).toFixed(0)} ms`,
      `per-run statements by kind (their first words, the API polls' included; ${polls} polls): ` +
        tally
          .slice(0, TALLY_KINDS)
          .map(([kind, n]) => `${(n / RUNS).toFixed(2)} ${kind}`)
          .join('; '),
    ],
  };
}

/**
 * Until none of the install's runs is pending or running (earlier benchmarks leave only ended
 * runs); answers how many counts it asked the API for.
 */
async function waitIdle(client: BenchClient, start: bigint): Promise<number> {
  for (let polls = 1; ; polls += 2) {
    if ((await countWithStatus(client, 'pending')) === 0 && (await countWithStatus(client, 'running')) === 0) return polls + 1;
    if (msSince(start) > TIMEOUT_MS) throw new Error(`cost: the runs did not all end within ${TIMEOUT_MS / 1000} s`);
    await sleep(POLL_MS);
  }
}

/** What one count asked of the API costs the database, on an idle install. */
async function costPerPoll(client: BenchClient, sql: postgres.Sql): Promise<{ statements: number; transactions: number }> {
  const polls = 50;
  const statements = statementsSentSoFar();
  const transactions = await transactionsCommitted(sql);
  for (let i = 0; i < polls; i++) await countWithStatus(client, 'pending');
  // The bench's own read of the counter is one transaction of its own.
  return { statements: (statementsSentSoFar() - statements) / polls, transactions: (await transactionsCommitted(sql) - transactions - 1) / polls };
}

async function withTemporalClient<T>(target: TemporalTarget, use: (client: Client) => Promise<T>): Promise<T> {
  const connection = await NativeConnection.connect({ address: target.temporalAddress });
  try {
    return await use(new Client({ connection, namespace: target.namespace }));
  } finally {
    await connection.close();
  }
}

interface BareBatch {
  rate: number;
  elapsed: number;
  latency: number[];
  processesPerRun: number;
  history: HistoryCost;
  cpu: CpuSoFar;
}

/** The bare side over two batches: their runs and times together, their per-run costs averaged. */
function bothBatches(a: BareBatch, b: BareBatch): BareBatch {
  const mean = (x: number, y: number) => (x + y) / 2;
  const elapsed = a.elapsed + b.elapsed;
  return {
    rate: (2 * RUNS) / (elapsed / 1000),
    elapsed,
    latency: [...a.latency, ...b.latency],
    processesPerRun: mean(a.processesPerRun, b.processesPerRun),
    history: a.history,
    cpu: eachPart((key) => mean(a.cpu[key], b.cpu[key])),
  };
}

const describeBatch = (batch: BareBatch) =>
  `${batch.rate.toFixed(1)} workflows/s, p50 ${percentile(batch.latency, 50).toFixed(0)} ms, ` +
  `CPU a workflow: Temporal ${batch.cpu.temporal.toFixed(1)} ms, the worker ${batch.cpu.process.toFixed(1)} ms, its tool launcher ${batch.cpu.children.toFixed(1)} ms, the rest ${restOf(batch.cpu).toFixed(1)} ms`;

/**
 * One bare batch: `bash` spawns `bash -c true` straight from the worker; `sandboxed` starts it as
 * Cairn's worker starts a run's tool, in the run's sandbox (bench/true-starter.ts).
 */
async function bareBatch(target: TemporalTarget, tool: 'bash' | 'sandboxed'): Promise<BareBatch> {
  if (tool === 'bash') return bareBatchStarting(target, spawnTrue);
  const starter = await trueStarter(target.isolation);
  try {
    return await bareBatchStarting(target, () => starter.start());
  } finally {
    await starter.stop();
  }
}

/** A bare batch whose activity is `startTrue`. */
async function bareBatchStarting(target: TemporalTarget, startTrue: () => Promise<unknown>): Promise<BareBatch> {
  const connection = await NativeConnection.connect({ address: target.temporalAddress });
  const taskQueue = `cairn-bench-bare-${randomBytes(4).toString('hex')}`;
  const worker = await Worker.create({
    connection,
    namespace: target.namespace,
    taskQueue,
    workflowsPath: path.join(__dirname, 'bare-run-workflow.ts'),
    activities: { startTrue },
    maxConcurrentActivityTaskExecutions: target.poolSize,
    maxConcurrentLocalActivityExecutions: Math.max(target.poolSize, 16),
  });
  const running = worker.run();
  try {
    const client = new Client({ connection, namespace: target.namespace });
    const batch = async (count: number, prefix: string) => {
      const handles = await mapLimit(count, IN_FLIGHT, (i) =>
        client.workflow.start('bareRunWorkflow', { taskQueue, workflowId: `${prefix}-${i}`, args: [] }),
      );
      await Promise.all(handles.map((h) => h.result()));
      return handles;
    };
    const tag = randomBytes(4).toString('hex');
    await batch(WARMUP, `bench-bare-warmup-${tag}`);
    const processes = processesStarted();
    const cpuBefore = cpuSoFar(target);
    const start = process.hrtime.bigint();
    const handles = await batch(RUNS, `bench-bare-${tag}`);
    const elapsed = msSince(start);
    const cpu = cpuPerRun(cpuBefore, cpuSoFar(target), RUNS);
    const processesPerRun = (processesStarted() - processes) / RUNS;
    const history = await historyCost(client, handles.slice(0, HISTORY_SAMPLE).map((h) => h.workflowId));
    const latency = await mapLimit(handles.length, 20, async (i) => {
      const d = await handles[i].describe();
      return d.closeTime!.getTime() - d.startTime.getTime();
    });
    return { rate: RUNS / (elapsed / 1000), elapsed, latency, processesPerRun, history, cpu };
  } finally {
    worker.shutdown();
    await running;
    await connection.close();
  }
}
