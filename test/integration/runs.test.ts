import { processesMatching } from '../support/processes';
import { waitUntil } from '../support/schedules';
import { startTestServer, waitForRun, waitForRunEnd, type TestServer } from '../support/server';
import { runWorkflowId } from '../../workflows/ids';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ CAIRN_RUN_TIMEOUT: '1h' });
});
afterAll(async () => {
  await t?.stop();
});

async function submit(body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return t.api.request('POST', '/v1/runs', { body, headers });
}

async function eventsOf(runId: string) {
  const { body } = await t.api.get(`/v1/runs/${runId}/events?limit=1000`);
  return body.events as { seq: number; event: string; run?: any }[];
}

test('a bash run succeeds and its log keeps stdout and stderr in the order written', async () => {
  const { status, body: run } = await submit({
    tool: 'bash',
    command: 'echo one; echo two >&2; echo three; echo four >&2; echo "greeting=$GREETING"',
    extra_vars: { GREETING: 'hello', PATH: 'not-exported' },
  });
  expect(status).toBe(201);
  expect(run.id).toMatch(/^run_/);
  const ended = await waitForRunEnd(t.api, run.id);
  expect(ended.status).toBe('succeeded');
  expect(ended.exit_code).toBe(0);
  const log = await t.api.get(`/v1/runs/${run.id}/logs`);
  expect(log.headers.get('content-type')).toMatch(/^text\/plain/);
  expect(log.text).toBe('one\ntwo\nthree\nfour\ngreeting=hello\n');
  const kinds = (await eventsOf(run.id)).map((e) => e.event);
  expect(kinds).toEqual(['run.created', 'run.started', 'run.finished']);
});

test("a run's start completes its own outbox effect in the same write, and its recorded events leave nothing owed", async () => {
  const { sql } = t.server.context;
  const { body: run } = await submit({ tool: 'bash', command: 'true' });
  // The answer comes after the start: its `run.start` effect is gone already, long before any
  // dispatcher could take it (the writer's grace is 3 s), and the start is marked.
  expect(await sql`SELECT effect FROM outbox WHERE subject = ${run.id}`).toEqual([]);
  const [marked] = await sql<{ workflow_started_at: Date | null }[]>`SELECT workflow_started_at FROM runs WHERE id = ${run.id}`;
  expect(marked.workflow_started_at).toBeInstanceOf(Date);
  expect((await waitForRunEnd(t.api, run.id)).status).toBe('succeeded');
  await waitUntil('the run\'s events recorded', async () => (await sql`SELECT 1 FROM notification_events WHERE subject_id = ${run.id} AND state = 'owed'`).length === 0, 10_000);
  const events = await sql<{ event: string; state: string }[]>`SELECT event, state FROM notification_events WHERE subject_id = ${run.id} ORDER BY seq`;
  expect(events).toEqual([
    { event: 'run.started', state: 'recorded' },
    { event: 'run.finished', state: 'recorded' },
  ]);
  // The dispatcher completes the `event.record` effects after the recording commits: a moment later, never left owed.
  await waitUntil('the run\'s outbox effects completed', async () => (await sql`SELECT effect FROM outbox WHERE subject = ${run.id}`).length === 0, 10_000);
});

test('a python run reads its extra vars and a failing script ends failed with its exit code', async () => {
  const { body: ok } = await submit({
    tool: 'python',
    command: 'import json, os\nprint(json.loads(os.environ["CAIRN_EXTRA_VARS"])["n"] * 2)',
    extra_vars: { n: 21 },
  });
  const { body: bad } = await submit({ tool: 'python', command: 'import sys\nprint("bye")\nsys.exit(3)' });
  expect((await waitForRunEnd(t.api, ok.id)).status).toBe('succeeded');
  expect((await t.api.get(`/v1/runs/${ok.id}/logs`)).text).toBe('42\n');
  const failed = await waitForRunEnd(t.api, bad.id);
  expect(failed).toMatchObject({ status: 'failed', exit_code: 3, error: 'exited with code 3' });
});

test('the tool does not see the server environment', async () => {
  process.env.CAIRN_TEST_SERVER_SECRET = 'server-only-value';
  const { body: run } = await submit({ tool: 'bash', command: 'env' });
  await waitForRunEnd(t.api, run.id);
  const log = (await t.api.get(`/v1/runs/${run.id}/logs`)).text;
  expect(log).toContain(`CAIRN_RUN_ID=${run.id}`);
  expect(log).not.toContain('server-only-value');
  expect(log).not.toContain('DATABASE_URL');
});

