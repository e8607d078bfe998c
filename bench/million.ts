import type postgres from 'postgres';
import { expectStatus, type BenchClient } from './http';
import type { Row, Section } from './report';
import { seedRuns } from './seed';
import { msSince, percentile, timed } from './stats';

/** How many runs to hold; CAIRN_BENCH_RUNS scales it down (or up) for a quicker pass. */
const TARGET = Number(process.env.CAIRN_BENCH_RUNS ?? 1_000_000);
const LIMIT = 200;

/**
 * (i) GET /v1/runs with a million runs stored: the first page, a page filtered by status and
 * tool, a deep offset and a `q` text search, each beside the same page query straight through
 * postgres.js; `total` checked against count(*). Runs last: its rows would weigh on every other
 * figure.
 */
export async function millionBenchmark(client: BenchClient, sql: postgres.Sql): Promise<Section> {
  const [{ n: before }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM runs`;
  const seedStart = process.hrtime.bigint();
  if (TARGET > before) await seedRuns(sql, TARGET - before);
  await sql`VACUUM ANALYZE runs`;
  const seedMs = msSince(seedStart);
  const countStart = process.hrtime.bigint();
  const [{ n: stored }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM runs`;
  const countMs = msSince(countStart);
  const deep = Math.floor(stored / 2);

  const cases: { name: string; query: string; direct: () => Promise<unknown>; requests: number; total: () => Promise<number>; budget?: number }[] = [
    {
      name: 'first page',
      query: `limit=${LIMIT}`,
      direct: () => sql`SELECT * FROM runs ORDER BY id DESC LIMIT ${LIMIT}`,
      requests: 200,
      total: async () => stored,
      budget: 50,
    },
    {
      name: 'status=failed&tool=python',
      query: `limit=${LIMIT}&status=failed&tool=python`,
      direct: () => sql`SELECT * FROM runs WHERE status = 'failed' AND tool = 'python' ORDER BY id DESC LIMIT ${LIMIT}`,
      requests: 200,
      total: async () => (await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM runs WHERE status = 'failed' AND tool = 'python'`)[0].n,
      budget: 50,
    },
    {
      name: `offset=${deep}`,
      query: `limit=${LIMIT}&offset=${deep}`,
      direct: () => sql`SELECT * FROM runs ORDER BY id DESC LIMIT ${LIMIT} OFFSET ${deep}`,
      requests: 20,
      total: async () => stored,
    },
    {
      name: 'q=step 4242',
      query: `limit=${LIMIT}&q=${encodeURIComponent('step 4242')}`,
      direct: () => sql`SELECT * FROM runs WHERE id ILIKE '%step 4242%' OR spec->>'command' ILIKE '%step 4242%' OR error ILIKE '%step 4242%'
                         OR requested_by ILIKE '%step 4242%' ORDER BY id DESC LIMIT ${LIMIT}`,
      requests: 10,
      total: async () =>
        (await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM runs WHERE id ILIKE '%step 4242%' OR spec->>'command' ILIKE '%step 4242%'
                                    OR error ILIKE '%step 4242%' OR requested_by ILIKE '%step 4242%'`)[0].n,
    },
  ];

  const rows: Row[] = [];
  const notes: string[] = [];
  for (const c of cases) {
    let total = -1;
    const http = await timed(c.requests, 2, async () => {
      const body = expectStatus(await client.request<{ runs: unknown[]; total: number }>('GET', `/v1/runs?${c.query}`), 200, `GET /v1/runs?${c.query}`);
      total = body.total;
    });
    const direct = await timed(c.requests, 2, c.direct);
    const exact = await c.total();
    if (total !== exact) throw new Error(`GET /v1/runs?${c.query}: total ${total}, count(*) ${exact}`);
    rows.push({ metric: `${stored} runs: ${c.name} p50`, value: percentile(http, 50), baseline: percentile(direct, 50), unit: 'ms' });
    rows.push({ metric: `${stored} runs: ${c.name} p99`, value: percentile(http, 99), baseline: percentile(direct, 99), unit: 'ms', ...(c.budget ? { budget: { max: c.budget } } : {}) });
    notes.push(`million: ${c.name}: ${c.requests} sequential requests after 2 warm-up; total ${total} (exact, checked against count(*))`);
  }
  notes.unshift(
    `million: ${stored} runs stored (${TARGET > before ? TARGET - before : 0} seeded by one INSERT in ${(seedMs / 1000).toFixed(1)} s incl. VACUUM ANALYZE; CAIRN_BENCH_RUNS scales it); ` +
      `baseline is the same page query straight through postgres.js, without the count; count(*) over all runs takes ${countMs.toFixed(0)} ms, ` +
      `which the endpoint no longer pays unfiltered or filtered by status and tool (maintained counts, schema/017_scale.sql)`,
  );
  return { rows, notes };
}
