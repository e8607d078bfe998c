import pino from 'pino';
import { ChannelWakeups } from '../../services/channel-wakeups';
import { connectDatabase, type Sql } from '../../store/db';
import { createTestDatabase } from '../support/database';

// A server's wakeups from PostgreSQL NOTIFY (services/channel-wakeups.ts): what wakes live run
// streams and waiting relay claims when another server writes.

const CHANNEL = 'cairn_test_wakeups';
/** Far past anything a notification takes to arrive, so a wait that ends early was woken. */
const LONG_WAIT_MS = 20_000;

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let listening: Sql;
let writer: Sql;
let wakeups: ChannelWakeups;
beforeAll(async () => {
  database = await createTestDatabase({ empty: true });
  listening = connectDatabase(database.url, { max: 1 });
  // Another pool, as another server's: the notification crosses PostgreSQL, not this process.
  writer = connectDatabase(database.url, { max: 1 });
  wakeups = new ChannelWakeups(listening, CHANNEL, pino({ level: 'silent' }));
  await wakeups.start();
});
afterAll(async () => {
  await wakeups?.stop();
  await writer?.end();
  await listening?.end();
  await database?.drop();
});

const timed = async (wait: Promise<void>) => {
  const started = Date.now();
  await wait;
  return Date.now() - started;
};

test("a notification wakes every waiter on its key at its commit, and none on another key", async () => {
  const first = timed(wakeups.waitFor('queue-a', LONG_WAIT_MS));
  const second = timed(wakeups.waitFor('queue-a', LONG_WAIT_MS));
  const other = timed(wakeups.waitFor('queue-b', 1500));
  await writer.begin(async (tx) => {
    await tx`SELECT pg_notify(${CHANNEL}, 'queue-a')`;
    // Not before the commit.
    await new Promise((resolve) => setTimeout(resolve, 500));
  });
  expect(await first).toBeLessThan(LONG_WAIT_MS / 2);
  expect(await first).toBeGreaterThanOrEqual(450);
  expect(await second).toBeLessThan(LONG_WAIT_MS / 2);
  expect(await other).toBeGreaterThanOrEqual(1400);
});

test('a wait ends at its limit with no notification, and at once when its signal aborts', async () => {
  expect(await timed(wakeups.waitFor('quiet', 300))).toBeGreaterThanOrEqual(280);
  const hangUp = new AbortController();
  const waiting = timed(wakeups.waitFor('quiet', LONG_WAIT_MS, hangUp.signal));
  hangUp.abort();
  expect(await waiting).toBeLessThan(1000);
  expect(await timed(wakeups.waitFor('quiet', LONG_WAIT_MS, hangUp.signal))).toBeLessThan(1000);
});

test('a waiter woken or ended is forgotten: a later notification wakes only the waiters then waiting', async () => {
  await Promise.all([wakeups.waitFor('again', 200), wakeups.waitFor('again', 200)]);
  const later = timed(wakeups.waitFor('again', LONG_WAIT_MS));
  await writer`SELECT pg_notify(${CHANNEL}, 'again')`;
  expect(await later).toBeLessThan(LONG_WAIT_MS / 2);
  // Nothing is left waiting on either key: a notification with no waiter is simply dropped.
  await writer`SELECT pg_notify(${CHANNEL}, 'again')`;
  expect((wakeups as unknown as { waiting: Map<string, unknown> }).waiting.size).toBe(0);
});
