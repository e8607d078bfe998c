import { createTestDatabase } from '../support/database';
import { apiClient, type ApiClient } from '../support/http';
import { startCairn } from '../support/processes';
import { startTestServer, testSettings, waitForRunEnd, type TestServer } from '../support/server';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.stop();
});

async function saveWorkflow(api: ApiClient, name: string, steps: unknown[]): Promise<string> {
  const { status, body } = await api.post('/v1/templates', { name, steps });
  if (status !== 201) throw new Error(`template create: ${status} ${JSON.stringify(body)}`);
  return body.id;
}

async function launch(api: ApiClient, templateId: string, body: Record<string, unknown> = {}) {
  const { status, body: run } = await api.post(`/v1/templates/${templateId}/launch`, body);
  if (status !== 201) throw new Error(`launch: ${status} ${JSON.stringify(run)}`);
  return run;
}

async function stepsOf(api: ApiClient, runId: string): Promise<Record<string, any>> {
  const { body } = await api.get(`/v1/runs/${runId}/steps`);
  return Object.fromEntries(body.steps.map((s: any) => [s.step_name, s]));
}

async function waitForStep(api: ApiClient, runId: string, name: string, predicate: (step: any) => boolean, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const step = (await stepsOf(api, runId))[name];
    if (step && predicate(step)) return step;
    if (Date.now() > deadline) throw new Error(`step ${name} of ${runId} did not get there; last seen ${JSON.stringify(step)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const release = (extra: Record<string, unknown> = {}) => [
  { name: 'build', tool: 'bash', command: 'echo built' },
  { name: 'deploy-staging', tool: 'bash', command: 'echo staged', depends_on: ['build'] },
  { name: 'smoke', tool: 'bash', command: 'sleep 1.5; echo smoke ok', depends_on: ['build'] },
  {
    name: 'promote',
    type: 'approval',
    description: 'promote to production?',
    depends_on: ['deploy-staging'],
    if_denied: 'rollback',
    ...extra,
  },
  { name: 'deploy-prod', tool: 'bash', command: 'echo production', depends_on: ['promote'] },
  { name: 'rollback', tool: 'bash', command: 'echo rolled back' },
];

test('a workflow waits at its approval step while another branch finishes; approving the step continues it', async () => {
  const templateId = await saveWorkflow(t.api, 'release', release());
  const workflow = await launch(t.api, templateId);
  expect(workflow).toMatchObject({ kind: 'workflow', template_id: templateId });

  const promote = await waitForStep(t.api, workflow.id, 'promote', (s) => s.status === 'held');
  expect(promote).toMatchObject({ kind: 'approval', blocker: 'approval_needed' });
  // The other branch keeps running while the approval waits, and finishes.
  const smoke = await waitForStep(t.api, workflow.id, 'smoke', (s) => s.status === 'succeeded');
  expect(Date.parse(smoke.finished_at)).toBeGreaterThan(Date.parse((await stepsOf(t.api, workflow.id))['deploy-staging'].finished_at));
  expect((await t.api.get(`/v1/runs/${workflow.id}`)).body.status).toBe('running');

  const events = (await t.api.get(`/v1/runs/${workflow.id}/events`)).body.events;
  const awaiting = events.find((e: any) => e.event === 'workflow.step_awaiting_approval');
  expect(awaiting.run).toMatchObject({ id: workflow.id, kind: 'workflow', status: 'running' });
  expect(awaiting.awaiting_step).toMatchObject({ id: promote.id, name: 'promote', description: 'promote to production?', on_approve: ['deploy-prod'], on_deny: ['rollback'], expires_at: null });

  const { body: approvals } = await t.api.get('/v1/approvals');
  const listed = approvals.approvals.find((a: any) => a.id === promote.id);
  expect(listed).toMatchObject({
    workflow_run_id: workflow.id,
    step: 'promote',
    description: 'promote to production?',
    waited_behind: ['deploy-staging'],
    on_approve: ['deploy-prod'],
    on_deny: ['rollback'],
    state_digest: promote.state_digest,
  });

  // Deciding by the workflow's id names each waiting step and the call that decides it.
  const byWorkflow = await t.api.post(`/v1/runs/${workflow.id}/approve`, {});
  expect(byWorkflow.status).toBe(409);
  expect(byWorkflow.body.waiting_steps).toEqual([
    { id: promote.id, name: 'promote', approve: `POST /v1/runs/${promote.id}/approve`, reject: `POST /v1/runs/${promote.id}/reject` },
  ]);

  const approved = await t.api.post(`/v1/runs/${promote.id}/approve`, { reason: 'staging looks good', state_digest: listed.state_digest });
  expect(approved.status).toBe(200);
  const ended = await waitForRunEnd(t.api, workflow.id);
  expect(ended.status).toBe('succeeded');
  const steps = await stepsOf(t.api, workflow.id);
  expect(Object.fromEntries(Object.entries(steps).map(([name, s]) => [name, s.status]))).toEqual({
    build: 'succeeded',
    'deploy-staging': 'succeeded',
    smoke: 'succeeded',
    promote: 'succeeded',
    'deploy-prod': 'succeeded',
    rollback: 'canceled',
  });
  expect(steps.rollback.error).toBe('not run: it runs only when "promote" is denied');
  expect((await t.api.get(`/v1/runs/${steps['deploy-prod'].id}/logs`)).text).toBe('production\n');
  expect((await t.api.get('/v1/approvals')).body.approvals.find((a: any) => a.id === promote.id)).toBeUndefined();
  // Decided once: a second decision answers 409.
  expect((await t.api.post(`/v1/runs/${promote.id}/reject`, {})).status).toBe(409);
});

test('a denied step takes if_denied, and its error reads denied by an approver', async () => {
  const templateId = await saveWorkflow(t.api, 'release-denied', release());
  const workflow = await launch(t.api, templateId);
  const promote = await waitForStep(t.api, workflow.id, 'promote', (s) => s.status === 'held');
  expect((await t.api.post(`/v1/runs/${promote.id}/reject`, { reason: 'not today' })).status).toBe(200);
  const ended = await waitForRunEnd(t.api, workflow.id);
  expect(ended.status).toBe('succeeded');
  const steps = await stepsOf(t.api, workflow.id);
  expect(steps.promote).toMatchObject({ status: 'rejected', error: 'denied by an approver' });
  expect(steps.rollback.status).toBe('succeeded');
  expect(steps['deploy-prod']).toMatchObject({ status: 'canceled', error: 'not run: "promote" was denied' });
});

test('no answer within approval_timeout takes the deny path', async () => {
  const templateId = await saveWorkflow(t.api, 'release-timeout', release({ approval_timeout: 2 }));
  const workflow = await launch(t.api, templateId);
  const promote = await waitForStep(t.api, workflow.id, 'promote', (s) => s.status === 'held');
  const listed = (await t.api.get('/v1/approvals')).body.approvals.find((a: any) => a.id === promote.id);
  expect(Date.parse(listed.expires_at)).toBeGreaterThan(Date.now());
  const ended = await waitForRunEnd(t.api, workflow.id, 30_000);
  expect(ended.status).toBe('succeeded');
  const steps = await stepsOf(t.api, workflow.id);
  expect(steps.promote.status).toBe('rejected');
  expect(steps.promote.error).toMatch(/no decision within the approval timeout of 2 s/);
  expect(steps.rollback.status).toBe('succeeded');
  expect(steps['deploy-prod'].status).toBe('canceled');
});

test('an agent cannot decide a workflow step', async () => {
  const templateId = await saveWorkflow(t.api, 'release-agent', release());
  const workflow = await launch(t.api, templateId);
  const promote = await waitForStep(t.api, workflow.id, 'promote', (s) => s.status === 'held');
  const token = await t.api.post('/v1/tokens', { name: 'bot', kind: 'agent' });
  expect((await t.as(token.body.token).post(`/v1/runs/${promote.id}/approve`, {})).status).toBe(403);
  await t.api.post(`/v1/runs/${workflow.id}/cancel`);
  const ended = await waitForRunEnd(t.api, workflow.id);
  expect(ended.status).toBe('canceled');
  const steps = await stepsOf(t.api, workflow.id);
  expect(steps.promote.status).toBe('canceled');
  expect(steps['deploy-prod'].status).toBe('canceled');
});

test('saving a workflow refuses a cycle, an unknown dependency, and tool fields on the template', async () => {
  const cycle = await t.api.post('/v1/templates', {
    name: 'cyclic',
    steps: [
      { name: 'a', tool: 'bash', command: 'true', depends_on: ['b'] },
      { name: 'b', tool: 'bash', command: 'true', depends_on: ['a'] },
    ],
  });
  expect(cycle.status).toBe(400);
  expect(cycle.body.error).toMatch(/cycle: a -> b -> a/);
  const unknown = await t.api.post('/v1/templates', { name: 'unknown-dep', steps: [{ name: 'a', tool: 'bash', command: 'true', depends_on: ['ghost'] }] });
  expect(unknown.status).toBe(400);
  expect(unknown.body.field).toBe('steps[0].depends_on[0]');
});

test('a server killed in the middle of a workflow: the next one resumes it where it was', async () => {
  const database = await createTestDatabase();
  const env = { ...process.env, ...testSettings(database.url, { CAIRN_LEASE_SECONDS: '3', CAIRN_LOG_LEVEL: 'warn' }) };
  const first = startCairn(['serve'], env);
  let second: ReturnType<typeof startCairn> | undefined;
  try {
    const [, token] = await first.waitFor(/admin token: (\S+)/);
    const [, url] = await first.waitFor(/serving at (\S+)/);
    const api = apiClient(url, token);
    const templateId = await saveWorkflow(api, 'resumable', [
      { name: 'first', tool: 'bash', command: 'echo first' },
      // Long on its first attempt, quick when run again after the server was lost.
      { name: 'second', tool: 'bash', command: 'echo second; if [ "$CAIRN_RUN_ATTEMPT" = 1 ]; then sleep 60; fi', depends_on: ['first'] },
      { name: 'third', tool: 'bash', command: 'echo third', depends_on: ['second'] },
    ]);
    const workflow = await launch(api, templateId);
    await waitForStep(api, workflow.id, 'second', (s) => s.status === 'running' && s.log_bytes > 0);

    first.child.kill('SIGKILL');
    await first.exited;
    second = startCairn(['serve'], env);
    const [, url2] = await second.waitFor(/serving at (\S+)/);
    const api2 = apiClient(url2, token);
    const ended = await waitForRunEnd(api2, workflow.id, 60_000);
    expect(ended.status).toBe('succeeded');
    // Where it was: the finished step did not run again; the lost one ran again; the rest ran once.
    const steps = await stepsOf(api2, workflow.id);
    const logOf = async (name: string) => (await api2.get(`/v1/runs/${steps[name].id}/logs`)).text;
    expect(await logOf('first')).toBe('first\n');
    expect(await logOf('second')).toMatch(/^second\n\n\[cairn\] the worker running this run was lost; running it again \(attempt 2\)\nsecond\n$/);
    expect(await logOf('third')).toBe('third\n');
    expect(steps.second.attempts).toBe(2);
    expect(steps.first.attempts).toBe(1);
    const kinds = (await api2.get(`/v1/runs/${workflow.id}/events?limit=1000`)).body.events.map((e: any) => e.event);
    expect(kinds.filter((k: string) => k === 'run.finished')).toHaveLength(1);
  } finally {
    await first.stop('SIGKILL');
    await second?.stop();
    await database.drop();
  }
});
