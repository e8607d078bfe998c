import { startRunWorkflow } from '../../services/runs/runs';
import { getRun } from '../../store/runs';
import { startTestServer, waitForRun, waitForRunEnd, type TestServer } from '../support/server';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.stop();
});

async function submit(command: string): Promise<any> {
  const { status, body } = await t.api.post('/v1/runs', { tool: 'bash', command });
  if (status !== 201) throw new Error(`submit: ${status} ${JSON.stringify(body)}`);
  return body;
}

/** Starts the run's workflow again, as the sweeper would after a lost record of the first start. */
async function startAgain(runId: string): Promise<void> {
  await startRunWorkflow(t.server.context, (await getRun(t.server.context.sql, runId))!);
}

const execution = (runId: string) => t.server.context.temporal.workflow.getHandle(runId).describe();

test('a finished run is never executed again when its workflow is started again', async () => {
  const ended = await waitForRunEnd(t.api, (await submit('echo once')).id);
  // The run's end is recorded just before its workflow completes.
  await t.server.context.temporal.workflow.getHandle(ended.id).result();
  const first = await execution(ended.id);
  expect(first.status.name).toBe('COMPLETED');

  await startAgain(ended.id);
  const after = await execution(ended.id);
  expect(after.runId).toBe(first.runId);
  expect(after.status.name).toBe('COMPLETED');
  expect((await t.api.get(`/v1/runs/${ended.id}/events`)).body.events.map((e: any) => e.event)).toEqual(['run.created', 'run.started', 'run.finished']);
});

test('starting a running run\'s workflow again leaves the one running workflow to finish the run once', async () => {
  const run = await submit('sleep 1; echo done');
  await waitForRun(t.api, run.id, (r) => r.status === 'running');
  const first = await execution(run.id);

  await startAgain(run.id);
  expect((await execution(run.id)).runId).toBe(first.runId);
  const ended = await waitForRunEnd(t.api, run.id);
  expect(ended).toMatchObject({ status: 'succeeded', attempts: 1 });
  expect((await t.api.get(`/v1/runs/${run.id}/logs`)).text).toBe('done\n');
});
