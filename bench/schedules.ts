import { Client } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import path from 'node:path';
import type postgres from 'postgres';
import { processTreeCpuSeconds } from '../embedded/process-cpu';
import { readServiceState } from '../embedded/state';
import { statementsSentSoFar } from '../store/db';
import { mapLimit } from './concurrency';
import { expectStatus, type BenchClient } from './http';
import { sampleWaits } from './pg-waits';
import type { Row, Section } from './report';
import { untilRunsEnded } from './run-client';
import { percentile, sleep } from './stats';

const SCHEDULES = 1000;
const MINUTES = Number(process.env.BENCH_SCHEDULE_MINUTES ?? 2);
const MINUTE_MS = 60_000;
/** Seconds of each idle CPU window, which ends a few seconds before the first fire. */
const IDLE_S = 30;

interface Cpu {
  /** This process, which the Cairn server runs in, as % of one core. */
  cairn: number;
  /** The embedded Temporal dev server. */
  temporal: number | undefined;
}

async function cpuOver(ms: number, temporalPid: number | undefined): Promise<Cpu> {
  const cairnBefore = process.cpuUsage();
  const temporalBefore = temporalPid ? processTreeCpuSeconds(temporalPid) : undefined;
  const started = Date.now();
  await sleep(ms);
  const elapsed = (Date.now() - started) / 1000;
  const used = process.cpuUsage(cairnBefore);
  const temporalAfter = temporalPid ? processTreeCpuSeconds(temporalPid) : undefined;
  return {
    cairn: ((used.user + used.system) / 1e6 / elapsed) * 100,
    temporal: temporalBefore !== undefined && temporalAfter !== undefined ? ((temporalAfter - temporalBefore) / elapsed) * 100 : undefined,
  };
}

const pct = (value: number | undefined) => (value === undefined ? 'not measured' : `${value.toFixed(1)} %`);

/** The next minute boundary at least `leadMs` away. */
const minuteAfter = (leadMs: number) => Math.ceil((Date.now() + leadMs) / MINUTE_MS) * MINUTE_MS;

/** An rrule firing every minute from `start` (UTC form). */
function everyMinuteFrom(start: number): string {
  return `DTSTART:${new Date(start).toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z')}\nRRULE:FREQ=MINUTELY`;
}

/**
 * The floor: as many bare Temporal workflows as schedules, each sleeping on a timer to the same
 * instant and then starting a local activity, on the same Temporal dev server, with no Cairn code.
 * How late the activities start is what Temporal alone makes of a thousand timers at once.
 */
async function timerFloor(temporalAddress: string, namespace: string): Promise<number[]> {
  const connection = await NativeConnection.connect({ address: temporalAddress });
  const lateness: number[] = [];
  const worker = await Worker.create({
    connection,
    namespace,
    taskQueue: 'cairn-bench-timer-floor',
    workflowsPath: path.join(__dirname, 'timer-floor-workflow.ts'),
    activities: { reached: async (at: number) => void lateness.push(Date.now() - at) },
    maxConcurrentLocalActivityExecutions: 64,
    maxConcurrentWorkflowTaskExecutions: 64,
  });
  const running = worker.run();
  try {
    const client = new Client({ connection, namespace });
    const at = minuteAfter(40_000);
    await mapLimit(SCHEDULES, 32, (i) =>
      client.workflow.start('timerFloorWorkflow', { taskQueue: 'cairn-bench-timer-floor', workflowId: `bench-timer-floor-${at}-${i}`, args: [at] }),
    );
    while (lateness.length < SCHEDULES) await sleep(200);
    return lateness;
  } finally {
    worker.shutdown();
    await running;
    await connection.close();
  }
}

interface Variant {
  name: string;
  /** What each schedule fires. */
  target: Record<string, unknown>;
  /** Each fire's lateness in the minutes measured, and how many fires there were per minute. */
  measure(sql: postgres.Sql, minutes: number[]): Promise<{ lateness: number[]; perMinute: number[]; note?: string }>;
}

