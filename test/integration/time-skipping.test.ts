import type { WorkflowClient } from '@temporalio/client';
import { randomBytes } from 'node:crypto';
import { defaultPayloadConverter } from '@temporalio/common';
import { tsToMs } from '@temporalio/common/lib/time';
import type { temporal } from '@temporalio/proto';
import { connectDatabase, type Sql } from '../../store/db';
import { waitUntil } from '../support/schedules';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';
import { enableTimeSkipping, startTimeSkippingTemporal, workflowNow, type TimeSkippingTemporal } from '../support/time-skipping';
import { FIRST_BUILD_TIMEOUT_MS } from '../support/timeouts';

// Long waits in simulated time: a real `cairn serve` (HTTP API, its workers running the real
// workflow code and activities, its own PostgreSQL database) on a Temporal server that skips a
// workflow's clock to its next timer whenever the workflow is idle (test/support/time-skipping.ts).
// Workflow code reads the skipped clock; activities and PostgreSQL read the real one.

let server: TimeSkippingTemporal;
let sql: Sql;
let t: TestServer;
let client: WorkflowClient;

beforeAll(async () => {
  // The first use on a machine builds embedded/temporal-dev (a few minutes); later ones find it cached.
  server = await startTimeSkippingTemporal();
  client = server.client;
  t = await startTestServer({
    TEMPORAL_ADDRESS: server.address,
    // Federation key rotation (below): an issuer, and the install key its signing keys are sealed under.
    CAIRN_FEDERATION_ISSUER: 'https://cairn.example.com',
    SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
    SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
  });
  sql = connectDatabase(t.databaseUrl, { max: 2 });
}, FIRST_BUILD_TIMEOUT_MS);
afterAll(async () => {
  await sql?.end();
  await t?.stop();
  await server?.teardown();
});

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

/** Every run of a workflow, first to last (continue-as-new followed), each with its history. */
async function runChain(workflowId: string): Promise<{ runId: string; events: HistoryEvent[] }[]> {
  const described = await client.getHandle(workflowId).describe();
  const chain: { runId: string; events: HistoryEvent[] }[] = [];
  let runId: string | undefined = described.raw.workflowExecutionInfo?.firstRunId ?? described.runId;
  while (runId) {
    const events: HistoryEvent[] = (await client.getHandle(workflowId, runId).fetchHistory()).events ?? [];
    chain.push({ runId, events });
    runId = events.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? undefined;
  }
  return chain;
}

/** Each local activity, in order, with what it returned (as its marker records them). */
function localActivities(events: HistoryEvent[]): { type: string; result: any }[] {
  return events
    // Local activities' markers only: a patch marker (patched()) carries no result.
    .filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity')
    .map((e) => {
      const { data, result } = e.markerRecordedEventAttributes!.details!;
      const marker = defaultPayloadConverter.fromPayload<{ activity_type: string }>(data!.payloads![0]);
      return { type: marker.activity_type, result: defaultPayloadConverter.fromPayload(result!.payloads![0]) };
    });
}

const timersFiredAt = (events: HistoryEvent[]) => events.filter((e) => e.timerFiredEventAttributes).map((e) => tsToMs(e.eventTime));
const iso = (ms: number) => new Date(ms).toISOString();

/** The last Sunday of a month, as a UTC date (the EU changes its clocks at 01:00 UTC that day). */
function lastSunday(year: number, month: number): number {
  const last = new Date(Date.UTC(year, month, 0));
  return Date.UTC(year, month - 1, last.getUTCDate() - last.getUTCDay());
}

