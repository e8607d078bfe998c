import { randomBytes } from 'node:crypto';
import { startStatementTally, statementTally } from '../../store/db';
import { readOwedEventsUpTo, recordUnheardOwedEvents } from '../../store/notifications';
import { recordOwedEventEffects } from '../../services/notifications/notification-recorder';
import { startReceiver, type Receiver } from '../support/receivers';
import { ok, settledDeliveries } from '../support/notifications';
import { rowsReadOf } from '../support/database';
import { waitUntil } from '../support/schedules';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

// A run's start and end are owed to whatever hears them (store/runs.ts updateRunIf). When nothing
// can (no attachment, no notifications of the run's or its template's, and no server-wide channel
// or extension notifier on the server recording them), one statement records the events of every
// such run in the dispatcher's batch and completes their outbox effects (store/notifications.ts
// recordUnheardOwedEvents); otherwise each run's are read, decided and settled, two statements,
// and the dispatcher completes the effects. Both end the same way on the run's notifications.

let t: TestServer;
let receiver: Receiver;

beforeAll(async () => {
  receiver = await startReceiver();
  t = await startTestServer({
    SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
    SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
    SERVICE_EGRESS_ALLOW: '127.0.0.0/8',
  });
});
afterAll(async () => {
  await t?.stop();
  await receiver?.close();
});

/** The run's owed events once both are recorded: `event:state:deliveries`. */
async function recordedEvents(runId: string): Promise<string[]> {
  let events: any[] = [];
  await waitUntil(`both events of ${runId} recorded`, async () => {
    events = (await ok(await t.api.get(`/v1/runs/${runId}/notifications`), 200)).events;
    return events.length === 2 && events.every((e) => e.state !== 'owed');
  });
  return events.map((e) => `${e.event}:${e.state}:${e.deliveries.length}`);
}

/** How many of the tallied statements start with `head`. */
function sentStarting(tally: [string, number][], head: string): number {
  return tally.filter(([kind]) => kind.startsWith(head)).reduce((n, [, count]) => n + count, 0);
}

test('a run nothing hears has its start and end recorded, and their effects completed, by the batch statement alone', async () => {
  startStatementTally();
  const run = await ok(await t.api.post('/v1/runs', { tool: 'bash', command: 'true' }));
  await waitForRunEnd(t.api, run.id);
  expect(await recordedEvents(run.id)).toEqual(['run.started:recorded:0', 'run.finished:recorded:0']);
  const tally = statementTally();
  expect(sentStarting(tally, 'WITH unheard_recordings AS')).toBeGreaterThanOrEqual(1);
  // No read, no settling, and no separate completion of the effects.
  expect(sentStarting(tally, 'WITH owed AS')).toBe(0);
  expect(sentStarting(tally, 'WITH still_owed AS')).toBe(0);
  expect(sentStarting(tally, 'DELETE FROM outbox')).toBe(0);
  const sql = t.server.context.sql;
  expect(await sql`SELECT id FROM outbox WHERE effect = 'event.record' AND subject = ${run.id}`).toHaveLength(0);
});

/**
 * An `event.record` effect owed for a run's event `seq` (and the event owed), kept from the
 * dispatchers for an hour so that only the test carries it out.
 */
async function oweRecording(runId: string, seq: number): Promise<string> {
  const sql = t.server.context.sql;
  await sql`INSERT INTO notification_events (subject_id, seq, event) VALUES (${runId}, ${seq}, 'run.finished')`;
  const [{ id }] = await sql<{ id: string }[]>`
    INSERT INTO outbox (effect, subject, payload, due_at) VALUES ('event.record', ${runId}, ${sql.json({ seq })}, now() + interval '1 hour') RETURNING id::text AS id`;
  return id;
}

/** A run event of the run that no notification event is owed for: one to owe in a test. */
async function unannouncedSeq(runId: string): Promise<number> {
  const [{ seq }] = await t.server.context.sql<{ seq: number }[]>`
    SELECT seq FROM run_events e WHERE run_id = ${runId} AND NOT EXISTS (SELECT 1 FROM notification_events n WHERE n.subject_id = e.run_id AND n.seq = e.seq)
    ORDER BY seq LIMIT 1`;
  return seq;
}