/** Fires that start a run: lateness is the run's `created_at` against its nominal time (its Idempotency-Key). */
const startingRuns: Variant = {
  name: 'each fire starts a run (bash `true`)',
  target: { run: { tool: 'bash', command: 'true' } },
  async measure(sql, minutes) {
    const rows = await sql<{ key: string; created_at: Date; workflow_started_at: Date | null; started_at: Date | null }[]>`
      SELECT idempotency_key AS key, created_at, workflow_started_at, started_at FROM runs WHERE source_kind = 'schedule' AND parent_run_id IS NULL`;
    // When each fire's run had its workflow started and its tool started, against the same nominal time.
    const workflowStarted: number[] = [];
    const executed: number[] = [];
    const perMinute = minutes.map(() => 0);
    const byMinute = minutes.map((): number[] => []);
    for (const row of rows) {
      const nominal = Date.parse(row.key.split('/')[2]);
      const i = minutes.indexOf(nominal);
      if (i < 0) continue;
      byMinute[i].push(row.created_at.getTime() - nominal);
      if (row.workflow_started_at) workflowStarted.push(row.workflow_started_at.getTime() - nominal);
      if (row.started_at) executed.push(row.started_at.getTime() - nominal);
      perMinute[i]++;
    }
    const seconds = (values: number[]) => `p50 ${(percentile(values, 50) / 1000).toFixed(1)} s, p99 ${(percentile(values, 99) / 1000).toFixed(1)} s`;
    return {
      lateness: byMinute.flat(),
      perMinute,
      note:
        `schedules: the fires' runs after their nominal time: workflow started ${seconds(workflowStarted)} (${workflowStarted.length}), ` +
        `tool started ${seconds(executed)} (${executed.length}); both wait for the burst of fires (workers/fires-first.ts); ` +
        `lateness by minute: ${byMinute.map(seconds).join('; ')}`,
    };
  },
};

