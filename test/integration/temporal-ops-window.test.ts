import { Client, Connection } from '@temporalio/client';
import { createHash } from 'node:crypto';
import { runWorkflowId } from '../../workflows/ids';
import { startTestServer, testTemporalAddress, waitForRunEnd, type TestServer } from '../support/server';

// The ops window: Cairn's search attributes on the Temporal namespace find runs in the Temporal UI
// and CLI by their status, tool, requester, template, queue and source; the memo names the command.

let t: TestServer;
let connection: Connection;
let client: Client;
beforeAll(async () => {
  t = await startTestServer();
  connection = await Connection.connect({ address: testTemporalAddress() });
  client = new Client({ connection, namespace: t.config.temporalNamespace });
});
afterAll(async () => {
  await connection?.close();
  await t?.stop();
});

/** Visibility is eventually consistent: the workflow ids the query lists, once it lists `expected` (or the last answer at the deadline). */
async function listUntil(query: string, expected: string[], timeoutMs = 15_000): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ids: string[] = [];
    for await (const execution of client.workflow.list({ query })) ids.push(execution.workflowId);
    if (expected.every((id) => ids.includes(id)) || Date.now() > deadline) return ids.sort();
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('the server registers the attributes, and a failed run is found by CairnRunStatus while a succeeded one is not', async () => {
  const listed = await connection.operatorService.listSearchAttributes({ namespace: t.config.temporalNamespace });
  for (const name of ['CairnRunStatus', 'CairnTool', 'CairnRequester', 'CairnTemplate', 'CairnQueue', 'CairnSource']) {
    expect(Object.keys(listed.customAttributes ?? {})).toContain(name);
  }

  const failing = await t.api.post('/v1/runs', { tool: 'bash', command: 'exit 3' });
  const passing = await t.api.post('/v1/runs', { tool: 'bash', command: 'echo fine' });
  expect(failing.status).toBe(201);
  expect(passing.status).toBe(201);
  expect((await waitForRunEnd(t.api, failing.body.id)).status).toBe('failed');
  expect((await waitForRunEnd(t.api, passing.body.id)).status).toBe('succeeded');
  const failedId = runWorkflowId(failing.body.id);
  const passedId = runWorkflowId(passing.body.id);
  const ours = `WorkflowId IN ('${failedId}', '${passedId}')`;

  expect(await listUntil(`CairnRunStatus = 'failed' AND ${ours}`, [failedId])).toEqual([failedId]);
  expect(await listUntil(`CairnRunStatus = 'succeeded' AND ${ours}`, [passedId])).toEqual([passedId]);
  expect(await listUntil(`CairnTool = 'bash' AND CairnSource = 'api' AND ${ours}`, [failedId, passedId])).toEqual([failedId, passedId].sort());

  const described = await client.workflow.getHandle(failedId).describe();
  expect(described.memo).toEqual({
    command_digest: `sha256:${createHash('sha256').update('exit 3').digest('hex')}`,
    template_id: null,
  });
  const attributes = Object.fromEntries(described.typedSearchAttributes.getAll().map((pair) => [pair.key.name, pair.value]));
  expect(attributes).toMatchObject({ CairnRunStatus: 'failed', CairnTool: 'bash', CairnSource: 'api' });
  // A run on the shared pool (queue "") carries no CairnQueue: `CairnQueue IS NULL` finds it.
  expect(failing.body.queue).toBe('');
  expect(attributes.CairnQueue).toBeUndefined();
  expect(await listUntil(`CairnQueue IS NULL AND ${ours}`, [failedId, passedId])).toEqual([failedId, passedId].sort());
  expect(typeof attributes.CairnRequester).toBe('string');
  // The status followed the run by one upsert, at its end.
  expect(await statusUpsertsIn(failedId)).toBe(1);
});

/**
 * How many times a workflow upserted `CairnRunStatus` (each upsert a billable action on Temporal
 * Cloud; a graph's `patched()` also upserts Temporal's own `TemporalChangeVersion`, not counted).
 */
async function statusUpsertsIn(workflowId: string): Promise<number> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  return (history.events ?? []).filter((event) => event.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields?.CairnRunStatus).length;
}

test('with --temporal-run-status off, runs and pipeline steps carry no CairnRunStatus and never upsert it; the other attributes stay', async () => {
  const untracked = await startTestServer({ CAIRN_TEMPORAL_RUN_STATUS: 'off' });
  try {
    const run = await untracked.api.post('/v1/runs', { tool: 'bash', command: 'exit 3' });
    const pipeline = await untracked.api.post('/v1/pipelines', { steps: [{ name: 'one', tool: 'bash', command: 'echo one' }] });
    expect(run.status).toBe(201);
    expect(pipeline.status).toBe(201);
    expect((await waitForRunEnd(untracked.api, run.body.id)).status).toBe('failed');
    expect((await waitForRunEnd(untracked.api, pipeline.body.id)).status).toBe('succeeded');
    const [step] = (await untracked.api.get(`/v1/runs/${pipeline.body.id}/steps`)).body.steps as { id: string; status: string }[];
    expect(step.status).toBe('succeeded');

    for (const id of [run.body.id, pipeline.body.id, step.id]) {
      const workflowId = runWorkflowId(id);
      expect(await statusUpsertsIn(workflowId)).toBe(0);
      const described = await client.workflow.getHandle(workflowId).describe();
      const attributes = Object.fromEntries(described.typedSearchAttributes.getAll().map((pair) => [pair.key.name, pair.value]));
      expect(attributes.CairnRunStatus).toBeUndefined();
    }
    const described = await client.workflow.getHandle(runWorkflowId(run.body.id)).describe();
    const attributes = Object.fromEntries(described.typedSearchAttributes.getAll().map((pair) => [pair.key.name, pair.value]));
    expect(attributes).toMatchObject({ CairnTool: 'bash', CairnSource: 'api' });
    expect(described.memo).toEqual({ command_digest: `sha256:${createHash('sha256').update('exit 3').digest('hex')}`, template_id: null });
  } finally {
    await untracked.stop();
  }
});

test('a failed pipeline and its failed step are both found by CairnRunStatus', async () => {
  const { status, body: parent } = await t.api.post('/v1/pipelines', {
    steps: [
      { name: 'one', tool: 'bash', command: 'echo one' },
      { name: 'two', tool: 'bash', command: 'exit 4' },
    ],
  });
  expect(status).toBe(201);
  expect((await waitForRunEnd(t.api, parent.id)).status).toBe('failed');
  const steps = (await t.api.get(`/v1/runs/${parent.id}/steps`)).body.steps as { id: string; status: string }[];
  const failedStep = steps.find((s) => s.status === 'failed')!;
  const passedStep = steps.find((s) => s.status === 'succeeded')!;
  const ids = [parent.id, failedStep.id, passedStep.id].map(runWorkflowId);
  const expected = [runWorkflowId(parent.id), runWorkflowId(failedStep.id)].sort();
  const query = `CairnRunStatus = 'failed' AND WorkflowId IN (${ids.map((id) => `'${id}'`).join(', ')})`;
  expect(await listUntil(query, expected)).toEqual(expected);
  expect(await listUntil(`CairnRunStatus = 'succeeded' AND WorkflowId = '${runWorkflowId(passedStep.id)}'`, [runWorkflowId(passedStep.id)])).toEqual([
    runWorkflowId(passedStep.id),
  ]);
});
