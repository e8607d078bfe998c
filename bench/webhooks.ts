import { randomUUID } from 'node:crypto';
import type { Sql } from '../store/db';
import { hubSignature256 } from '../core/schedules/webhooks';
import { mapLimit } from './concurrency';
import { expectStatus, type BenchClient } from './http';
import type { Section } from './report';
import { countWithStatus } from './run-client';
import { msSince, percentile, sleep } from './stats';

const DELIVERIES = 500;
const IN_FLIGHT = 50;
/** One wave, before the timed deliveries. */
const WARMUP_DELIVERIES = IN_FLIGHT;
const POLL_MS = 100;
const TIMEOUT_MS = 180_000;

/** A GitHub push as it arrives: the fields a push always carries and a few around them. */
function pushPayload(i: number): Buffer {
  // Never all zeros, which is how a push that deletes its ref names its commit.
  const commit = `c${(i + 1).toString(16).padStart(39, '0')}`;
  return Buffer.from(
    JSON.stringify({
      ref: 'refs/heads/main',
      before: '0'.repeat(39) + '1',
      after: commit,
      deleted: false,
      commits: [{ id: commit, message: `change ${i}`, author: { name: 'Mona', email: 'mona@example.com' } }],
      head_commit: { id: commit, message: `change ${i}` },
      repository: { id: 1296269, name: 'web', full_name: 'acme/web', private: false },
      pusher: { name: 'octocat', email: 'octocat@example.com' },
      sender: { login: 'octocat', id: 1 },
    }),
  );
}

/**
 * (e) Webhook answer time (spec part B 8: within five seconds; goal 100 ms): 500 signed GitHub push
 * deliveries to one trigger, 50 in flight, each timed from its POST to its answer, with the
 * server's default settings: a push is answered once recorded (202), its launch carried out
 * after. So that the answer time does not hide the launch, the time from each delivery's record
 * (its received time) to its run's creation is reported beside it. The baseline is the same
 * template launched through `POST /v1/templates/{id}/launch` at the same concurrency: the launch
 * every delivery makes, without the signature check, the push reading and the record. The runs of
 * both are waited out before the next benchmark. The timed deliveries follow one wave of deliveries
 * to another trigger, as the other sections warm up; that wave's answers are reported apart. The
 * deliveries go to a `cairn serve` process of its own (bench/environment.ts), which also executes
 * their runs: a sender's answer is the server's alone, not shared with the event loop that runs the
 * benchmark's 50 clients.
 */
