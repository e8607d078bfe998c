import { migrate } from '../../store/migrate';
import { connectDatabase, type Sql } from '../../store/db';
import { readableIds, readableRunCount } from '../../store/access';
import { compactRunCounts, countRuns, runCountsByStatusAndTool } from '../../store/run-counts';
import { grant, person, template } from '../support/access';
import { createTestDatabase, rowsReadOf, schemaBefore } from '../support/database';
import { startTestServer, waitForRun, waitForRunEnd, type TestServer } from '../support/server';

// The runs list's `total` and the metrics' run counts come from counts maintained with every
// write to `runs` (schema/017_scale.sql); these tests hold them to count(*).

let t: TestServer;
let sql: Sql;
beforeAll(async () => {
  t = await startTestServer();
  sql = connectDatabase(t.databaseUrl, { max: 4 });
});
afterAll(async () => {
  await sql?.end();
  await t?.stop();
});

async function scanned(db: Sql): Promise<{ status: string; tool: string; n: number }[]> {
  return db<{ status: string; tool: string; n: number }[]>`
    SELECT status, tool, count(*)::int AS n FROM runs GROUP BY status, tool ORDER BY status, tool`;
}

/** Maintained counts against count(*), both read in one snapshot: runs keep moving meanwhile. */
async function expectCountsExact(db: Sql): Promise<void> {
  await db.begin('isolation level repeatable read', async (tx) => {
    expect(await runCountsByStatusAndTool(tx)).toEqual(await scanned(tx as unknown as Sql));
    // And per template, which readers' totals sum over.
    const maintained = await tx<{ template: string; n: number }[]>`
      SELECT template, sum(n)::int AS n FROM (
        SELECT template, n FROM run_counts UNION ALL SELECT template, delta FROM run_count_deltas
      ) c GROUP BY template HAVING sum(n) <> 0 ORDER BY template`;
    const counted = await tx<{ template: string; n: number }[]>`
      SELECT coalesce(template_id, '') AS template, count(*)::int AS n FROM runs GROUP BY 1 ORDER BY 1`;
    expect(maintained).toEqual(counted);
  });
}

test('maintained counts equal count(*) after submits, moves, cancels, rejections and deletes, before and after compaction', async () => {
  for (const existing of (await t.api.get('/v1/policies')).body.policies) {
    expect((await t.api.request('DELETE', `/v1/policies/${existing.id}`)).status).toBe(204);
  }
  expect((await t.api.post('/v1/policies', { name: 'hold deletes', command_contains: 'rm -rf' })).status).toBe(201);

  // Submitted at once, so the count writes of many transactions interleave.
  const submitted = await Promise.all([
    ...Array.from({ length: 12 }, (_, i) => t.api.post('/v1/runs', { tool: 'bash', command: `echo ${i}` })),
    ...Array.from({ length: 4 }, () => t.api.post('/v1/runs', { tool: 'bash', command: 'exit 3' })),
    ...Array.from({ length: 4 }, (_, i) => t.api.post('/v1/runs', { tool: 'python', command: `print(${i})` })),
    ...Array.from({ length: 3 }, () => t.api.post('/v1/runs', { tool: 'bash', command: 'sleep 300' })),
    ...Array.from({ length: 3 }, () => t.api.post('/v1/runs', { tool: 'bash', command: 'rm -rf ./nothing-here' })),
  ]);
  for (const r of submitted) expect(r.status).toBe(201);
  const ids = submitted.map((r) => r.body.id as string);
  const long = ids.slice(20, 23);
  const held = ids.slice(23, 26);
  await expectCountsExact(sql);

  // Cancel one long run while running, one held run; reject one held run, approve another.
  await waitForRun(t.api, long[0], (r) => r.status === 'running');
  expect([200, 202]).toContain((await t.api.post(`/v1/runs/${long[0]}/cancel`)).status);
  expect((await t.api.post(`/v1/runs/${held[0]}/cancel`)).status).toBe(200);
  expect((await t.api.post(`/v1/runs/${held[1]}/reject`, { reason: 'not today' })).status).toBe(200);
  expect((await t.api.post(`/v1/runs/${held[2]}/approve`, { reason: 'fine', state_digest: submitted[25].body.state_digest })).status).toBe(200);
  for (const id of [...ids.slice(0, 20), long[0], held[2]]) await waitForRunEnd(t.api, id);
  await expectCountsExact(sql);

  // Counts from both tables, then all folded into run_counts (the server's sweeper may have folded some already).
  await compactRunCounts(sql);
  expect(Number((await sql`SELECT count(*) AS n FROM run_count_deltas`)[0].n)).toBe(0);
  await expectCountsExact(sql);

  // Writes straight to the table (an operator's clean-up, a seed) are counted too.
  await sql`DELETE FROM runs WHERE id = ${ids[0]}`;
  await sql`UPDATE runs SET tool = 'python' WHERE id = ${ids[1]}`;
  await sql`UPDATE runs SET log_bytes = log_bytes + 1 WHERE id = ${ids[2]}`;
  await expectCountsExact(sql);

  // The list's total, unfiltered and by status and tool, and with a filter that still counts rows.
  for (const query of ['', 'status=succeeded', 'tool=bash', 'status=running&tool=bash', 'status=failed&tool=python', 'q=echo']) {
    const { body } = await t.api.get(`/v1/runs?limit=1&${query}`);
    const params = new URLSearchParams(query);
    const [{ n }] = await sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM runs
      WHERE (${params.get('status')}::text IS NULL OR status = ${params.get('status')})
        AND (${params.get('tool')}::text IS NULL OR tool = ${params.get('tool')})
        AND (${params.get('q')}::text IS NULL OR spec->>'command' ILIKE ${'%' + (params.get('q') ?? '') + '%'} OR id ILIKE ${'%' + (params.get('q') ?? '') + '%'})`;
    expect({ query, total: body.total }).toEqual({ query, total: n });
  }
  expect(await countRuns(sql, { status: 'held' })).toBe(0);

  // The remaining long runs, canceled; then every count is still exact.
  for (const id of long.slice(1)) {
    await waitForRun(t.api, id, (r) => r.status === 'running');
    await t.api.post(`/v1/runs/${id}/cancel`);
    await waitForRunEnd(t.api, id);
  }
  await expectCountsExact(sql);
  await compactRunCounts(sql);
  await expectCountsExact(sql);
});

test('a reader’s total sums the maintained counts of the templates it may read, plus its own other runs', async () => {
  const reader = await person(t.api, 'operator');
  const asReader = t.as(reader.token);
  const readable = await template(t.api, { command: 'echo readable' });
  const hidden = await template(t.api, { command: 'exit 4' });
  await grant(t.api, readable.id, 'use', { user_id: reader.id });
  const launched = [
    ...(await Promise.all([1, 2, 3].map(() => asReader.post(`/v1/templates/${readable.id}/launch`, {})))),
    ...(await Promise.all([1, 2].map(() => t.api.post(`/v1/templates/${readable.id}/launch`, {})))),
    ...(await Promise.all([1, 2].map(() => t.api.post(`/v1/templates/${hidden.id}/launch`, {})))),
    await asReader.post('/v1/runs', { tool: 'bash', command: 'echo own' }),
    await asReader.post('/v1/runs', { tool: 'python', command: 'print(1)' }),
  ];
  for (const r of launched) expect(r.status).toBe(201);
  for (const r of launched) await waitForRunEnd(t.api, r.body.id);
  await expectCountsExact(sql);
  for (const query of ['', 'status=succeeded', 'tool=bash', 'status=succeeded&tool=python', 'status=failed']) {
    const params = new URLSearchParams(query);
    const [{ n }] = await sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM runs
      WHERE (template_id = ${readable.id} OR account_id = ${reader.id})
        AND (${params.get('status')}::text IS NULL OR status = ${params.get('status')})
        AND (${params.get('tool')}::text IS NULL OR tool = ${params.get('tool')})`;
    expect({ query, total: (await asReader.get(`/v1/runs?limit=1&${query}`)).body.total }).toEqual({ query, total: n });
  }
  expect((await asReader.get('/v1/runs?limit=1')).body.total).toBe(7);
});

