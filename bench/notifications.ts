import type postgres from 'postgres';
import { recordUnheardOwedEvents } from '../store/notifications';
import { OUTBOX_CHANNEL } from '../store/outbox';
import { startReceiver, type Receiver } from '../test/support/receivers';
import { mapLimit } from './concurrency';
import { expectStatus, type BenchClient } from './http';
import type { Section } from './report';
import { countWithStatus } from './run-client';
import { msSince, percentile, sleep } from './stats';

const SEEDED_RUNS = 1000;
const THROUGHPUT_RUNS = 300;
const ROUNDS = 3;
const IN_FLIGHT = 50;
const LATENCY_RUNS = 50;
const TIMEOUT_MS = 180_000;
const OTHER_ATTACHMENTS = 5000;
const BATCH_RUNS = 50;
const BATCH_ROUNDS = 20;

async function post<T>(client: BenchClient, path: string, body: unknown, what: string): Promise<T> {
  return expectStatus(await client.request<T>('POST', path, body), 201, what);
}

async function templateWithTarget(client: BenchClient, name: string, receiver: Receiver | undefined): Promise<string> {
  const template = await post<{ id: string }>(client, '/v1/templates', { name, tool: 'bash', command: 'true' }, 'POST /v1/templates');
  if (receiver) {
    const target = await post<{ id: string }>(client, '/v1/notifications', { name: `${name} hook`, kind: 'webhook', url: `${receiver.url}/${name}` }, 'POST /v1/notifications');
    await post(client, `/v1/notifications/${target.id}/attachments`, { object_kind: 'template', object_id: template.id, event: 'success' }, 'attach');
  }
  return template.id;
}

async function waitUntil(what: string, done: () => Promise<boolean> | boolean, startedAt: bigint): Promise<void> {
  while (!(await done())) {
    if (msSince(startedAt) > TIMEOUT_MS) throw new Error(`${what} did not finish within ${TIMEOUT_MS / 1000} s`);
    await sleep(25);
  }
}

/** Runs per second for `runs` launches of the template, 50 in flight, until none is pending or running. */
async function launchThroughput(client: BenchClient, templateId: string, runs: number): Promise<number> {
  const start = process.hrtime.bigint();
  await mapLimit(runs, IN_FLIGHT, () => post(client, `/v1/templates/${templateId}/launch`, {}, 'launch'));
  await waitUntil('the launched runs', async () => (await countWithStatus(client, 'pending')) === 0 && (await countWithStatus(client, 'running')) === 0, start);
  return runs / (msSince(start) / 1000);
}

/**
 * (f) Notification delivery: deliveries per second to a local receiver (1,000 ended runs whose
 * ends are owed to one target, recorded and delivered through the same path a run's end takes);
 * run throughput with a target attached as a ratio to the same launches without; and the latency
 * from a run's recorded end to the receiver's answer.
 */
