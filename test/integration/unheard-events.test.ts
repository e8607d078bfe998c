import { randomBytes } from 'node:crypto';
import { startStatementTally, statementTally } from '../../store/db';
import { startReceiver, type Receiver } from '../support/receivers';
import { ok, settledDeliveries } from '../support/notifications';
import { waitUntil } from '../support/schedules';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

// A run's start and end are owed to whatever hears them (store/runs.ts updateRunIf). When nothing
// can (no attachment, no notifications of the run's or its template's, and no server-wide channel
// or extension notifier on the server recording them), the read of each records it, in one
// statement (store/notifications.ts readOwedEventsUpTo); otherwise it is read, decided and
// settled, two. Both end the same way on the run's notifications.

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

test('a run nothing hears has its start and end recorded by their reads, with no settling statement', async () => {
  startStatementTally();
  const run = await ok(await t.api.post('/v1/runs', { tool: 'bash', command: 'true' }));
  await waitForRunEnd(t.api, run.id);
  expect(await recordedEvents(run.id)).toEqual(['run.started:recorded:0', 'run.finished:recorded:0']);
  const tally = statementTally();
  expect(sentStarting(tally, 'WITH owed AS')).toBeGreaterThanOrEqual(1);
  expect(sentStarting(tally, 'WITH still_owed AS')).toBe(0);
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