describe('a daily schedule across both daylight-saving changes, 122 simulated days', () => {
  test('fires once per nominal time at its instant, continues as new after 100 fires and ends with its rule', async () => {
    // 02:30 in Berlin on every day of March, April, October and November of next year: both
    // nights the clocks change, and 122 fires. The first fire's run is still going (a long sleep) at
    // every later fire, so each of those is a skip: one run, and a skip count that tallies every fire.
    const year = new Date().getUTCFullYear() + 1;
    const created = await t.api.post('/v1/schedules', {
      name: 'berlin half past two',
      rrule: `DTSTART;TZID=Europe/Berlin:${year}0301T023000 RRULE:FREQ=DAILY;BYMONTH=3,4,10,11;COUNT=122`,
      run: { tool: 'bash', command: 'sleep 600' },
    });
    expect(created.status).toBe(201);
    expect(created.body.spring_forward).toBe('later');
    const scheduleId: string = created.body.id;

    // 02:30 CET is 01:30Z, 02:30 CEST 00:30Z. On the spring night 02:30 does not exist and fires an
    // hour later by the clock (`later`: 03:30 CEST, 01:30Z); on the autumn night it happens twice
    // and fires at the first (CEST, 00:30Z).
    const spring = lastSunday(year, 3);
    const autumn = lastSunday(year, 10);
    const day = 86_400_000;
    const expected: number[] = [];
    for (const [month, days] of [[3, 31], [4, 30], [10, 31], [11, 30]]) {
      for (let d = 1; d <= days; d++) {
        const date = Date.UTC(year, month - 1, d);
        const summer = date > spring && date <= autumn;
        expected.push(date + (summer ? 0.5 : 1.5) * 3_600_000);
      }
    }
    expect(expected).toHaveLength(122);
    expect(expected).toContain(spring + 1.5 * 3_600_000); // the spring night: 03:30 CEST
    expect(expected).toContain(spring + day + 0.5 * 3_600_000); // the next day: 02:30 CEST
    expect(expected).toContain(autumn + 0.5 * 3_600_000); // the autumn night: the first 02:30 (CEST)
    expect(expected).toContain(autumn + day + 1.5 * 3_600_000); // the next day: 02:30 CET

    const planned = await waitUntil('the first fire to be planned', async () => (await t.api.get(`/v1/schedules/${scheduleId}`)).body.next_fire_at);
    expect(Date.parse(planned)).toBe(expected[0]);
    const started = Date.now();
    await enableTimeSkipping(client, scheduleId);
    // The workflow ends by itself when its rule has no fire left.
    await waitUntil('the schedule’s workflow to end', async () => (await client.getHandle(scheduleId).describe()).status.name === 'COMPLETED', 60_000);
    const wallMs = Date.now() - started;

    const chain = await runChain(scheduleId);
    expect(chain).toHaveLength(2);
    const [first, second] = chain;
    // Each run plans once, then each fire records its outcome and plans the next.
    const firstActivities = localActivities(first.events);
    const secondActivities = localActivities(second.events);
    expect(firstActivities.map((a) => a.type)).toEqual(['planFire', ...Array(100).fill('fireSchedule')]);
    expect(secondActivities.map((a) => a.type)).toEqual(['planFire', ...Array(22).fill('fireSchedule')]);
    const firstResults = firstActivities.map((a) => a.result);
    const secondResults = secondActivities.map((a) => a.result);
    const plans = [firstResults[0], ...firstResults.slice(1).map((r) => r.next), secondResults[0], ...secondResults.slice(1).map((r) => r.next)];
    // Run 1 plans fires 1..101 (its last fire plans the 101st, which run 2 plans again); run 2 plans 101..122, then none.
    expect(plans.map((p) => p && iso(p.fireAt))).toEqual([
      ...expected.slice(0, 101).map(iso),
      iso(expected[100]),
      ...expected.slice(101).map(iso),
      null,
    ]);
    const outcomes = [...firstResults.slice(1), ...secondResults.slice(1)].map((r) => r.outcome);
    expect(outcomes).toEqual(['started', ...Array(121).fill('skipped')]);

    // Each fire woke on its timer at its instant by the workflow's clock (within the moment it takes to fire).
    const woke = [...timersFiredAt(first.events), ...timersFiredAt(second.events)];
    expect(woke).toHaveLength(122);
    woke.forEach((at, i) => {
      expect(at).toBeGreaterThanOrEqual(expected[i]);
      expect(at - expected[i]).toBeLessThan(5_000);
    });
    // After its 100th fire the first run continued as new, handing over that fire as `after`.
    const handover = first.events.at(-1)!.workflowExecutionContinuedAsNewEventAttributes!;
    expect(defaultPayloadConverter.fromPayload(handover.input!.payloads![0])).toEqual({ scheduleId, after: expected[99] });
    expect(second.events.at(-1)!.workflowExecutionCompletedEventAttributes).toBeTruthy();
    expect((await workflowNow(client, scheduleId))!.getTime()).toBeGreaterThanOrEqual(expected[121]);

    // The store: one run, for the first fire (its Idempotency-Key names the fire), and 121 skips in a row behind it.
    const { body: schedule } = await t.api.get(`/v1/schedules/${scheduleId}`);
    expect(schedule).toMatchObject({
      last_fire_at: iso(expected[121]),
      last_outcome: 'skipped',
      next_fire_at: null,
      last_skipped: { at: iso(expected[121]), since: iso(expected[1]), fires: 121, run_id: schedule.last_run_id },
    });
    const { body: run } = await t.api.get(`/v1/runs/${schedule.last_run_id}`);
    expect(['pending', 'running']).toContain(run.status);
    const runs = await sql<{ id: string; idempotency_key: string }[]>`
      SELECT id, idempotency_key FROM runs WHERE source_kind = 'schedule' AND source_id = ${scheduleId}`;
    expect(runs).toEqual([{ id: run.id, idempotency_key: `schedule/${scheduleId}/${iso(expected[0])}` }]);

    await t.api.post(`/v1/runs/${run.id}/cancel`);
    await waitForRunEnd(t.api, run.id);
    process.stderr.write(`time-skipping: 122 fires over ${Math.round((expected[121] - expected[0]) / day)} simulated days in ${wallMs} ms\n`);
    expect(wallMs).toBeLessThan(60_000);
  });
});