test('cancel stops a long run, kills its whole process group and records the end once', async () => {
  const marker = `cairn-cancel-${Date.now()}`;
  // Durations no other test's run uses, so only this run's processes match.
  const tag = String(Date.now() % 1_000_000).padStart(6, '0');
  const { body: run } = await submit({ tool: 'bash', command: `sleep 300.${tag} & sleep 301.${tag}; echo ${marker}` });
  await waitForRun(t.api, run.id, (r) => r.status === 'running');
  // Both sleeps have started, so the cancel has a process group to kill.
  const sleeping = () => processesMatching(`sleep 30[01][.]${tag}`);
  await waitUntil('both sleeps to start', async () => sleeping().length === 2, 10_000);
  const cancel = await t.api.post(`/v1/runs/${run.id}/cancel`);
  expect([200, 202]).toContain(cancel.status);
  const ended = await waitForRunEnd(t.api, run.id);
  expect(ended.status).toBe('canceled');
  expect(ended.error).toBe('canceled by admin');
  // Both sleeps were in the run's process group; neither survives the cancel.
  expect(sleeping()).toEqual([]);
  const kinds = (await eventsOf(run.id)).map((e) => e.event);
  expect(kinds.filter((k) => k === 'run.finished')).toHaveLength(1);
  expect(kinds).toContain('run.cancel_requested');
  const again = await t.api.post(`/v1/runs/${run.id}/cancel`);
  expect(again.status).toBe(409);
  expect(again.body.error).toMatch(/already ended/);
});

test('a run\'s workflow takes the current path with no patch marker: 12 history events, as the bare workflow\'s 11 and the status upsert', async () => {
  const { body: run } = await submit({ tool: 'bash', command: 'true' });
  expect((await waitForRunEnd(t.api, run.id)).status).toBe('succeeded');
  const handle = t.server.context.temporal.workflow.getHandle(runWorkflowId(run.id));
  expect((await handle.describe()).type).toBe('runWorkflowV2');
  // The run's record ends before its workflow does (the status upsert and the completion follow it).
  await handle.result();
  const events = (await handle.fetchHistory()).events ?? [];
  expect(events.filter((e) => e.markerRecordedEventAttributes)).toEqual([]);
  expect(events).toHaveLength(12);
});

test('a run past its timeout is stopped and finalized failed with the reason', async () => {
  const tag = String(Date.now() % 1_000_000).padStart(6, '0');
  const { body: run } = await submit({ tool: 'bash', command: `echo started; sleep 302.${tag}`, timeout: 2 });
  expect(run.timeout).toBe(2);
  const ended = await waitForRunEnd(t.api, run.id, 20_000);
  expect(ended).toMatchObject({ status: 'failed', error: 'timed out after 2 s' });
  expect((await t.api.get(`/v1/runs/${run.id}/logs`)).text).toBe('started\n');
  // The worker stops the tool at its next heartbeat after Temporal timed the execution out.
  await waitUntil('the timed out tool to be stopped', async () => processesMatching(`sleep 302[.]${tag}`).length === 0, 10_000);
  // The timeout is Temporal's, on the execution: no workflow timer is started for it.
  const history = await t.server.context.temporal.workflow.getHandle(runWorkflowId(run.id)).fetchHistory();
  expect(history.events?.filter((e) => e.timerStartedEventAttributes)).toEqual([]);
});

test('rerun makes a new run with the same settings and leaves the original unchanged', async () => {
  const { body: first } = await submit({ tool: 'bash', command: 'echo "v=$V"', extra_vars: { V: 7 }, timeout: 60 });
  const original = await waitForRunEnd(t.api, first.id);
  const rerun = await t.api.post(`/v1/runs/${first.id}/rerun`);
  expect(rerun.status).toBe(201);
  expect(rerun.body.id).not.toBe(first.id);
  expect(rerun.body).toMatchObject({ rerun_of: first.id, tool: 'bash', command: 'echo "v=$V"', extra_vars: { V: 7 }, timeout: 60 });
  expect((await waitForRunEnd(t.api, rerun.body.id)).status).toBe('succeeded');
  expect((await t.api.get(`/v1/runs/${rerun.body.id}/logs`)).text).toBe('v=7\n');
  expect((await t.api.get(`/v1/runs/${first.id}`)).body).toEqual(original);
});

