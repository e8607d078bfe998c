import type postgres from 'postgres';

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';

/**
 * The first ten characters of a lowercase ULID (its 48-bit millisecond time in Crockford base32)
 * as SQL over a bigint column `ms`, so seeded ids sort by time like core/ids.ts newId('run').
 */
function ulidTimeSql(): string {
  const chars = [];
  for (let k = 0; k < 10; k++) chars.push(`substr('${CROCKFORD}', ((ms >> ${5 * (9 - k)}) & 31)::int + 1, 1)`);
  return chars.join(' || ');
}

/**
 * Seeds `count` ended runs in one statement: one every 25 s up to now (so all sort before runs
 * made afterwards), mostly succeeded, bash and python, each with its command. Every row has its
 * workflow started and, unless rejected, its start and end recorded, so the sweeper ignores them.
 * The random half of each id is hex, a subset of the Crockford alphabet.
 */
export async function seedRuns(sql: postgres.Sql, count: number): Promise<void> {
  await sql.unsafe(
    `
    WITH g AS (
      SELECT i, now() - make_interval(secs => ($1::int - i) * 25) AS created_at
      FROM generate_series(1, $1::int) AS i
    ), r AS (
      SELECT i, created_at, floor(extract(epoch FROM created_at) * 1000)::bigint AS ms,
             CASE WHEN i % 100 < 85 THEN 'succeeded' WHEN i % 100 < 93 THEN 'failed' WHEN i % 100 < 96 THEN 'canceled'
                  WHEN i % 100 < 98 THEN 'interrupted' ELSE 'rejected' END AS status,
             CASE WHEN i % 3 = 0 THEN 'python' ELSE 'bash' END AS tool
      FROM g
    )
    INSERT INTO runs (id, tool, status, spec, queue, timeout_seconds, error, exit_code, requested_by, actor_kind,
                      attempts, exec_host, log_bytes, created_at, started_at, finished_at, workflow_started_at)
    SELECT 'run_' || ${ulidTimeSql()} || substr(md5(random()::text || i), 1, 16),
           tool, status,
           jsonb_build_object(
             'command', CASE WHEN tool = 'python' THEN 'print("report ' || i || '")' ELSE 'echo deploy step ' || i || ' && sleep 1' END,
             'extra_vars', jsonb_build_object('env', CASE WHEN i % 2 = 0 THEN 'staging' ELSE 'production' END)),
           '', 86400,
           CASE status WHEN 'failed' THEN 'exit code ' || (1 + i % 3) WHEN 'interrupted' THEN 'the server stopped while the run was executing'
                       WHEN 'rejected' THEN 'rejected at approval' END,
           CASE status WHEN 'succeeded' THEN 0 WHEN 'failed' THEN 1 + i % 3 END,
           CASE WHEN i % 7 = 0 THEN 'ci-agent' ELSE 'admin' END,
           CASE WHEN i % 7 = 0 THEN 'agent' ELSE 'user' END,
           CASE WHEN status = 'rejected' THEN 0 ELSE 1 END,
           CASE WHEN status = 'rejected' THEN NULL ELSE 'worker-' || (i % 4) END,
           CASE WHEN status = 'rejected' THEN 0 ELSE (i * 37) % 20000 END,
           created_at,
           CASE WHEN status = 'rejected' THEN NULL ELSE created_at + interval '150 milliseconds' END,
           created_at + make_interval(secs => 1 + i % 60),
           created_at
    FROM r`,
    [count],
  );
}
