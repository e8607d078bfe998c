import type postgres from 'postgres';
import { benchClient, expectStatus, type BenchClient } from './http';
import type { Section } from './report';
import { msSince, percentile } from './stats';

const TEMPLATES = 2_000;
const TEAMS = 10;
const GRANTS = 1_000;
const REQUESTS = 500;
const WARMUP = 10;
/** The operator's p99 may be at most this many times the admin's. */
const RATIO_BUDGET = 1.5;

interface Listed {
  total: number;
  count: number;
}

/**
 * 2,000 templates owned by the admin, and 1,000 grants on half of them (read, use and manage in
 * turn), 100 to each of the teams; every stored run is given one of the templates, so the
 * operator reads about half of them.
 */
async function seedGrants(sql: postgres.Sql, adminId: string, teams: string[]): Promise<void> {
  await sql`
    INSERT INTO templates (id, name, kind, tool, command, owner_id, created_by)
    SELECT 'tpl_bench' || lpad(i::text, 5, '0'), 'bench template ' || i, 'job', 'bash', 'echo deploy ' || i, ${adminId}, 'admin'
    FROM generate_series(0, ${TEMPLATES - 1}) AS i`;
  await sql`
    INSERT INTO grants (id, object, permission, team_id, created_by)
    SELECT 'grt_bench' || lpad(i::text, 5, '0'), 'tpl_bench' || lpad((2 * i)::text, 5, '0'),
           (ARRAY['read', 'use', 'manage'])[1 + i % 3], (${teams}::text[])[1 + i % ${TEAMS}], 'admin'
    FROM generate_series(0, ${GRANTS - 1}) AS i`;
  await sql`
    UPDATE runs SET template_id = 'tpl_bench' || lpad((abs(hashtext(id)::bigint) % ${TEMPLATES})::text, 5, '0')
    WHERE template_id IS NULL AND parent_run_id IS NULL`;
  await sql`VACUUM ANALYZE runs`;
  await sql`VACUUM ANALYZE templates`;
  await sql`VACUUM ANALYZE grants`;
}

/** One list call's time, checking its answer. */
async function timedList(client: BenchClient, path: string, name: string): Promise<{ ms: number; body: Listed }> {
  const start = process.hrtime.bigint();
  const reply = await client.request<Listed>('GET', path);
  const ms = msSince(start);
  return { ms, body: expectStatus(reply, 200, `GET ${path} as ${name}`) };
}

/**
 * (h) `GET /v1/templates` and `GET /v1/runs` for an operator holding 1,000 grants through 10 teams,
 * beside the admin's same calls in the same run, with the 100,000 runs the list benchmark stored
 * (so it runs after it). The two callers alternate, so both see the same load.
 */
export async function accessBenchmark(url: string, admin: BenchClient, sql: postgres.Sql): Promise<Section> {
  const seedStart = process.hrtime.bigint();
  const me = expectStatus(await admin.request<{ id: string }>('GET', '/v1/auth/me'), 200, 'GET /v1/auth/me');
  const user = expectStatus(await admin.request<{ id: string }>('POST', '/v1/users', { username: 'bench-operator', role: 'operator' }), 201, 'POST /v1/users');
  const token = expectStatus(await admin.request<{ token: string }>('POST', '/v1/tokens', { name: 'bench', username: 'bench-operator' }), 201, 'POST /v1/tokens');
  const teams: string[] = [];
  for (let i = 0; i < TEAMS; i++) {
    const team = expectStatus(await admin.request<{ id: string }>('POST', '/v1/teams', { name: `bench team ${i}` }), 201, 'POST /v1/teams');
    expectStatus(await admin.request('POST', `/v1/teams/${team.id}/members`, { user_id: user.id }), 201, 'POST /v1/teams/{id}/members');
    teams.push(team.id);
  }
  await seedGrants(sql, me.id, teams);
  const seedMs = msSince(seedStart);
  const operator = benchClient(url, token.token);

  const series = {
    templates: { path: '/v1/templates', admin: [] as number[], operator: [] as number[], totals: { admin: 0, operator: 0 } },
    runs: { path: '/v1/runs?limit=200', admin: [] as number[], operator: [] as number[], totals: { admin: 0, operator: 0 } },
  };
  try {
    for (let i = 0; i < WARMUP + REQUESTS; i++) {
      for (const s of Object.values(series)) {
        for (const [who, client] of [
          ['admin', admin],
          ['operator', operator],
        ] as const) {
          const { ms, body } = await timedList(client, s.path, who);
          s.totals[who] = body.total;
          if (i >= WARMUP) s[who].push(ms);
        }
      }
    }
  } finally {
    operator.close();
  }
  if (series.templates.totals.operator !== GRANTS) throw new Error(`the operator lists ${series.templates.totals.operator} templates, not ${GRANTS}`);

  const row = (what: string, s: (typeof series)['templates']) => {
    const adminP99 = percentile(s.admin, 99);
    return {
      metric: `${what} p99, operator with ${GRANTS} grants via ${TEAMS} teams`,
      value: percentile(s.operator, 99),
      baseline: adminP99,
      unit: 'ms',
      budget: { max: Math.round(RATIO_BUDGET * adminP99 * 10) / 10 },
    };
  };
  return {
    rows: [row('GET /v1/templates', series.templates), row('GET /v1/runs?limit=200', series.runs)],
    notes: [
      `access: ${TEMPLATES} templates, ${GRANTS} grants on half of them through ${TEAMS} teams of one operator, seeded in ${(seedMs / 1000).toFixed(1)} s; ` +
        `${REQUESTS} requests of each list by each caller, alternating, after ${WARMUP} warm-up; baseline is the admin's p99, budget ${RATIO_BUDGET} x it`,
      `access: totals admin / operator: templates ${series.templates.totals.admin} / ${series.templates.totals.operator}, ` +
        `runs ${series.runs.totals.admin} / ${series.runs.totals.operator}; p50 templates ${percentile(series.templates.admin, 50).toFixed(1)} / ` +
        `${percentile(series.templates.operator, 50).toFixed(1)} ms, runs ${percentile(series.runs.admin, 50).toFixed(1)} / ${percentile(series.runs.operator, 50).toFixed(1)} ms`,
    ],
  };
}