test('a repeated Idempotency-Key by the same account returns the original run', async () => {
  const key = `deploy-${Date.now()}`;
  const a = await submit({ tool: 'bash', command: 'echo once' }, { 'Idempotency-Key': key });
  const b = await submit({ tool: 'bash', command: 'echo once' }, { 'Idempotency-Key': key });
  expect(a.status).toBe(201);
  expect(b.status).toBe(200);
  expect(b.body.id).toBe(a.body.id);
  const tooLong = await submit({ tool: 'bash', command: 'true' }, { 'Idempotency-Key': 'k'.repeat(256) });
  expect(tooLong.status).toBe(400);
  expect(tooLong.body.error).toMatch(/Idempotency-Key must be at most 255 bytes/);
});

test('submissions name what is wrong: unknown tool, unserved tool, bad fields, named queue', async () => {
  const unknown = await submit({ tool: 'fortran', command: 'x' });
  expect(unknown.status).toBe(400);
  expect(unknown.body.error).toMatch(/unknown tool "fortran"/);
  const unserved = await submit({ tool: 'powershell', command: 'Get-Date' });
  expect(unserved.status).toBe(400);
  expect(unserved.body.error).toMatch(/powershell tool is missing on this server: pwsh is not on its PATH/);
  const noCommand = await submit({ tool: 'bash' });
  expect(noCommand.status).toBe(400);
  expect(noCommand.body).toMatchObject({ field: 'command' });
  const extra = await submit({ tool: 'bash', command: 'true', colour: 'blue' });
  expect(extra.status).toBe(400);
  expect(extra.body.error).toMatch(/unknown field: colour/);
  const queue = await submit({ tool: 'bash', command: 'true', queue: 'gpu' });
  expect(queue.status).toBe(403);
  expect(queue.body).toMatchObject({ feature: 'named_queue', tier: 'community' });
  expect(queue.body.error).toMatch(/Team tier/);
  const longQueue = await submit({ tool: 'bash', command: 'true', queue: 'q'.repeat(256) });
  expect(longQueue.status).toBe(400);
  expect(longQueue.body.error).toMatch(/queue must be at most 255 bytes/);
});

test('the run list is newest first, filters, pages and refuses a limit past its bound', async () => {
  const ids: string[] = [];
  for (const command of ['echo a', 'echo b', 'exit 1']) {
    const { body } = await submit({ tool: 'bash', command });
    ids.push(body.id);
    await waitForRunEnd(t.api, body.id);
  }
  const page = await t.api.get('/v1/runs?limit=2');
  expect(page.status).toBe(200);
  expect(page.body.runs.map((r: any) => r.id)).toEqual([ids[2], ids[1]]);
  expect(page.body).toMatchObject({ count: 2, has_more: true, next_offset: 2 });
  expect(page.body.total).toBeGreaterThanOrEqual(3);
  const asc = await t.api.get('/v1/runs?order=asc&limit=1000');
  const ascIds = asc.body.runs.map((r: any) => r.id);
  expect(ascIds).toEqual([...ascIds].sort());
  const failed = await t.api.get('/v1/runs?status=failed&tool=bash&limit=1000');
  expect(failed.body.runs.map((r: any) => r.id)).toContain(ids[2]);
  expect(failed.body.runs.every((r: any) => r.status === 'failed')).toBe(true);
  const search = await t.api.get(`/v1/runs?q=${encodeURIComponent('echo b')}`);
  expect(search.body.runs.map((r: any) => r.id)).toEqual([ids[1]]);
  const future = await t.api.get(`/v1/runs?after=${encodeURIComponent(new Date(Date.now() + 3600_000).toISOString())}`);
  expect(future.body.runs).toEqual([]);
  const tooMany = await t.api.get('/v1/runs?limit=1001');
  expect(tooMany.status).toBe(400);
  expect(tooMany.body.error).toBe('limit: limit must be at most 1000');
  expect((await t.api.get('/v1/runs?status=sideways')).status).toBe(400);
});

