import postgres from 'postgres';
import { RUN_WORKFLOW, type RunWorkflowInput } from '../../workflows/definitions';
import { isChildOfThisProcess, processesMatching } from '../support/processes';
import { startTestServer, waitForRun, waitForRunEnd, type TestServer } from '../support/server';

// The edges of the run and graph workflows, end to end on the real server: a run that does not
// exist, an execution lost on every attempt, and a timer racing a person's answer.
let t: TestServer;
let db: postgres.Sql;
beforeAll(async () => {
  t = await startTestServer({ CAIRN_RUN_TIMEOUT: '1h' });
  db = postgres(t.databaseUrl, { max: 2, onnotice: () => {} });
});
afterAll(async () => {
  await db?.end();
  await t?.stop();
});

async function endsOnChain(runId: string): Promise<number> {
  const [{ n }] = await db<{ n: number }[]>`SELECT count(*)::int AS n FROM audit_entries WHERE run_id = ${runId} AND body->>'kind' = 'run.ended'`;
  return n;
}

async function finishedEvents(runId: string): Promise<number> {
  const { body } = await t.api.get(`/v1/runs/${runId}/events?limit=1000`);
  return body.events.filter((e: any) => e.event === 'run.finished').length;
}

test('a run workflow for a run that does not exist ends at once, without retries and without inventing a run', async () => {
  const temporal = t.server.context.temporal;
  const runId = 'run_01doesnotexist0000000000000';
  const started = Date.now();
  await temporal.workflow.execute<(input: RunWorkflowInput) => Promise<void>>(RUN_WORKFLOW, {
    workflowId: runId,
    taskQueue: t.config.poolQueue,
    args: [{ runId, timeoutSeconds: 0, leaseSeconds: 30 }],
  });
  // RunNotFound is not retried: five attempts would take more than fifteen seconds.
  expect(Date.now() - started).toBeLessThan(5_000);
  expect((await t.api.get(`/v1/runs/${runId}`)).status).toBe(404);
});

