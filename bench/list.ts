import type postgres from 'postgres';
import { expectStatus, type BenchClient } from './http';
import type { Section } from './report';
import { seedRuns } from './seed';
import { msSince, percentile, timed } from './stats';

const STORED = 100_000;
const REQUESTS = 200;
const WARMUP = 10;
const LIMIT = 200;

/**
 * (c) GET /v1/runs?limit=200 with 100,000 runs stored, against the same page query run straight
 * through postgres.js. Runs last: the seeded rows would otherwise weigh on the other figures.
 */
export async function listBenchmark(client: BenchClient, sql: postgres.Sql): Promise<Section> {
  const seedStart = process.hrtime.bigint();
  await seedRuns(sql, STORED);
  // What autovacuum does to a table that just took 100k inserts; without it the figures are of a table no install keeps for long.
  await sql`VACUUM ANALYZE runs`;
  const seedMs = msSince(seedStart);
  const [{ n: stored }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM runs`;

  const page = async () => {
    const body = expectStatus(await client.request<{ runs: unknown[] }>('GET', `/v1/runs?limit=${LIMIT}`), 200, 'GET /v1/runs');
    if (body.runs.length !== LIMIT) throw new Error(`GET /v1/runs?limit=${LIMIT} returned ${body.runs.length} runs`);
  };
  const http = await timed(REQUESTS, WARMUP, page);
  const direct = await timed(REQUESTS, WARMUP, () => sql`SELECT * FROM runs ORDER BY id DESC LIMIT ${LIMIT} OFFSET 0`);
  // The endpoint also counts the matching rows for `total`; timed apart to show its share.
  const count = await timed(REQUESTS, WARMUP, () => sql`SELECT count(*)::int AS n FROM runs`);

  return {
    rows: [
      { metric: `GET /v1/runs?limit=${LIMIT} p50 (${stored} runs)`, value: percentile(http, 50), baseline: percentile(direct, 50), unit: 'ms' },
      { metric: `GET /v1/runs?limit=${LIMIT} p99 (${stored} runs)`, value: percentile(http, 99), baseline: percentile(direct, 99), unit: 'ms', budget: { max: 50 } },
    ],
    notes: [
      `list: ${stored} runs stored (${STORED} seeded in ${(seedMs / 1000).toFixed(1)} s incl. VACUUM ANALYZE); ${REQUESTS} sequential requests after ${WARMUP} warm-up; ` +
        `baseline is SELECT * FROM runs ORDER BY id DESC LIMIT ${LIMIT} through postgres.js (p50 / p99)`,
      `list: the endpoint's count(*) over all runs, direct: p50 ${percentile(count, 50).toFixed(1)} ms, p99 ${percentile(count, 99).toFixed(1)} ms`,
    ],
  };
}