describe('an approval step with a 30-day approval_timeout', () => {
  test('times out after 30 simulated days and takes the deny path, once the branch beside it has finished', async () => {
    const template = await t.api.post('/v1/templates', {
      name: 'release with a month to decide',
      steps: [
        { name: 'build', tool: 'bash', command: 'echo built' },
        { name: 'promote', type: 'approval', description: 'promote?', depends_on: ['build'], approval_timeout: 30 * 86_400, if_denied: 'rollback' },
        { name: 'smoke', tool: 'bash', command: 'sleep 1; echo smoke ok', depends_on: ['build'] },
        { name: 'deploy', tool: 'bash', command: 'echo deployed', depends_on: ['promote'] },
        { name: 'rollback', tool: 'bash', command: 'echo rolled back' },
      ],
    });
    expect(template.status).toBe(201);
    const started = Date.now();
    const { body: workflow } = await t.api.post(`/v1/templates/${template.body.id}/launch`, {});
    expect(workflow.id).toBeDefined();
    // Skipping from the start: it waits while a step runs, and jumps the 30 days once only the approval's timer is left.
    await enableTimeSkipping(client, workflow.id);
    const ended = await waitForRunEnd(t.api, workflow.id, 60_000);
    const wallMs = Date.now() - started;
    expect(ended.status).toBe('succeeded');

    const { body } = await t.api.get(`/v1/runs/${workflow.id}/steps`);
    const steps = Object.fromEntries(body.steps.map((s: any) => [s.step_name, s]));
    expect(steps.promote).toMatchObject({ status: 'rejected', error: 'no decision within the approval timeout of 2592000 s' });
    expect(steps.smoke.status).toBe('succeeded');
    expect(steps.rollback.status).toBe('succeeded');
    expect(steps.deploy.status).toBe('canceled');
    // The branch beside the approval ran to its end in real time before the month was skipped.
    expect(Date.parse(steps.promote.finished_at)).toBeGreaterThanOrEqual(Date.parse(steps.smoke.finished_at));
    // The hold expired 30 days after it opened, by the workflow's clock.
    const expiresAt = Date.parse(steps.promote.hold.expires_at);
    const opened = expiresAt - Date.parse(steps.promote.created_at);
    expect(opened).toBeGreaterThanOrEqual(30 * 86_400_000);
    expect(opened).toBeLessThan(30 * 86_400_000 + 60_000);

    const history = (await client.getHandle(workflow.id).fetchHistory()).events ?? [];
    const [fired] = timersFiredAt(history);
    expect(fired).toBeGreaterThanOrEqual(expiresAt);
    expect(fired - expiresAt).toBeLessThan(5_000);
    process.stderr.write(`time-skipping: a 30-day approval timeout in ${wallMs} ms\n`);
    expect(wallMs).toBeLessThan(30_000);
  });
});