test('the run list filters by template, requester and queue, counting only what matches', async () => {
  const { body: template } = await t.api.post('/v1/templates', { name: 'list filter', tool: 'bash', command: 'echo from the template' });
  const { body: launched } = await t.api.post(`/v1/templates/${template.id}/launch`, {});
  const { body: user } = await t.api.post('/v1/users', { username: 'filter-dana', role: 'operator' });
  const { body: token } = await t.api.post('/v1/tokens', { name: 'dana', username: user.username });
  const { body: danas } = await t.as(token.token).post('/v1/runs', { tool: 'bash', command: 'echo dana' });
  const byTemplate = await t.api.get(`/v1/runs?template_id=${template.id}`);
  expect(byTemplate.body.runs.map((r: any) => r.id)).toEqual([launched.id]);
  expect(byTemplate.body.total).toBe(1);
  const byRequester = await t.api.get('/v1/runs?requested_by=filter-dana');
  expect(byRequester.body.runs.map((r: any) => r.id)).toEqual([danas.id]);
  expect(byRequester.body.total).toBe(1);
  const defaultQueue = await t.api.get('/v1/runs?queue=&limit=1000');
  expect(defaultQueue.body.runs.map((r: any) => r.id)).toEqual(expect.arrayContaining([launched.id, danas.id]));
  const otherQueue = await t.api.get('/v1/runs?queue=gpu');
  expect(otherQueue.body).toMatchObject({ runs: [], total: 0 });
  const bad = await t.api.get('/v1/runs?template_id=');
  expect(bad.status).toBe(400);
  expect(bad.body.field).toBe('template_id');
});

test('log tail returns the end and says how much it left out', async () => {
  const { body: run } = await submit({ tool: 'bash', command: 'for i in $(seq 1 1000); do echo "line $i"; done' });
  await waitForRunEnd(t.api, run.id);
  const full = await t.api.get(`/v1/runs/${run.id}/logs`);
  const tail = await t.api.get(`/v1/runs/${run.id}/logs?tail=20`);
  expect(tail.text).toBe(full.text.slice(-20));
  expect(tail.headers.get('service-log-truncated')).toBe('1');
  expect(Number(tail.headers.get('service-log-omitted-bytes'))).toBe(full.text.length - 20);
  const whole = await t.api.get(`/v1/runs/${run.id}/logs?tail=${10 * 1024 * 1024}`);
  expect(whole.text).toBe(full.text);
  expect(whole.headers.get('service-log-truncated')).toBeNull();
});

test('events page with after and next_after, and download as NDJSON', async () => {
  const { body: run } = await submit({ tool: 'bash', command: 'true' });
  await waitForRunEnd(t.api, run.id);
  const first = await t.api.get(`/v1/runs/${run.id}/events?limit=2`);
  expect(first.body).toMatchObject({ count: 2, has_more: true, next_after: 2 });
  const rest = await t.api.get(`/v1/runs/${run.id}/events?after=${first.body.next_after}`);
  expect(rest.body.events.map((e: any) => e.seq)).toEqual([3]);
  expect(rest.body.has_more).toBe(false);
  const download = await t.api.get(`/v1/runs/${run.id}/events?download=1`);
  expect(download.headers.get('content-disposition')).toMatch(/attachment/);
  const lines = download.text.trim().split('\n').map((l) => JSON.parse(l));
  expect(lines.map((l) => l.event)).toEqual(['run.created', 'run.started', 'run.finished']);
});

