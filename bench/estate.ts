import type postgres from 'postgres';
import { estateAt, estateDiff } from '../store/estate';
import { expectStatus, type BenchClient } from './http';
import type { Section } from './report';
import { msSince, percentile, timed } from './stats';

const HOSTS = 10_000;
const READINGS = 30;
const REQUESTS = 100;
const WARMUP = 5;
/** One reading per host per hour, the newest an hour ago. */
const HOUR_MS = 3600_000;

/**
 * 10,000 hosts x 30 readings each, written by SQL: one reading per host an hour apart. Each
 * document holds a dozen facts; `uptime_seconds` changes in every reading, `kernel` every tenth,
 * `os` once, so a diff across hours finds every host changed in one to three keys.
 */
export async function seedReadings(sql: postgres.Sql, hosts = HOSTS, readings = READINGS): Promise<void> {
  await sql`INSERT INTO inventories (id, name, format, content, size_bytes, created_by) VALUES ('inv_bench_estate', 'bench estate', 'ini', '', 0, 'bench') ON CONFLICT DO NOTHING`;
  const newest = Date.now() - HOUR_MS;
  for (let from = 1; from <= hosts; from += 1000) {
    const to = Math.min(hosts, from + 999);
    await sql`
      WITH r AS (
        SELECT 'host-' || lpad(h::text, 5, '0') AS host, n,
               ${new Date(newest)}::timestamptz - make_interval(hours => ${readings} - n) AS gathered_at,
               jsonb_build_object(
                 'ansible_hostname', 'host-' || lpad(h::text, 5, '0'),
                 'ansible_os_family', 'Debian',
                 'os', CASE WHEN n <= ${Math.floor(readings * 2 / 3)} THEN 'debian 11' ELSE 'debian 12' END,
                 'kernel', '6.1.' || (n / 10)::text,
                 'uptime_seconds', n * 3600 + h,
                 'memtotal_mb', 4096 + (h % 4) * 4096,
                 'processor_count', 2 + h % 8,
                 'architecture', 'x86_64',
                 'virtualization_type', 'kvm',
                 'default_ipv4', jsonb_build_object('address', '10.' || (h / 65536) || '.' || ((h / 256) % 256) || '.' || (h % 256), 'interface', 'eth0'),
                 'mounts', jsonb_build_array(jsonb_build_object('mount', '/', 'size_total', 42949672960)),
                 'python_version', '3.11.2'
               ) AS facts
        FROM generate_series(${from}::int, ${to}::int) h, generate_series(1, ${readings}) n
      )
      INSERT INTO fact_readings (inventory_id, host, run_id, gathered_at, size_bytes, digest, facts)
      SELECT 'inv_bench_estate', host, NULL, gathered_at, length(facts::text), md5(facts::text), facts FROM r`;
  }
  await sql`INSERT INTO fact_hosts (host) SELECT DISTINCT host FROM fact_readings ON CONFLICT DO NOTHING`;
  await sql`VACUUM ANALYZE fact_readings`;
  await sql`VACUUM ANALYZE fact_hosts`;
}

/**
 * (r) GET /v1/estate (a page of 1,000 hosts, at instants across the history) and
 * GET /v1/estate/diff (every host, across ten hours: each host changed) with 10,000 hosts x 30
 * readings, beside the same store calls made straight through postgres.js.
 */
export async function estateBenchmark(client: BenchClient, sql: postgres.Sql): Promise<Section> {
  const seedStart = process.hrtime.bigint();
  await seedReadings(sql);
  const seedMs = msSince(seedStart);
  const [{ n: stored }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM fact_readings`;

  const newest = Date.now() - HOUR_MS;
  const instant = (i: number) => new Date(newest - (i % READINGS) * HOUR_MS + 60_000);
  let i = 0;
  const estate = async () => {
    const at = instant(i++);
    const body = expectStatus(await client.request<{ count: number; total: number }>('GET', `/v1/estate?at=${at.toISOString()}`), 200, 'GET /v1/estate');
    if (body.count !== 1000 || body.total !== HOSTS) throw new Error(`GET /v1/estate answered ${body.count} of ${body.total} hosts`);
  };
  const estateHttp = await timed(REQUESTS, WARMUP, estate);
  i = 0;
  const estateDirect = await timed(REQUESTS, WARMUP, () => estateAt(sql, instant(i++), { limit: 1000, offset: 0 }));

  let j = 0;
  const window = (k: number) => ({ from: instant((k % 10) + 12), to: instant(k % 10) });
  let changedHosts = 0;
  const diff = async () => {
    const { from, to } = window(j++);
    const body = expectStatus(
      await client.request<{ counts: { changed: number } }>('GET', `/v1/estate/diff?from=${from.toISOString()}&to=${to.toISOString()}`),
      200,
      'GET /v1/estate/diff',
    );
    changedHosts = body.counts.changed;
  };
  const diffHttp = await timed(REQUESTS, WARMUP, diff);
  j = 0;
  const diffDirect = await timed(REQUESTS, WARMUP, () => {
    const { from, to } = window(j++);
    return estateDiff(sql, from, to, { limit: 1000, offset: 0 });
  });

  return {
    rows: [
      { metric: `GET /v1/estate p50 (${HOSTS} hosts x ${READINGS})`, value: percentile(estateHttp, 50), baseline: percentile(estateDirect, 50), unit: 'ms' },
      { metric: `GET /v1/estate p99 (${HOSTS} hosts x ${READINGS})`, value: percentile(estateHttp, 99), baseline: percentile(estateDirect, 99), unit: 'ms', budget: { max: 200 } },
      { metric: `GET /v1/estate/diff p50 (${HOSTS} hosts x ${READINGS})`, value: percentile(diffHttp, 50), baseline: percentile(diffDirect, 50), unit: 'ms' },
      { metric: `GET /v1/estate/diff p99 (${HOSTS} hosts x ${READINGS})`, value: percentile(diffHttp, 99), baseline: percentile(diffDirect, 99), unit: 'ms', budget: { max: 200 } },
    ],
    notes: [
      `estate: ${stored} readings stored (${HOSTS} hosts x ${READINGS}, seeded in ${(seedMs / 1000).toFixed(1)} s incl. VACUUM ANALYZE); ${REQUESTS} sequential requests of each after ${WARMUP} warm-up, ` +
        `instants across the history; the estate answers a page of 1,000 hosts with their facts and the total; the diff spans 12 hours, counts every host (${changedHosts} changed in the last) and lists a page of 1,000 with their differing keys; ` +
        'baseline is the same store call (store/estate.ts) through postgres.js',
    ],
  };
}
