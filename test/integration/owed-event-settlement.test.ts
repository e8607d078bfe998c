import { connectDatabase, type Sql } from '../../store/db';
import { readOwedEventsUpTo, settleOwedEvents, type EventSettlement, type NewDelivery } from '../../store/notifications';
import { createTestDatabase } from '../support/database';

// The recorder reads a subject's owed events without a lock, decides, and settles them only if
// they are still the ones owed (store/notifications.ts settleOwedEvents). These are the races it
// must win or lose cleanly: a loser writes nothing, and reads again.

const SUBJECT = 'sch_owed@2026-11-28T00:00:00.000Z';
const TARGET = 'ntg_owed';

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let sql: Sql;

beforeAll(async () => {
  database = await createTestDatabase();
  sql = connectDatabase(database.url, { max: 8 });
});
afterAll(async () => {
  await sql?.end({ timeout: 5 });
  await database?.drop();
});

beforeEach(async () => {
  await sql`DELETE FROM skipped_fires`;
  await sql`DELETE FROM notification_targets`;
  await sql`DELETE FROM outbox`;
  await sql`INSERT INTO notification_targets (id, name, kind, created_by) VALUES (${TARGET}, 'owed', 'webhook', 'acc_test')`;
  // A skipped fire is a subject with no run behind it: three events owed, in order.
  await sql`INSERT INTO skipped_fires (id, schedule_id, fire_at, body) VALUES (${SUBJECT}, 'sch_owed', now(), '{}')`;
  await sql`
    INSERT INTO notification_events (subject_id, subject_kind, seq, event, state)
    SELECT ${SUBJECT}, 'skipped_fire', seq, 'schedule.skipped', 'owed' FROM generate_series(1, 3) AS seq`;
});

const recorded = (seqs: number[]): EventSettlement[] => seqs.map((seq) => ({ seq, state: 'recorded', reason: null }));
const delivering = (seqs: number[]): NewDelivery[] =>
  seqs.map((seq) => ({ target_id: TARGET, subject_id: SUBJECT, seq, event: 'schedule.skipped', status: 'pending', reason: null }));
const handOff = [{ effect: 'delivery.hand_off' as const, subject: TARGET, payload: { subject_id: SUBJECT } }];
/** A recorder's settlement of the events it read, recording them up to the last of them. */
const settle = (seqs: number[], db: Sql = sql) => settleOwedEvents(db, SUBJECT, Math.max(...seqs), recorded(seqs), delivering(seqs), handOff);

async function stored() {
  const events = await sql<{ seq: number; state: string }[]>`SELECT seq, state FROM notification_events WHERE subject_id = ${SUBJECT} ORDER BY seq`;
  const deliveries = await sql<{ seq: number }[]>`SELECT seq FROM notification_deliveries WHERE subject_id = ${SUBJECT} ORDER BY seq`;
  const effects = await sql<{ id: string }[]>`SELECT id FROM outbox WHERE effect = 'delivery.hand_off'`;
  return { events: events.map((e) => `${e.seq}:${e.state}`), deliveries: deliveries.map((d) => d.seq), effects: effects.length };
}

test('the events read are settled with their deliveries and hand-off, in one statement', async () => {
  const owed = await readOwedEventsUpTo(sql, SUBJECT, 3);
  expect(owed?.owed.map((one) => one.seq)).toEqual([1, 2, 3]);
  const ids = await settle([1, 2, 3]);
  expect(ids).toHaveLength(1);
  expect(await stored()).toEqual({ events: ['1:recorded', '2:recorded', '3:recorded'], deliveries: [1, 2, 3], effects: 1 });
  expect(await readOwedEventsUpTo(sql, SUBJECT, 3)).toBeUndefined();
});

test('a settlement over events another server recorded since they were read writes nothing', async () => {
  // Another server, recording event 2, read 1 and 2 and recorded them first.
  expect(await settle([1, 2])).toBeDefined();
  // This one had read 1 to 3: it must not record 3 ahead of its turn, nor 1 and 2 again.
  expect(await settle([1, 2, 3])).toBeUndefined();
  expect(await stored()).toEqual({ events: ['1:recorded', '2:recorded', '3:owed'], deliveries: [1, 2], effects: 1 });
  // Read again, it records what is left.
  expect((await readOwedEventsUpTo(sql, SUBJECT, 3))?.owed.map((one) => one.seq)).toEqual([3]);
  expect(await settle([3])).toBeDefined();
  expect(await stored()).toEqual({ events: ['1:recorded', '2:recorded', '3:recorded'], deliveries: [1, 2, 3], effects: 2 });
});

test('a settlement waits for a server still recording an earlier event, then writes nothing when that server recorded it', async () => {
  let commit!: () => void;
  const committing = new Promise<void>((resolve) => (commit = resolve));
  let locked!: () => void;
  const holding = new Promise<void>((resolve) => (locked = resolve));
  // The other server's settlement of event 1, held open inside its transaction.
  const other = sql.begin(async (tx) => {
    await tx`SELECT seq FROM notification_events WHERE subject_id = ${SUBJECT} AND seq = 1 FOR UPDATE`;
    locked();
    await committing;
    await tx`UPDATE notification_events SET state = 'recorded', recorded_at = now() WHERE subject_id = ${SUBJECT} AND seq = 1`;
  });
  await holding;
  let answered = false;
  const mine = settle([1, 2, 3]).finally(() => (answered = true));
  await new Promise((resolve) => setTimeout(resolve, 300));
  expect(answered).toBe(false);
  commit();
  await other;
  expect(await mine).toBeUndefined();
  expect(await stored()).toEqual({ events: ['1:recorded', '2:owed', '3:owed'], deliveries: [], effects: 0 });
});

test('of many servers settling the same events at once, exactly one writes them', async () => {
  const racers = connectDatabase(database.url, { max: 8 });
  try {
    const answers = await Promise.all(Array.from({ length: 8 }, () => settle([1, 2, 3], racers)));
    expect(answers.filter((ids) => ids !== undefined)).toHaveLength(1);
    expect(await stored()).toEqual({ events: ['1:recorded', '2:recorded', '3:recorded'], deliveries: [1, 2, 3], effects: 1 });
  } finally {
    await racers.end({ timeout: 5 });
  }
});