test('a stream ticket opens one live stream of log and events, once', async () => {
  const { body: run } = await submit({ tool: 'bash', command: 'echo first; sleep 1; echo second' });
  const ticket = await t.api.post(`/v1/runs/${run.id}/stream-ticket`);
  expect(ticket.status).toBe(201);
  expect(ticket.body.expires_in).toBe(30);
  const stream = await fetch(`${t.url}/v1/runs/${run.id}/stream?ticket=${ticket.body.ticket}`);
  expect(stream.status).toBe(200);
  expect(stream.headers.get('content-type')).toMatch(/text\/event-stream/);
  const text = await stream.text();
  const logText = [...text.matchAll(/event: log\nid: \d+:\d+\ndata: (.*)\n/g)].map((m) => JSON.parse(m[1]).text).join('');
  expect(logText).toBe('first\nsecond\n');
  expect(text).toMatch(/event: run-event\nid: \d+:\d+\ndata: .*"run.finished"/);
  expect(text).toMatch(/event: end\nid: \d+:\d+\ndata: \{"status":"succeeded"/);
  const reuse = await fetch(`${t.url}/v1/runs/${run.id}/stream?ticket=${ticket.body.ticket}`);
  expect(reuse.status).toBe(401);
  const none = await fetch(`${t.url}/v1/runs/${run.id}/stream`);
  expect(none.status).toBe(401);
});

test('log tail is capped at 4 MiB and says how much it left out', async () => {
  const fiveMiB = 5 * 1024 * 1024;
  const { body: run } = await submit({ tool: 'bash', command: `head -c ${fiveMiB} /dev/zero | tr '\\0' 'a'` });
  const ended = await waitForRunEnd(t.api, run.id, 60_000);
  expect(ended.log_bytes).toBe(fiveMiB);
  const tail = await t.api.get(`/v1/runs/${run.id}/logs?tail=${8 * 1024 * 1024}`);
  expect(tail.text.length).toBe(4 * 1024 * 1024);
  expect(tail.headers.get('service-log-truncated')).toBe('1');
  expect(tail.headers.get('service-log-omitted-bytes')).toBe(String(1024 * 1024));
  const whole = await t.api.get(`/v1/runs/${run.id}/logs`);
  expect(whole.text.length).toBe(fiveMiB);
  expect(whole.headers.get('service-log-truncated')).toBeNull();
});

test('secrets a tool prints are masked before they reach the log, its stream and its tail', async () => {
  const { body: run } = await submit({
    tool: 'bash',
    command: [
      'echo "connecting to postgres://deploy:Tr0ub4dor3@db.internal:5432/app"',
      'echo "DB_PASSWORD=Tr0ub4dor3" >&2',
      'echo "aws key AKIAIOSFODNN7EXAMPLE in use"',
      'echo "plain line stays"',
    ].join('\n'),
  });
  await waitForRunEnd(t.api, run.id);
  const log = (await t.api.get(`/v1/runs/${run.id}/logs`)).text;
  expect(log).not.toContain('Tr0ub4dor3');
  expect(log).not.toContain('AKIAIOSFODNN7EXAMPLE');
  expect(log).toContain('postgres://deploy:[masked]@db.internal:5432/app');
  expect(log).toContain('DB_PASSWORD=[masked]');
  expect(log).toContain('plain line stays\n');
});

test('a run whose environment cannot fit is refused at submission, naming the field, and nothing is recorded', async () => {
  const before = (await t.api.get('/v1/runs')).body.total;
  const big = await submit({ tool: 'bash', command: 'echo hi', extra_vars: { BIG: 'x'.repeat(140_000) } });
  expect(big.status).toBe(400);
  expect(big.body.field).toBe('extra_vars.BIG');
  const nested = await submit({ tool: 'bash', command: 'echo hi', extra_vars: { blob: { text: 'y'.repeat(140_000) } } });
  expect(nested.status).toBe(400);
  expect(nested.body.field).toBe('extra_vars');
  const pipeline = await t.api.post('/v1/pipelines', { steps: [{ tool: 'bash', command: 'true', extra_vars: { BIG: 'z'.repeat(140_000) } }] });
  expect(pipeline.status).toBe(400);
  expect(pipeline.body.error).toMatch(/^step step-1: /);
  expect((await t.api.get('/v1/runs')).body.total).toBe(before);
});

test('a run says what started it: the API, or the run it reruns', async () => {
  const { body: first } = await submit({ tool: 'bash', command: 'echo source' });
  expect(first.source).toEqual({ kind: 'api', id: null });
  await waitForRunEnd(t.api, first.id);
  const again = await t.api.post(`/v1/runs/${first.id}/rerun`);
  expect(again.body.source).toEqual({ kind: 'rerun', id: first.id });
});

test('a test server leaves no workflow promise hook behind: promises outside workflows are not inspected', async () => {
  // The SDK's stack-trace hook asks every new promise's constructor which workflow made it
  // (test/support/workflow-hooks.ts); this promise counts being asked.
  let asked = 0;
  class Watched<T> extends Promise<T> {}
  Object.defineProperty(Watched, 'constructor', {
    value: () => {
      asked++;
      return () => undefined;
    },
  });
  const { body: run } = await submit({ tool: 'bash', command: 'true' });
  expect((await waitForRunEnd(t.api, run.id)).status).toBe('succeeded');
  await new Watched<number>((resolve) => resolve(1));
  expect(asked).toBe(0);
});