export async function notificationBenchmark(client: BenchClient, sql: postgres.Sql): Promise<Section> {
  const receiver = await startReceiver();
  try {
    // Throughput: the same launches with no target, then with one.
    const bare = await templateWithTarget(client, 'bench-no-target', undefined);
    const heard = await templateWithTarget(client, 'bench-one-target', receiver);
    // Alternated in rounds, so a change in the machine's load falls on both alike.
    const rates: { without: number[]; with: number[] } = { without: [], with: [] };
    for (let round = 0; round < ROUNDS; round++) {
      rates.without.push(await launchThroughput(client, bare, THROUGHPUT_RUNS / ROUNDS));
      rates.with.push(await launchThroughput(client, heard, THROUGHPUT_RUNS / ROUNDS));
    }
    const harmonic = (r: number[]) => r.length / r.reduce((sum, x) => sum + 1 / x, 0);
    const without = harmonic(rates.without);
    const withTarget = harmonic(rates.with);
    await waitUntil('the throughput deliveries', () => receiver.arrived().length >= THROUGHPUT_RUNS, process.hrtime.bigint());

    // Latency: one run at a time, its end's recorded time to the receiver's arrival.
    const latencies: number[] = [];
    for (let i = 0; i < LATENCY_RUNS; i++) {
      const run = await post<{ id: string }>(client, `/v1/templates/${heard}/launch`, {}, 'launch');
      const start = process.hrtime.bigint();
      await waitUntil('the delivery', () => receiver.received.some((r) => r.json?.run?.id === run.id && r.answered !== undefined), start);
      const arrival = receiver.received.find((r) => r.json?.run?.id === run.id)!;
      const [{ finished_at }] = await sql<{ finished_at: Date }[]>`SELECT finished_at FROM runs WHERE id = ${run.id}`;
      latencies.push(arrival.at - finished_at.getTime());
    }

    // Deliveries per second: 1,000 ended runs, each end owed to the target, announced at once.
    receiver.received.length = 0;
    const seeded = await templateWithTarget(client, 'bench-seeded', receiver);
    const start = process.hrtime.bigint();
    await sql`
      WITH r AS (
        INSERT INTO runs (id, tool, status, spec, timeout_seconds, requested_by, actor_kind, template_id, started_at, finished_at, next_event_seq)
        SELECT 'run_bench' || lpad(g::text, 6, '0'), 'bash', 'succeeded', '{"command": "true", "extra_vars": {}}'::jsonb, 0, 'bench', 'user',
               ${seeded}, now(), now(), 2
        FROM generate_series(1, ${SEEDED_RUNS}) g RETURNING id
      ), e AS (
        INSERT INTO run_events (run_id, seq, kind, body)
        SELECT id, 1, 'run.finished', jsonb_build_object('run', jsonb_build_object('id', id, 'kind', 'run', 'tool', 'bash', 'status', 'succeeded',
               'error', null, 'requested_by', 'bench', 'template_id', ${seeded}::text, 'extra_vars', '{}'::jsonb)) FROM r
      ), o AS (
        INSERT INTO notification_events (subject_id, seq, event) SELECT id, 1, 'run.finished' FROM r RETURNING subject_id, seq
      ), effects AS (
        INSERT INTO outbox (effect, subject, payload) SELECT 'event.record', subject_id, jsonb_build_object('seq', seq) FROM o RETURNING id
      )
      SELECT count(*), pg_notify(${OUTBOX_CHANNEL}, '') FROM effects`;
    await waitUntil('the 1,000 deliveries', () => receiver.arrived().length >= SEEDED_RUNS, start);
    const perSecond = SEEDED_RUNS / (msSince(start) / 1000);
    const duplicates = SEEDED_RUNS - new Set(receiver.arrived().map((r) => r.headers['idempotency-key'])).size;
    const beside = await unheardCheckBesideAttachments(sql, bare);

    return {
      rows: [
        { metric: `deliveries per second (${SEEDED_RUNS} runs, one target)`, value: perSecond, baseline: withTarget, unit: '/s', budget: { min: 200 } },
        { metric: 'run throughput with one target attached', value: withTarget, baseline: without, unit: 'runs/s' },
        { metric: 'with-target / without throughput', value: withTarget / without, baseline: 1, unit: 'ratio', budget: { min: 0.8 } },
        { metric: 'delivery latency p50 (run end to receiver)', value: percentile(latencies, 50), baseline: percentile(latencies, 95), unit: 'ms', budget: { max: 100 } },
        { metric: `unheard check of ${BATCH_RUNS} runs, ${OTHER_ATTACHMENTS} attachments elsewhere, p50`, value: beside.withOthers, baseline: beside.alone, unit: 'ms' },
      ],
      notes: [
        `notifications: ${SEEDED_RUNS} owed ends recorded and delivered in ${(msSince(start) / 1000).toFixed(1)} s, ${duplicates} sent twice; baseline is runs/s with a target`,
        `notifications: ${THROUGHPUT_RUNS} template launches each in ${ROUNDS} alternating rounds, ${IN_FLIGHT} in flight: ${without.toFixed(1)} runs/s without a target, ${withTarget.toFixed(1)} with one`,
        `notifications: latency over ${LATENCY_RUNS} sequential runs, p50 ${percentile(latencies, 50).toFixed(1)} ms, p95 (the baseline column) ${percentile(latencies, 95).toFixed(1)} ms`,
        `notifications: the statement that records a batch of unheard runs' events (store/notifications.ts recordUnheardOwedEvents), over ${BATCH_RUNS} ended runs that nothing hears, ` +
          `${BATCH_ROUNDS} times with ${OTHER_ATTACHMENTS} attachments to other templates, schedules, projects and organizations and ${BATCH_ROUNDS} times with none (the baseline), alternating; ` +
          'every run is checked against the attachments that could hear it, and none here does, so nothing is written',
      ],
    };
  } finally {
    await receiver.close();
  }
}

/**
 * The unheard-runs statement's time beside the install's attachments: a run's check must cost a
 * probe per scope it belongs to, not a look at every attachment in the install. Its runs' events
 * are already recorded and its effect ids are none the outbox holds, so it writes nothing.
 */
async function unheardCheckBesideAttachments(sql: postgres.Sql, templateId: string): Promise<{ alone: number; withOthers: number }> {
  const runs = await sql<{ id: string }[]>`SELECT id FROM runs WHERE template_id = ${templateId} ORDER BY id LIMIT ${BATCH_RUNS}`;
  const recordings = runs.map((run, i) => ({ effectId: String(-1 - i), runId: run.id, seq: 2 }));
  const [target] = await sql<{ id: string }[]>`SELECT id FROM notification_targets ORDER BY id LIMIT 1`;
  const timedOnce = async () => {
    const start = process.hrtime.bigint();
    const completed = await recordUnheardOwedEvents(sql, recordings);
    if (completed.length !== 0) throw new Error(`the unheard check completed ${completed.length} effects that do not exist`);
    return msSince(start);
  };
  const alone: number[] = [];
  const withOthers: number[] = [];
  const kinds = ['template', 'schedule', 'project', 'org'];
  const removeOthers = () => sql`DELETE FROM notification_attachments WHERE created_by = 'bench' AND id LIKE 'att_bench%'`;
  try {
    for (let round = 0; round < BATCH_ROUNDS; round++) {
      alone.push(await timedOnce());
      await sql`
        INSERT INTO notification_attachments (id, target_id, object_kind, object_id, event, created_by)
        SELECT 'att_bench' || g, ${target.id}, (${kinds}::text[])[1 + g % 4], 'obj_bench' || g, 'success', 'bench'
        FROM generate_series(1, ${OTHER_ATTACHMENTS}) g`;
      withOthers.push(await timedOnce());
      await removeOthers();
    }
  } finally {
    await removeOthers();
  }
  return { alone: percentile(alone, 50), withOthers: percentile(withOthers, 50) };
}