test('the batch records and completes only the runs nothing hears whose owed events all announce', async () => {
  const sql = t.server.context.sql;
  const template = await ok(await t.api.post('/v1/templates', { name: 'heard in a batch', tool: 'bash', command: 'true' }));
  const hook = await ok(await t.api.post('/v1/notifications', { name: 'batch hook', kind: 'webhook', url: `${receiver.url}/batch` }));
  await ok(await t.api.post(`/v1/notifications/${hook.id}/attachments`, { object_kind: 'template', object_id: template.id, event: 'success' }));
  const unheard = await ok(await t.api.post('/v1/runs', { tool: 'bash', command: 'true' }));
  const unannounced = await ok(await t.api.post('/v1/runs', { tool: 'bash', command: 'true' }));
  const heard = await ok(await t.api.post(`/v1/templates/${template.id}/launch`, {}));
  for (const run of [unheard, unannounced, heard]) {
    await waitForRunEnd(t.api, run.id);
    await recordedEvents(run.id);
  }
  const unheardSeq = await unannouncedSeq(unheard.id);
  const recordings = [
    { runId: unheard.id, seq: unheardSeq, effectId: await oweRecording(unheard.id, unheardSeq) },
    // Owed for an event with no run event behind it: left for the recorder to settle skipped.
    { runId: unannounced.id, seq: 1000, effectId: await oweRecording(unannounced.id, 1000) },
    { runId: heard.id, seq: await unannouncedSeq(heard.id), effectId: '' },
  ];
  recordings[2].effectId = await oweRecording(heard.id, recordings[2].seq);

  expect(await recordUnheardOwedEvents(sql, recordings)).toEqual([recordings[0].effectId]);
  const stateOf = async ({ runId, seq }: { runId: string; seq: number }) =>
    (await sql<{ state: string }[]>`SELECT state FROM notification_events WHERE subject_id = ${runId} AND seq = ${seq}`)[0]?.state;
  expect(await Promise.all(recordings.map(stateOf))).toEqual(['recorded', 'owed', 'owed']);
  const left = await sql<{ id: string }[]>`SELECT id::text AS id FROM outbox WHERE id IN ${sql(recordings.map((r) => r.effectId))} ORDER BY id`;
  expect(left.map((row) => row.id)).toEqual([recordings[1].effectId, recordings[2].effectId]);
  // Carried out again, the batch finds nothing left to record for the first and leaves the others.
  expect(await recordUnheardOwedEvents(sql, recordings)).toEqual([]);
  await sql`DELETE FROM outbox WHERE id IN ${sql(recordings.map((r) => r.effectId))}`;
  for (const { runId, seq } of recordings.slice(1)) await sql`DELETE FROM notification_events WHERE subject_id = ${runId} AND seq = ${seq}`;
});

test('a run a target hears is read and decided, and its target is told', async () => {
  const template = await ok(await t.api.post('/v1/templates', { name: 'heard', tool: 'bash', command: 'true' }));
  const hook = await ok(await t.api.post('/v1/notifications', { name: 'heard hook', kind: 'webhook', url: `${receiver.url}/heard` }));
  await ok(await t.api.post(`/v1/notifications/${hook.id}/attachments`, { object_kind: 'template', object_id: template.id, event: 'success' }));
  startStatementTally();
  const run = await ok(await t.api.post(`/v1/templates/${template.id}/launch`, {}));
  await waitForRunEnd(t.api, run.id);
  const [delivery] = await settledDeliveries(t.api, run.id, 1);
  expect(delivery).toMatchObject({ target_id: hook.id, status: 'arrived' });
  expect(await recordedEvents(run.id)).toEqual(['run.started:recorded:0', 'run.finished:recorded:1']);
  expect(sentStarting(statementTally(), 'WITH still_owed AS')).toBeGreaterThanOrEqual(1);
  expect(receiver.received.some((r) => r.path === '/heard')).toBe(true);
});

