import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.stop();
});

async function stepsOf(runId: string, path = 'steps') {
  const { status, body } = await t.api.get(`/v1/runs/${runId}/${path}`);
  expect(status).toBe(200);
  return body[path] as any[];
}

test('a pipeline runs its steps in order as one parent run, each step a run with its own log', async () => {
  const { status, body: parent } = await t.api.post('/v1/pipelines', {
    extra_vars: { TARGET: 'web' },
    steps: [
      { name: 'build', tool: 'bash', command: 'echo "build $TARGET"; sleep 0.2' },
      { tool: 'python', command: 'import os; print("test", os.environ["TARGET"], os.environ["LEVEL"])', extra_vars: { LEVEL: 'unit' } },
      { name: 'ship', tool: 'bash', command: 'echo ship' },
    ],
  });
  expect(status).toBe(201);
  expect(parent).toMatchObject({ kind: 'pipeline', tool: 'pipeline', status: 'pending' });
  const ended = await waitForRunEnd(t.api, parent.id);
  expect(ended.status).toBe('succeeded');

  const steps = await stepsOf(parent.id);
  expect(steps.map((s) => [s.step_name, s.kind, s.status])).toEqual([
    ['build', 'step', 'succeeded'],
    ['step-2', 'step', 'succeeded'],
    ['ship', 'step', 'succeeded'],
  ]);
  expect(steps.every((s) => s.parent_run_id === parent.id)).toBe(true);
  // In order: each step started after the one before it ended.
  for (let i = 1; i < steps.length; i++) expect(Date.parse(steps[i].started_at)).toBeGreaterThanOrEqual(Date.parse(steps[i - 1].finished_at));
  expect((await t.api.get(`/v1/runs/${steps[0].id}/logs`)).text).toBe('build web\n');
  expect((await t.api.get(`/v1/runs/${steps[1].id}/logs`)).text).toBe('test web unit\n');
  const kinds = (await t.api.get(`/v1/runs/${parent.id}/events`)).body.events.map((e: any) => e.event);
  expect(kinds).toEqual(['run.created', 'run.started', 'run.finished']);
  // The parent's evidence names its steps and how each ended.
  const evidence = (await t.api.get(`/v1/runs/${parent.id}/evidence?format=json`)).body;
  expect(evidence.steps.map((s: any) => [s.step_name, s.status])).toEqual(steps.map((s) => [s.step_name, s.status]));
  expect(evidence.shards).toEqual([]);
});

test('a failed step stops the rest, and the pipeline fails naming it', async () => {
  const { body: parent } = await t.api.post('/v1/pipelines', {
    steps: [
      { name: 'one', tool: 'bash', command: 'echo one' },
      { name: 'two', tool: 'bash', command: 'exit 4' },
      { name: 'three', tool: 'bash', command: 'echo never' },
    ],
  });
  const ended = await waitForRunEnd(t.api, parent.id);
  expect(ended).toMatchObject({ status: 'failed', error: 'step "two" failed' });
  const steps = await stepsOf(parent.id);
  expect(steps.map((s) => s.status)).toEqual(['succeeded', 'failed', 'canceled']);
  expect(steps[1].error).toBe('exited with code 4');
  expect(steps[2].error).toBe('not run: "two" failed');
  expect(steps[2].started_at).toBeNull();
});

test('pipeline input is checked: steps, tools, names', async () => {
  expect((await t.api.post('/v1/pipelines', { steps: [] })).body.error).toMatch(/steps must hold at least one step/);
  const badTool = await t.api.post('/v1/pipelines', { steps: [{ tool: 'fortran', command: 'x' }] });
  expect(badTool.status).toBe(400);
  expect(badTool.body.error).toMatch(/unknown tool "fortran"/);
  const dup = await t.api.post('/v1/pipelines', { steps: [{ name: 'a', tool: 'bash', command: 'x' }, { name: 'a', tool: 'bash', command: 'y' }] });
  expect(dup.status).toBe(400);
  expect(dup.body.field).toBe('steps[1].name');
  const extra = await t.api.post('/v1/pipelines', { steps: [{ tool: 'bash', command: 'x', colour: 1 }] });
  expect(extra.body.error).toMatch(/unknown field: steps\[0\]\.colour/);
});

