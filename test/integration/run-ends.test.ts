import postgres from 'postgres';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

// Every run ends through one function: whatever ends it, the end is on the audit chain once, after
// the decision that caused it; a workflow step moving into its hold is on the chain too.
let t: TestServer;
let db: postgres.Sql;
beforeAll(async () => {
  t = await startTestServer();
  db = postgres(t.databaseUrl, { max: 2, onnotice: () => {} });
  await t.api.post('/v1/policies', { name: 'hold marked runs', command_contains: 'HOLD-ME' });
});
afterAll(async () => {
  await db?.end();
  await t?.stop();
});

async function chainKindsOf(runId: string): Promise<string[]> {
  const rows = await db<{ kind: string }[]>`SELECT body->>'kind' AS kind FROM audit_entries WHERE run_id = ${runId} ORDER BY seq`;
  return rows.map((r) => r.kind);
}

async function stepOf(workflowId: string, name: string) {
  const { body } = await t.api.get(`/v1/runs/${workflowId}/steps`);
  return body.steps.find((s: any) => s.step_name === name);
}

async function waitForStepStatus(workflowId: string, name: string, status: string) {
  for (let i = 0; i < 400; i++) {
    const step = await stepOf(workflowId, name);
    if (step?.status === status) return step;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`step ${name} never reached ${status}`);
}

const workflow = (approvalTimeout?: number) => ({
  steps: [
    { name: 'gate', type: 'approval', description: 'go on?', ...(approvalTimeout ? { approval_timeout: approvalTimeout } : {}) },
    { name: 'after', tool: 'bash', command: 'echo after', depends_on: ['gate'] },
  ],
});

test('a rejected run has its decision and then its end on the chain', async () => {
  const held = await t.api.post('/v1/runs', { tool: 'bash', command: 'echo HOLD-ME' });
  await t.api.post(`/v1/runs/${held.body.id}/reject`, { reason: 'not today' });
  const ended = await waitForRunEnd(t.api, held.body.id);
  expect(ended).toMatchObject({ status: 'rejected', error: 'rejected by an approver' });
  expect(await chainKindsOf(held.body.id)).toEqual(['run.submitted', 'run.decision', 'run.ended']);
});

test('an approval step that times out has its hold and its end on the chain', async () => {
  const template = await t.api.post('/v1/templates', { name: 'gate-timeout', ...workflow(1) });
  const run = await t.api.post(`/v1/templates/${template.body.id}/launch`, {});
  const ended = await waitForRunEnd(t.api, run.body.id);
  expect(ended.status).toBe('failed');
  const gate = await stepOf(run.body.id, 'gate');
  expect(gate).toMatchObject({ status: 'rejected', error: 'no decision within the approval timeout of 1 s' });
  expect(await chainKindsOf(gate.id)).toEqual(['run.held', 'run.ended']);
});

test('an approval step decided by an approver: its hold, the decision, then its end', async () => {
  const template = await t.api.post('/v1/templates', { name: 'gate-approved', ...workflow() });
  const run = await t.api.post(`/v1/templates/${template.body.id}/launch`, {});
  const gate = await waitForStepStatus(run.body.id, 'gate', 'held');
  const events = (await t.api.get(`/v1/runs/${gate.id}/events`)).body.events;
  // The hold's event carries the run (spec part B 6.1).
  expect(events.find((e: any) => e.event === 'run.held')).toMatchObject({ run: { id: gate.id, status: 'held' }, blocker: 'approval_needed' });
  await t.api.post(`/v1/runs/${gate.id}/approve`, {});
  expect((await waitForRunEnd(t.api, run.body.id)).status).toBe('succeeded');
  expect(await chainKindsOf(gate.id)).toEqual(['run.held', 'run.decision', 'run.ended']);
});

test('every ended run has exactly one end on the chain', async () => {
  const rows = await db<{ id: string; ends: number }[]>`
    SELECT r.id, (SELECT count(*)::int FROM audit_entries a WHERE a.run_id = r.id AND a.body->>'kind' = 'run.ended') AS ends
    FROM runs r WHERE r.finished_at IS NOT NULL`;
  expect(rows.length).toBeGreaterThan(4);
  expect(rows.filter((r) => r.ends !== 1)).toEqual([]);
});
