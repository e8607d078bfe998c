import postgres from 'postgres';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

// Someone with write access to the database (never a run: runs cannot reach it) moves a held run
// out of its hold. The chain records no decision for that move, so nothing executes it.
let t: TestServer;
let db: postgres.Sql;
beforeAll(async () => {
  // The sweeper, which starts the workflow of a released run, looks every 250 ms rather than every 2 s.
  t = await startTestServer({}, { sweepIntervalMs: 250 });
  db = postgres(t.databaseUrl, { max: 2, onnotice: () => {} });
  await t.api.post('/v1/policies', { name: 'hold everything marked', command_contains: 'HOLD-ME' });
});
afterAll(async () => {
  await db?.end();
  await t?.stop();
});

/** What an intruder who can write the database also forges: the start a released run owes (store/outbox.ts). */
async function owesStart(runId: string): Promise<void> {
  await db`INSERT INTO outbox (effect, subject) VALUES ('run.start', ${runId})`;
}

test('a held run released in the database without a decision is never executed, and verify names it', async () => {
  const held = await t.api.post('/v1/runs', { tool: 'bash', command: 'echo HOLD-ME executed' });
  expect(held.body.status).toBe('held');
  await db`UPDATE runs SET status = 'pending', hold = NULL WHERE id = ${held.body.id}`;
  await owesStart(held.body.id);

  // Its start owed as a released run's would be: the dispatcher starts its workflow; execution refuses it.
  const ended = await waitForRunEnd(t.api, held.body.id, 30_000);
  expect(ended.status).toBe('failed');
  expect(ended.error).toBe(`not executed: run ${held.body.id} was held for approval and no recorded decision released it`);
  expect((await t.api.get(`/v1/runs/${held.body.id}/logs`)).text).toBe('');
  const events = (await t.api.get(`/v1/runs/${held.body.id}/events`)).body.events.map((e: any) => e.event);
  expect(events).not.toContain('run.started');

  const verify = await t.api.get('/v1/audit/verify');
  expect(verify.body.ok).toBe(false);
  expect(verify.body.reason).toBe('run_state_unexplained');
  expect(verify.body.unexplained_runs).toEqual([expect.objectContaining({ run_id: held.body.id, status: 'failed' })]);
});

test('a held pipeline released in the database runs none of its steps', async () => {
  const held = await t.api.post('/v1/pipelines', { steps: [{ tool: 'bash', command: 'echo HOLD-ME step one' }, { tool: 'bash', command: 'echo two' }] });
  expect(held.body.status).toBe('held');
  await db`UPDATE runs SET status = 'pending', hold = NULL WHERE id = ${held.body.id}`;
  await owesStart(held.body.id);
  const ended = await waitForRunEnd(t.api, held.body.id, 30_000);
  expect(ended.status).toBe('failed');
  const steps = (await t.api.get(`/v1/runs/${held.body.id}/steps`)).body.steps;
  expect(steps.map((s: any) => s.status)).toEqual(['canceled', 'canceled']);
  expect(steps.every((s: any) => s.log_bytes === 0 && s.started_at === null)).toBe(true);
});

test('an approved run still executes', async () => {
  const held = await t.api.post('/v1/runs', { tool: 'bash', command: 'echo HOLD-ME approved' });
  await t.api.post(`/v1/runs/${held.body.id}/approve`, {});
  const ended = await waitForRunEnd(t.api, held.body.id, 30_000);
  expect(ended.status).toBe('succeeded');
});

test('another run’s approval moved onto a held run by its run_id column, or a body column forged, releases nothing', async () => {
  const approved = await t.api.post('/v1/runs', { tool: 'bash', command: 'echo HOLD-ME first' });
  await t.api.post(`/v1/runs/${approved.body.id}/approve`, {});
  await waitForRunEnd(t.api, approved.body.id, 30_000);
  const held = await t.api.post('/v1/runs', { tool: 'bash', command: 'echo HOLD-ME second' });
  // The chain's text is the entry: the columns beside it are what an intruder can edit unnoticed.
  await db`UPDATE audit_entries SET run_id = ${held.body.id} WHERE run_id = ${approved.body.id} AND body->>'kind' = 'run.decision'`;
  await db`UPDATE audit_entries SET body = jsonb_set(body, '{status}', '"pending"') WHERE run_id = ${held.body.id} AND body->>'kind' = 'run.submitted'`;
  await db`UPDATE runs SET status = 'pending', hold = NULL WHERE id = ${held.body.id}`;
  await owesStart(held.body.id);
  const ended = await waitForRunEnd(t.api, held.body.id, 30_000);
  expect(ended.error).toBe(`not executed: run ${held.body.id} was held for approval and no recorded decision released it`);
});