async function measureSchedules(
  client: BenchClient,
  sql: postgres.Sql,
  temporalPid: number | undefined,
  variant: Variant,
  snapshot?: (minute: number) => Promise<number[]>,
): Promise<{ lateness: number[]; perMinute: number[]; note?: string; idle: Cpu; createSeconds: number; planSeconds: number; statementsPerFire: number; waits: string }> {
  const first = minuteAfter(90_000);
  const created = Date.now();
  const ids = await mapLimit(SCHEDULES, 16, async (i) =>
    expectStatus(
      await client.request<{ id: string }>('POST', '/v1/schedules', { name: `bench ${i}`, rrule: everyMinuteFrom(first), ...variant.target }),
      201,
      'POST /v1/schedules',
    ).id,
  );
  const createSeconds = (Date.now() - created) / 1000;
  // Every schedule's workflow plans the first fire; one created too late plans the one after, and
  // the measure would wait for ever, so a slow machine is told rather than left waiting.
  for (;;) {
    const [{ n }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM schedules WHERE next_fire_at = ${new Date(first)}`;
    if (n >= SCHEDULES) break;
    if (Date.now() > first - IDLE_S * 1000) {
      throw new Error(`schedules: ${n} of ${SCHEDULES} schedules had planned the fire at ${new Date(first).toISOString()} by ${IDLE_S} s before it (created in ${createSeconds.toFixed(1)} s)`);
    }
    await sleep(200);
  }
  const planSeconds = (Date.now() - created) / 1000 - createSeconds;
  // Loaded and asleep: every schedule's workflow waits on its timer to the first fire.
  await sleep(Math.max(0, first - (IDLE_S + 5) * 1000 - Date.now()));
  const idle = await cpuOver(IDLE_S * 1000, temporalPid);
  const minutes = Array.from({ length: MINUTES }, (_, m) => first + m * MINUTE_MS);
  const snapshots: number[] = [];
  // The server runs in this process: its statements to PostgreSQL over the minutes, less the
  // benchmark's own snapshots (read after each minute's count).
  let statements = 0;
  const sampler = sampleWaits(sql);
  for (const minute of minutes) {
    const before = statementsSentSoFar();
    await sleep(Math.max(0, minute + 55_000 - Date.now()));
    statements += statementsSentSoFar() - before;
    if (snapshot) snapshots.push(...(await snapshot(minute)));
  }
  const waits = await sampler.stop();
  const measured = snapshot ? { lateness: snapshots, perMinute: [] } : await variant.measure(sql, minutes);
  await mapLimit(ids.length, 16, async (i) => expectStatus(await client.request('DELETE', `/v1/schedules/${ids[i]}`), 204, 'DELETE /v1/schedules'));
  return { ...measured, idle, createSeconds, statementsPerFire: statements / Math.max(1, measured.lateness.length), waits, planSeconds };
}

/**
 * (g) 1,000 enabled schedules firing every minute. How late each fire is against its nominal
 * time (p50, p99; budget: p99 within 2 s of the floor), beside the floor: as many bare Temporal timers at one
 * instant on the same dev server. Twice: fires that start a run (a bash `true`), and fires refused
 * before any run (a template whose survey nobody can answer), which is the scheduler alone. And
 * the server's CPU while the 1,000 schedules sleep between fires, beside the same window with
 * none. In the full pass, or alone with `npm run bench -- --only=g`: about 5 + 2 x BENCH_SCHEDULE_MINUTES minutes.
 */
export async function scheduleBenchmark(client: BenchClient, sql: postgres.Sql, server: { dataDir: string; temporalAddress: string; namespace: string }): Promise<Section> {
  const temporalPid = (await readServiceState(server.dataDir, 'temporal'))?.pid;
  const none = await cpuOver(IDLE_S * 1000, temporalPid);
  const floor = await timerFloor(server.temporalAddress, server.namespace);

  const runs = await measureSchedules(client, sql, temporalPid, startingRuns);
  // The refused fires are the scheduler alone: not beside the runs the first minutes started and
  // two cores may still be executing.
  const drainStarted = Date.now();
  await untilRunsEnded(sql, 'schedules: the runs the fires started', { since: drainStarted, timeoutMs: 30 * MINUTE_MS });
  const drainSeconds = (Date.now() - drainStarted) / 1000;
  const template = expectStatus(
    await client.request<{ id: string }>('POST', '/v1/templates', {
      name: 'bench unanswerable',
      tool: 'bash',
      command: 'true',
      survey: [{ var: 'answer', type: 'text', required: true }],
    }),
    201,
    'POST /v1/templates',
  );
  const refusedVariant: Variant = { name: 'refused', target: { template_id: template.id }, measure: async () => ({ lateness: [], perMinute: [] }) };
  const perMinuteRefused: number[] = [];
  const refused = await measureSchedules(client, sql, temporalPid, refusedVariant, async (minute) => {
    const rows = await sql<{ late: number }[]>`
      SELECT extract(epoch FROM last_error_at - last_fire_at) * 1000 AS late FROM schedules WHERE last_fire_at = ${new Date(minute)}`;
    perMinuteRefused.push(rows.length);
    return rows.map((row) => Number(row.late));
  });

  const lateRows = (label: string, lateness: number[]): Row[] => [
    { metric: `schedule fire lateness p50, ${label}`, value: percentile(lateness, 50), baseline: percentile(floor, 50), unit: 'ms' },
    // The budget: within 2 s of the floor measured beside it (Temporal's own lateness for as many timers at one instant).
    { metric: `schedule fire lateness p99, ${label}`, value: percentile(lateness, 99), baseline: percentile(floor, 99), unit: 'ms', budget: { max: Math.round(percentile(floor, 99)) + 2000 } },
  ];
  return {
    rows: [
      ...lateRows(`${SCHEDULES} fires a minute starting runs`, runs.lateness),
      ...lateRows(`${SCHEDULES} fires a minute refused (scheduler alone)`, refused.lateness),
      { metric: `server CPU with ${SCHEDULES} schedules asleep`, value: runs.idle.cairn, baseline: none.cairn, unit: '%' },
    ],
    notes: [
      `schedules: ${SCHEDULES} schedules firing every minute, created in ${runs.createSeconds.toFixed(1)} s (and ${refused.createSeconds.toFixed(1)} s), ` +
        `every first fire planned ${runs.planSeconds.toFixed(1)} s (and ${refused.planSeconds.toFixed(1)} s) after; ` +
        `the fires' runs ended ${drainSeconds.toFixed(0)} s after the minutes measured, before the refused fires were set up; ` +
        `${MINUTES} minutes measured (BENCH_SCHEDULE_MINUTES); lateness is when the fire was recorded (the run's created_at, or last_error_at) ` +
        `against its nominal time`,
      `schedules: fires made per minute: ${runs.perMinute.join(', ')} starting runs, ${perMinuteRefused.join(', ')} refused; ` +
        `baseline: ${SCHEDULES} bare Temporal timers at one instant on the same dev server (p50 / p99 of a local activity's start)`,
      `schedules: PostgreSQL statements a fire, from each minute to 55 s after it: ${refused.statementsPerFire.toFixed(1)} refused (the scheduler alone: ` +
        `fire and plan the next), ${runs.statementsPerFire.toFixed(1)} starting runs (the run's own statements included, as far as it got within the 55 s)`,
      `schedules: CPU is % of one core over ${IDLE_S} s with every schedule asleep (baseline: the same window with none); ` +
        `the Temporal dev server meanwhile ${pct(runs.idle.temporal)} (with none: ${pct(none.temporal)})`,
      ...(runs.note ? [runs.note] : []),
      `schedules: PostgreSQL over the minutes, fires starting runs: ${runs.waits}`,
      `schedules: PostgreSQL over the minutes, fires refused: ${refused.waits}`,
    ],
  };
}
