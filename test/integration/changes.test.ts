import { connectDatabase, type Sql } from '../../store/db';
import { listChanges } from '../../store/changes';
import { grant, person, template, type Person } from '../support/access';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

/**
 * Changes (spec part A 2.1, 2.13, 4.4; part B 8): runs submitted or launched with a `change`
 * label, grouped by value: span, who acted, an outcome from the member runs, `withheld` for runs
 * the caller may not read; the list's `scanned` and `partial` (the scan cap, exercised through
 * the store with a small cap).
 */

let t: TestServer;
let sql: Sql;
let operator: Person;
let viewer: Person;

async function submit(api: ReturnType<TestServer['as']>, body: Record<string, unknown>) {
  const res = await api.post('/v1/runs', { tool: 'bash', ...body });
  if (res.status !== 201) throw new Error(`submit: ${res.status} ${res.text}`);
  return res.body;
}

beforeAll(async () => {
  t = await startTestServer();
  sql = connectDatabase(t.databaseUrl, { max: 2 });
  operator = await person(t.api, 'operator');
  viewer = await person(t.api, 'viewer');
  const op = t.as(operator.token);
  const runs = [
    await submit(t.api, { command: 'true', change: 'CHG-1' }),
    await submit(t.api, { command: 'exit 3', change: 'CHG-1' }),
    await submit(op, { command: 'true', change: 'CHG-1' }),
    await submit(op, { command: 'true', change: 'CHG-2' }),
    await submit(t.api, { command: 'true' }),
  ];
  const tpl = await template(t.api, { command: 'true' });
  const launched = await t.api.post(`/v1/templates/${tpl.id}/launch`, { change: 'CHG-3' });
  expect(launched.status).toBe(201);
  expect(launched.body.change).toBe('CHG-3');
  runs.push(launched.body);
  // The operator may read the template's runs: CHG-3 becomes visible to it.
  await grant(t.api, tpl.id, 'read', { user_id: operator.id });
  for (const run of runs) await waitForRunEnd(t.api, run.id);
});
afterAll(async () => {
  await sql?.end();
  await t?.stop();
});

test('the label is validated, carried on the run and in its spec digest', async () => {
  expect((await t.api.post('/v1/runs', { tool: 'bash', command: 'true', change: '' })).body).toMatchObject({ field: 'change' });
  expect((await t.api.post('/v1/runs', { tool: 'bash', command: 'true', change: 'x'.repeat(256) })).body).toMatchObject({ field: 'change' });
  expect((await t.api.post('/v1/runs', { tool: 'bash', command: 'true', change: 'a\nb' })).body).toMatchObject({ field: 'change' });
  const a = await submit(t.api, { command: 'echo same', change: 'CHG-DIGEST' });
  const b = await submit(t.api, { command: 'echo same' });
  expect(a.change).toBe('CHG-DIGEST');
  expect(b.change).toBeNull();
  expect(a.state_digest).not.toBe(b.state_digest);
  await waitForRunEnd(t.api, a.id);
  await waitForRunEnd(t.api, b.id);
});

test('an admin lists every change, newest first, with span, actors, outcome and the scan', async () => {
  const res = await t.api.get('/v1/changes');
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({ partial: false, scanned: 6, count: 4, total: 4 });
  const byName = Object.fromEntries(res.body.changes.map((c: any) => [c.change, c]));
  expect(byName['CHG-1']).toMatchObject({ runs: 3, withheld: 0, outcome: 'partial', statuses: { succeeded: 2, failed: 1 } });
  expect(byName['CHG-1'].actors).toEqual(['admin', operator.username].sort());
  expect(Date.parse(byName['CHG-1'].started_at)).toBeLessThanOrEqual(Date.parse(byName['CHG-1'].last_activity_at));
  expect(byName['CHG-2']).toMatchObject({ runs: 1, outcome: 'succeeded', actors: [operator.username] });
  expect(byName['CHG-3']).toMatchObject({ runs: 1, outcome: 'succeeded', actors: ['admin'] });
  expect(res.body.changes[0].change).toBe('CHG-DIGEST');
  expect(res.body.changes[0]).not.toHaveProperty('runs_list');
});

test('below admin: only runs the caller may read count; the rest are withheld', async () => {
  const op = t.as(operator.token);
  const list = await op.get('/v1/changes');
  const byName = Object.fromEntries(list.body.changes.map((c: any) => [c.change, c]));
  expect(Object.keys(byName).sort()).toEqual(['CHG-1', 'CHG-2', 'CHG-3']);
  expect(byName['CHG-1']).toMatchObject({ runs: 1, withheld: 2, outcome: 'succeeded', actors: [operator.username] });

  const one = await op.get('/v1/changes/CHG-1');
  expect(one.status).toBe(200);
  expect(one.body).toMatchObject({ change: 'CHG-1', count: 1, total: 1, withheld: 2, outcome: 'succeeded' });
  expect(one.body.runs[0]).toMatchObject({ status: 'succeeded', requested_by: operator.username });

  const asViewer = t.as(viewer.token);
  expect((await asViewer.get('/v1/changes')).body).toMatchObject({ changes: [], count: 0 });
  expect((await asViewer.get('/v1/changes/CHG-1')).status).toBe(404);
});

test('one change: every member run, oldest first, with the outcome; an unknown change is 404', async () => {
  const res = await t.api.get('/v1/changes/CHG-1');
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({ change: 'CHG-1', count: 3, total: 3, withheld: 0, outcome: 'partial' });
  expect(res.body.runs.map((r: any) => r.status)).toEqual(['succeeded', 'failed', 'succeeded']);
  expect(res.body.runs[1].error).toBeTruthy();
  expect((await t.api.get('/v1/changes/CHG-none')).status).toBe(404);
  expect((await t.api.get('/v1/changes?from=x')).status).toBe(400);
});

test('the scan is capped: partial says so, and a change whose runs are all older is not listed', async () => {
  const capped = await listChanges(sql, 2);
  expect(capped.scanned).toBe(2);
  expect(capped.partial).toBe(true);
  expect(capped.rows.map((r) => r.change)).toEqual(['CHG-DIGEST', 'CHG-3']);
  const whole = await listChanges(sql, 100);
  expect(whole).toMatchObject({ scanned: 6, partial: false });
});