test('a split runs its shards in parallel, and retry re-runs only the failed shard', async () => {
  const command = 'echo "shard $CAIRN_SHARD_INDEX of $CAIRN_SHARD_COUNT"; sleep 0.5; [ "$CAIRN_SHARD_INDEX" != 1 ] || [ -n "$SECOND_TRY" ]';
  const { status, body: split } = await t.api.post('/v1/runs', { tool: 'bash', command, shards: 3 });
  expect(status).toBe(201);
  expect(split).toMatchObject({ kind: 'split', tool: 'bash' });
  const ended = await waitForRunEnd(t.api, split.id);
  expect(ended).toMatchObject({ status: 'failed', error: 'step "shard-1" failed' });
  const shards = await stepsOf(split.id, 'shards');
  expect(shards.map((s) => [s.step_name, s.kind, s.status])).toEqual([
    ['shard-0', 'shard', 'succeeded'],
    ['shard-1', 'shard', 'failed'],
    ['shard-2', 'shard', 'succeeded'],
  ]);
  // In parallel: every shard started before any of them ended.
  const lastStart = Math.max(...shards.map((s) => Date.parse(s.started_at)));
  const firstEnd = Math.min(...shards.map((s) => Date.parse(s.finished_at)));
  expect(lastStart).toBeLessThan(firstEnd);
  expect((await t.api.get(`/v1/runs/${shards[2].id}/logs`)).text).toBe('shard 2 of 3\n');
  const evidence = await t.api.get(`/v1/runs/${split.id}/evidence`);
  expect(evidence.text).toContain('<section id="shards"><h2>Shards</h2>');

  const retry = await t.api.post(`/v1/runs/${split.id}/retry`, {});
  expect(retry.status).toBe(201);
  expect(retry.body).toMatchObject({ kind: 'split', rerun_of: split.id });
  const retried = await waitForRunEnd(t.api, retry.body.id);
  expect(retried.status).toBe('failed');
  const again = await stepsOf(retry.body.id, 'shards');
  expect(again.map((s) => s.step_name)).toEqual(['shard-1']);
  expect((await t.api.get(`/v1/runs/${again[0].id}/logs`)).text).toBe('shard 1 of 3\n');
  // The original never changes.
  expect((await t.api.get(`/v1/runs/${split.id}`)).body).toMatchObject({ status: 'failed', finished_at: ended.finished_at });

  expect((await t.api.post(`/v1/runs/${shards[0].id}/retry`, {})).status).toBe(409);
  const plain = await t.api.post('/v1/runs', { tool: 'bash', command: 'true' });
  await waitForRunEnd(t.api, plain.body.id);
  const notSplit = await t.api.post(`/v1/runs/${plain.body.id}/retry`, {});
  expect(notSplit.status).toBe(409);
  expect(notSplit.body.error).toMatch(/not a split/);
  expect((await t.api.get(`/v1/runs/${plain.body.id}/shards`)).status).toBe(404);
});

test('canceling a pipeline cancels the running step and ends the rest unrun', async () => {
  const { body: parent } = await t.api.post('/v1/pipelines', {
    steps: [
      { name: 'long', tool: 'bash', command: 'sleep 30' },
      { name: 'after', tool: 'bash', command: 'echo never' },
    ],
  });
  const deadline = Date.now() + 15_000;
  while ((await stepsOf(parent.id))[0].status !== 'running' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  await t.api.post(`/v1/runs/${parent.id}/cancel`);
  const ended = await waitForRunEnd(t.api, parent.id);
  expect(ended.status).toBe('canceled');
  const steps = await stepsOf(parent.id);
  expect(steps.map((s) => s.status)).toEqual(['canceled', 'canceled']);
  expect(steps[1].started_at).toBeNull();
});

test('the gate judges every step: one matching step holds the whole pipeline until it is approved', async () => {
  const policy = await t.api.post('/v1/policies', { name: 'destructive deletes', command_contains: 'rm -rf' });
  expect(policy.status).toBe(201);
  try {
    const { body: parent } = await t.api.post('/v1/pipelines', {
      steps: [
        { name: 'prepare', tool: 'bash', command: 'echo prepared' },
        { name: 'clean', tool: 'bash', command: 'rm -rf ./nothing-here; echo cleaned' },
      ],
    });
    expect(parent).toMatchObject({ status: 'held', blocker: 'approval_needed', hold: { policies: [policy.body.id] } });
    await new Promise((r) => setTimeout(r, 500));
    expect((await stepsOf(parent.id)).map((s) => s.status)).toEqual(['pending', 'pending']);
    expect((await t.api.post(`/v1/runs/${parent.id}/approve`, { reason: 'cleanup window' })).status).toBe(200);
    expect((await waitForRunEnd(t.api, parent.id)).status).toBe('succeeded');
    expect((await stepsOf(parent.id)).map((s) => s.status)).toEqual(['succeeded', 'succeeded']);

    // A held pipeline rejected, or canceled, ends with its steps: none is left pending.
    const pipeline = { steps: [{ name: 'clean', tool: 'bash', command: 'rm -rf ./nothing-here' }, { name: 'after', tool: 'bash', command: 'true' }] };
    const rejected = (await t.api.post('/v1/pipelines', pipeline)).body;
    expect((await t.api.post(`/v1/runs/${rejected.id}/reject`, {})).body.run).toMatchObject({ status: 'rejected', error: 'rejected by an approver' });
    expect((await stepsOf(rejected.id)).map((s) => [s.status, s.error])).toEqual([
      ['canceled', 'not run: rejected by an approver'],
      ['canceled', 'not run: rejected by an approver'],
    ]);
    const canceled = (await t.api.post('/v1/pipelines', pipeline)).body;
    expect((await t.api.post(`/v1/runs/${canceled.id}/cancel`)).body.status).toBe('canceled');
    expect((await stepsOf(canceled.id)).map((s) => [s.status, s.error])).toEqual([
      ['canceled', 'not run: canceled before it started'],
      ['canceled', 'not run: canceled before it started'],
    ]);
  } finally {
    await t.api.request('DELETE', `/v1/policies/${policy.body.id}`);
  }
});