describe('a normal federation key rotation, 48 simulated hours', () => {
  test('the new key signs 24 hours after it is published, the old key leaves the key set 24 hours after that, and an emergency rotation leaves an overtaken rotation nothing to do', async () => {
    const keys = async () => (await t.api.get('/v1/federation/keys')).body.keys as any[];
    const published = async () => ((await t.api.get('/.well-known/jwks.json')).body.keys as any[]).map((k) => k.kid).sort();
    const [oldKey] = await keys();
    expect(oldKey.state).toBe('signing');
    const rotated = await t.api.post('/v1/federation/keys/rotate');
    expect(rotated.status).toBe(201);
    const newKey = rotated.body.keys.find((k: any) => k.state === 'next');
    const workflowId = newKey.id;
    await waitUntil('the rotation workflow to start', () => client.getHandle(workflowId).describe().then(() => true, () => false));

    // One skip: to the end of the first 24 hours.
    await enableTimeSkipping(client, workflowId, { maxSkips: 1 });
    const afterDay = await waitUntil('the new key to sign', async () => {
      const now = await keys();
      return now.find((k) => k.id === newKey.id)?.state === 'signing' && now;
    });
    const activated = afterDay.find((k) => k.id === newKey.id);
    const retired = afterDay.find((k) => k.id === oldKey.id);
    expect(retired).toMatchObject({ state: 'retired', published: true, retired: activated.activated, removed: null });
    const day = 86_400_000;
    const publishedFor = Date.parse(activated.activated) - Date.parse(activated.created);
    expect(publishedFor).toBeGreaterThanOrEqual(day);
    expect(publishedFor).toBeLessThan(day + 10_000);
    // The retired key is still published, and the rotation is still under way.
    expect(await published()).toEqual([oldKey.id, newKey.id].sort());
    expect((await t.api.post('/v1/federation/keys/rotate')).status).toBe(409);

    // The rest: the second 24 hours.
    await enableTimeSkipping(client, workflowId);
    await waitUntil('the rotation workflow to end', async () => (await client.getHandle(workflowId).describe()).status.name === 'COMPLETED', 60_000);
    const after = await keys();
    const removed = after.find((k) => k.id === oldKey.id);
    expect(removed).toMatchObject({ state: 'removed', published: false, retired: activated.activated });
    const retiredFor = Date.parse(removed.removed) - Date.parse(removed.retired);
    expect(retiredFor).toBeGreaterThanOrEqual(day);
    expect(retiredFor).toBeLessThan(day + 10_000);
    expect(after.find((k) => k.id === newKey.id)).toMatchObject({ state: 'signing', retired: null });
    expect(await published()).toEqual([newKey.id]);
    const [run] = await runChain(workflowId);
    const fired = timersFiredAt(run.events);
    expect(fired).toHaveLength(2);
    // A rotation may start again once the old key is gone.
    const again = await t.api.post('/v1/federation/keys/rotate');
    expect(again.status).toBe(201);

    // An emergency rotation overtakes it: its workflow's steps, when their timers fire, change nothing.
    const overtaken = again.body.keys.find((k: any) => k.state === 'next');
    const emergency = await t.api.post('/v1/federation/keys/rotate/emergency');
    expect(emergency.status).toBe(201);
    const settled = (await keys()).map((k) => [k.id, k.state, k.removed]);
    await enableTimeSkipping(client, overtaken.id);
    await waitUntil('the overtaken rotation to end', async () => (await client.getHandle(overtaken.id).describe()).status.name === 'COMPLETED', 60_000);
    expect((await keys()).map((k) => [k.id, k.state, k.removed])).toEqual(settled);
    expect(settled.filter(([, state]) => state === 'signing')).toHaveLength(1);
  }, 120_000);
});