test('a run with notifications of its own is read and decided too', async () => {
  startStatementTally();
  const run = await ok(await t.api.post('/v1/runs', { tool: 'bash', command: 'true', notifications: [{ kind: 'webhook', url: `${receiver.url}/own` }] }));
  await waitForRunEnd(t.api, run.id);
  expect(await recordedEvents(run.id)).toEqual(['run.started:recorded:0', 'run.finished:recorded:0']);
  expect(sentStarting(statementTally(), 'WITH still_owed AS')).toBeGreaterThanOrEqual(1);
  await waitUntil('the run\'s own webhook', async () => receiver.received.some((r) => r.path === '/own'), 10_000);
});

/** A run ended with its owed events recorded, and one of its run events no notification event is owed for. */
async function endedRunAndUnannouncedSeq(): Promise<{ run: { id: string }; seq: number }> {
  const run = await ok(await t.api.post('/v1/runs', { tool: 'bash', command: 'true' }));
  await waitForRunEnd(t.api, run.id);
  await recordedEvents(run.id);
  return { run, seq: await unannouncedSeq(run.id) };
}

test('a batch the statement cannot take is recorded one run at a time instead', async () => {
  const sql = t.server.context.sql;
  const { run, seq } = await endedRunAndUnannouncedSeq();
  const effectId = await oweRecording(run.id, seq);
  const now = new Date();
  const outcome = await recordOwedEventEffects(t.server.context, [
    { id: effectId, effect: 'event.record', subject: run.id, payload: { seq }, created_at: now, attempts: 1 },
    // An id no outbox row can have: the batch statement refuses the whole batch.
    { id: 'not-an-id', effect: 'event.record', subject: 'run_gone', payload: { seq: 1 }, created_at: now, attempts: 1 },
  ]);
  expect([...outcome.completed]).toEqual([]);
  expect([...outcome.failed.keys()]).toEqual([]);
  expect((await sql<{ state: string }[]>`SELECT state FROM notification_events WHERE subject_id = ${run.id} AND seq = ${seq}`)[0].state).toBe('recorded');
  // Recorded one run at a time, the effect is left for the dispatcher to complete.
  expect(await sql`SELECT id FROM outbox WHERE id = ${effectId}`).toHaveLength(1);
  await sql`DELETE FROM outbox WHERE id = ${effectId}`;
});

test("a run's check reads only the attachments of its own scopes, however many the install holds", async () => {
  const sql = t.server.context.sql;
  const { run, seq } = await endedRunAndUnannouncedSeq();
  const hook = await ok(await t.api.post('/v1/notifications', { name: 'elsewhere hook', kind: 'webhook', url: `${receiver.url}/elsewhere` }));
  await sql`
    INSERT INTO notification_attachments (id, target_id, object_kind, object_id, event, created_by)
    SELECT 'att_elsewhere' || g, ${hook.id}, (ARRAY['template', 'schedule', 'project', 'org'])[1 + g % 4], 'obj_elsewhere' || g, 'success', 'test'
    FROM generate_series(1, 2000) g`;
  await sql`ANALYZE notification_attachments`;
  try {
    // The batch: the run's events are recorded and the effect is none the outbox holds.
    expect(
      await rowsReadOf(sql, 'notification_attachments', async (tx) => {
        expect(await recordUnheardOwedEvents(tx, [{ effectId: '-1', runId: run.id, seq: 2 }])).toEqual([]);
      }),
    ).toBe(0);
    // The per-run read of an event owed: it finds the run heard by nothing.
    expect(
      await rowsReadOf(sql, 'notification_attachments', async (tx) => {
        await tx`INSERT INTO notification_events (subject_id, seq, event) VALUES (${run.id}, ${seq}, 'run.finished')`;
        expect((await readOwedEventsUpTo(tx, run.id, seq))?.hearing).toEqual([]);
      }),
    ).toBe(0);
  } finally {
    await sql`DELETE FROM notification_attachments WHERE id LIKE 'att_elsewhere%'`;
  }
});