test('an execution lost on every attempt is requeued until its timeout, then ends failed, once', async () => {
  const { body: run } = await t.api.post('/v1/runs', { tool: 'bash', command: 'echo attempt $CAIRN_RUN_ATTEMPT; sleep 300', timeout: 15 });
  // Every attempt's tool launcher is killed as soon as its tool runs: each attempt fails and the
  // run is requeued (spec part A 3.1) until the run's timeout ends it. That a requeue has no count
  // to run out of (past five attempts) is durability.test.ts's to show.
  let killed = 0;
  for (;;) {
    const now = (await t.api.get(`/v1/runs/${run.id}`)).body;
    if (now.finished_at) break;
    // Killed once this attempt's own tool has written (the log keeps earlier attempts' lines), and
    // counted only when a launcher of this test's server was there to kill.
    if (now.status === 'running' && now.attempts > killed && (await t.api.get(`/v1/runs/${run.id}/logs`)).text.includes(`attempt ${now.attempts}\n`)) {
      let hit = false;
      for (const pid of processesMatching('launcher-process')) {
        if (!isChildOfThisProcess(pid)) continue;
        process.kill(Number(pid), 'SIGKILL');
        hit = true;
      }
      if (hit) killed = now.attempts;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const ended = await waitForRunEnd(t.api, run.id, 60_000);
  expect(ended).toMatchObject({ status: 'failed', error: 'timed out after 15 s' });
  expect(ended.attempts).toBeGreaterThan(1);
  expect(killed).toBeGreaterThan(1);
  expect(await endsOnChain(run.id)).toBe(1);
  expect(await finishedEvents(run.id)).toBe(1);
}, 120_000);

test("a store that refuses a run's end does not run the tool again: the end is recorded once it is back", async () => {
  const { body: run } = await t.api.post('/v1/runs', { tool: 'bash', command: 'sleep 2; echo ran once' });
  // The database refuses this run's end (and only that write) until the trigger is dropped.
  await db.unsafe(`
    CREATE FUNCTION refuse_end() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'the store refuses this write for now'; END $$;
    CREATE TRIGGER refuse_end BEFORE UPDATE ON runs FOR EACH ROW
      WHEN (NEW.id = '${run.id}' AND NEW.finished_at IS NOT NULL AND OLD.finished_at IS NULL) EXECUTE FUNCTION refuse_end();`);
  try {
    await waitForRun(t.api, run.id, (r) => r.status === 'running');
    // The tool ends about two seconds in; its end is refused for a few seconds more.
    await new Promise((r) => setTimeout(r, 6000));
    expect((await t.api.get(`/v1/runs/${run.id}`)).body).toMatchObject({ status: 'running', attempts: 1 });
  } finally {
    await db.unsafe('DROP TRIGGER refuse_end ON runs; DROP FUNCTION refuse_end();');
  }
  const ended = await waitForRunEnd(t.api, run.id, 30_000);
  expect(ended).toMatchObject({ status: 'succeeded', exit_code: 0, attempts: 1 });
  const log = (await t.api.get(`/v1/runs/${run.id}/logs`)).text;
  expect(log.match(/ran once/g)).toHaveLength(1);
  expect(await endsOnChain(run.id)).toBe(1);
  expect(await finishedEvents(run.id)).toBe(1);
}, 60_000);

test('a timeout racing a cancel ends the run once, one way or the other', async () => {
  for (const lead of [-150, 0, 150]) {
    const { body: run } = await t.api.post('/v1/runs', { tool: 'bash', command: 'sleep 30', timeout: 2 });
    const startedAt = Date.now();
    await waitForRun(t.api, run.id, (r) => r.status === 'running');
    await new Promise((r) => setTimeout(r, Math.max(0, startedAt + 2000 + lead - Date.now())));
    await t.api.post(`/v1/runs/${run.id}/cancel`);
    const ended = await waitForRunEnd(t.api, run.id);
    // Either end may win the race; each says which it was.
    expect([
      ['canceled', 'canceled by admin'],
      ['failed', 'timed out after 2 s'],
    ]).toContainEqual([ended.status, ended.error]);
    expect(await endsOnChain(run.id)).toBe(1);
    expect(await finishedEvents(run.id)).toBe(1);
  }
});

test('an approval racing its approval_timeout: the decision or the timeout counts, never both', async () => {
  const template = await t.api.post('/v1/templates', {
    name: 'race-the-gate',
    steps: [
      { name: 'gate', type: 'approval', approval_timeout: 1 },
      { name: 'after', tool: 'bash', command: 'echo after', depends_on: ['gate'] },
    ],
  });
  for (const lead of [-100, 0, 100]) {
    const { body: workflow } = await t.api.post(`/v1/templates/${template.body.id}/launch`, {});
    let gate: any;
    for (;;) {
      gate = (await t.api.get(`/v1/runs/${workflow.id}/steps`)).body.steps.find((s: any) => s.step_name === 'gate');
      if (gate.status === 'held') break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const expiresAt = Date.parse(gate.hold.expires_at);
    await new Promise((r) => setTimeout(r, Math.max(0, expiresAt + lead - Date.now())));
    const answer = await t.api.post(`/v1/runs/${gate.id}/approve`, {});
    const ended = await waitForRunEnd(t.api, workflow.id);
    const settled = await waitForRunEnd(t.api, gate.id);
    if (answer.status === 200) {
      expect(settled.status).toBe('succeeded');
      expect(ended.status).toBe('succeeded');
    } else {
      expect(answer.status).toBe(409);
      expect(settled).toMatchObject({ status: 'rejected', error: 'no decision within the approval timeout of 1 s' });
    }
    const [{ n }] = await db<{ n: number }[]>`SELECT count(*)::int AS n FROM decision_records WHERE run_id = ${gate.id}`;
    expect(n).toBe(answer.status === 200 ? 1 : 0);
    expect(await endsOnChain(gate.id)).toBe(1);
  }
});