test('a reader’s total works out the templates it may read once, whether counted or maintained', async () => {
  const reader = await person(t.api, 'operator');
  const granted: string[] = [];
  for (const [command, permission] of [['echo one', 'use'], ['echo two', 'read'], ['echo three', 'read']] as const) {
    granted.push((await template(t.api, { command })).id);
    await grant(t.api, granted.at(-1)!, permission, { user_id: reader.id });
  }
  // Every part of the count given rows to match against the set (an empty side lets PostgreSQL
  // skip reading it): compacted counts, deltas since, and a run of the reader's own.
  const launchAndEnd = async (api: typeof t.api) => {
    const launched = await api.post(`/v1/templates/${granted[0]}/launch`, {});
    expect(launched.status).toBe(201);
    await waitForRunEnd(t.api, launched.body.id);
  };
  await launchAndEnd(t.api);
  await compactRunCounts(sql);
  await launchAndEnd(t.as(reader.token));
  // Rows of `templates` read to work the set out once, alone; the total reads no more than that.
  const once = await rowsReadOf(sql, 'templates', (tx) => tx`SELECT count(*) FROM (${readableIds(tx, 'template', reader.id)}) readable`);
  expect(once).toBeGreaterThanOrEqual(3);
  const status = sql`status = 'succeeded'`;
  expect(await rowsReadOf(sql, 'templates', (tx) => readableRunCount(tx, reader.id, [status], { status: 'succeeded' }))).toBe(once);
  expect(await rowsReadOf(sql, 'templates', (tx) => readableRunCount(tx, reader.id, [status]))).toBe(once);
});

test('two compactions at once fold each delta once', async () => {
  // Deltas of earlier tests' runs folded first, so only these 500 (and a few of the sweeper's) are left.
  await compactRunCounts(sql);
  await sql`INSERT INTO run_count_deltas (status, tool, template, delta) SELECT 'pending', 'bash', '', 0 FROM generate_series(1, 500)`;
  const before = await runCountsByStatusAndTool(sql);
  const folded = await Promise.all([compactRunCounts(sql), compactRunCounts(sql), compactRunCounts(sql)]);
  expect(folded.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(500 + 10);
  await compactRunCounts(sql);
  expect(await runCountsByStatusAndTool(sql)).toEqual(before);
  await expectCountsExact(sql);
});

test('migration 017 back-fills the counts of an install made before it', async () => {
  const database = await createTestDatabase({ empty: true });
  const old = connectDatabase(database.url, { max: 2 });
  try {
    await schemaBefore(old, '017');
    await old`
      INSERT INTO runs (id, tool, status, spec, timeout_seconds, requested_by, actor_kind)
      SELECT 'run_' || lpad(i::text, 26, '0'), CASE WHEN i % 3 = 0 THEN 'python' ELSE 'bash' END,
             CASE WHEN i % 5 = 0 THEN 'failed' ELSE 'succeeded' END, '{}'::jsonb, 60, 'admin', 'user'
      FROM generate_series(1, 1000) AS i`;
    await migrate(old);
    await expectCountsExact(old);
    expect(await countRuns(old)).toBe(1000);
    expect(await countRuns(old, { status: 'failed', tool: 'bash' })).toBe(134);
  } finally {
    await old.end();
    await database.drop();
  }
});