export async function webhookBenchmark(client: BenchClient, sql: Sql): Promise<Section> {
  const template = expectStatus(await client.request<{ id: string }>('POST', '/v1/templates', { name: 'bench webhook', tool: 'bash', command: 'true' }), 201, 'POST /v1/templates');
  const trigger = expectStatus(
    await client.request<{ id: string; secret: string; hook_path: string }>('POST', '/v1/triggers', { name: 'bench push', template_id: template.id }),
    201,
    'POST /v1/triggers',
  );

  const launchMs = await mapLimit(DELIVERIES, IN_FLIGHT, async () => {
    const t = process.hrtime.bigint();
    expectStatus(await client.request('POST', `/v1/templates/${template.id}/launch`, {}), 201, 'POST /v1/templates/{id}/launch');
    return msSince(t);
  });
  await waitOut(client);

  // One wave of deliveries to a trigger of their own first, as the other sections warm up. Its
  // answers (50 sent at the same instant, the first the server answers) get a row of their own,
  // with no budget, so they stay in view.
  const warmTrigger = expectStatus(
    await client.request<{ id: string; secret: string; hook_path: string }>('POST', '/v1/triggers', { name: 'bench push warm-up', template_id: template.id }),
    201,
    'POST /v1/triggers',
  );
  const firstMs = await deliver(client, warmTrigger, WARMUP_DELIVERIES, 0, new Map());
  await waitLaunched(sql, warmTrigger.id);
  await waitOut(client);
  // The answers' statuses are counted for the timed deliveries only.
  const statuses = new Map<number, number>();
  const answerMs = await deliver(client, trigger, DELIVERIES, WARMUP_DELIVERIES, statuses);
  // Launches wait while deliveries are answered: every delivery is launched before the runs are waited out.
  await waitLaunched(sql, trigger.id);
  await waitOut(client);
  const recordToRun = (
    await sql<{ ms: number }[]>`
      SELECT (extract(epoch FROM r.created_at - d.received_at) * 1000)::float8 AS ms
      FROM hook_deliveries d JOIN runs r ON r.id = d.run_id WHERE d.trigger_id = ${trigger.id}`
  ).map((r) => r.ms);
  if (recordToRun.length !== DELIVERIES) throw new Error(`${recordToRun.length} of ${DELIVERIES} deliveries launched a run`);

  return {
    rows: [
      { metric: `webhook answer p99 (${DELIVERIES} deliveries, ${IN_FLIGHT} in flight)`, value: percentile(answerMs, 99), baseline: percentile(launchMs, 99), unit: 'ms', budget: { max: 100 } },
      { metric: 'webhook answer p50', value: percentile(answerMs, 50), baseline: percentile(launchMs, 50), unit: 'ms' },
      { metric: `webhook answer p99, the first ${WARMUP_DELIVERIES} deliveries, sent at once`, value: percentile(firstMs, 99), baseline: percentile(launchMs, 99), unit: 'ms' },
      { metric: 'webhook record to run p99', value: percentile(recordToRun, 99), baseline: percentile(launchMs, 99), unit: 'ms' },
      { metric: 'webhook record to run p50', value: percentile(recordToRun, 50), baseline: percentile(launchMs, 50), unit: 'ms' },
    ],
    notes: [
      `webhooks: ${statuses.get(201) ?? 0} answered 201 (run started), ${statuses.get(202) ?? 0} answered 202 (recorded, launch after the answer); ` +
        `slowest answer ${Math.max(...answerMs).toFixed(1)} ms, slowest record to run ${Math.max(...recordToRun).toFixed(1)} ms; ` +
        'default settings (--hook-answer-wait 0); baseline is POST /v1/templates/{id}/launch of the same template at the same concurrency; ' +
        `the timed deliveries follow one wave of ${WARMUP_DELIVERIES} to another trigger (sent at once, the first the server answers: p50 ${percentile(firstMs, 50).toFixed(1)} ms, slowest ${Math.max(...firstMs).toFixed(1)} ms)`,
    ],
  };
}

/**
 * Sends `count` signed pushes (numbered from `first`, so no two deliveries anywhere carry the
 * same commit) to the trigger, IN_FLIGHT at a time; each one's answer time, in order sent.
 */
async function deliver(client: BenchClient, trigger: { secret: string; hook_path: string }, count: number, first: number, statuses: Map<number, number>): Promise<number[]> {
  const payloads = Array.from({ length: count }, (_, i) => pushPayload(first + i));
  return mapLimit(count, IN_FLIGHT, async (i) => {
    const body = payloads[i];
    const headers = {
      'content-type': 'application/json',
      'x-github-event': 'push',
      'x-github-delivery': randomUUID(),
      'x-hub-signature-256': hubSignature256(body, trigger.secret),
    };
    const t = process.hrtime.bigint();
    const reply = await client.request('POST', trigger.hook_path, undefined, { body, headers });
    const ms = msSince(t);
    if (reply.status !== 201 && reply.status !== 202) throw new Error(`delivery ${first + i}: HTTP ${reply.status}: ${JSON.stringify(reply.body).slice(0, 300)}`);
    statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
    return ms;
  });
}

/** Waits until none of the trigger's deliveries waits for its launch. */
async function waitLaunched(sql: Sql, triggerId: string): Promise<void> {
  const start = process.hrtime.bigint();
  for (;;) {
    const [{ pending }] = await sql<{ pending: number }[]>`SELECT count(*)::int AS pending FROM hook_deliveries WHERE trigger_id = ${triggerId} AND state = 'pending'`;
    if (pending === 0) return;
    if (msSince(start) > TIMEOUT_MS) throw new Error(`${pending} webhook deliveries were not launched within ${TIMEOUT_MS / 1000} s`);
    await sleep(POLL_MS);
  }
}

/** Waits until no run is pending or running, so the next figures are not measured beside these runs. */
async function waitOut(client: BenchClient): Promise<void> {
  const start = process.hrtime.bigint();
  for (;;) {
    if ((await countWithStatus(client, 'pending')) === 0 && (await countWithStatus(client, 'running')) === 0) return;
    if (msSince(start) > TIMEOUT_MS) throw new Error(`the webhook benchmark's runs did not all end within ${TIMEOUT_MS / 1000} s`);
    await sleep(POLL_MS);
  }
}
