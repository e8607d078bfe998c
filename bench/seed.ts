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

/**
 * Appends `count` audit entries to the install's chain in one statement, each hashed in
 * PostgreSQL over its canonical JSON (built here as text, keys in RFC 8785 order) and linked to
 * the one before, as store/audit.ts appends them, so the whole chain still verifies.
 */
export async function seedAuditEntries(sql: postgres.Sql, count: number): Promise<void> {
  const note = 'a benchmark entry, padded to the size of a run submission with its digest and fields';
  const canonical = (seq: string, prev: string) =>
    `'{"actor":"admin","at":"2025-01-01T00:00:00.000Z","body":{"kind":"bench.entry","n":' || ${seq} || ',"note":"${note}"},"fingerprint":"",` +
    `"id":"aud_bench' || lpad(${seq}::text, 16, '0') || '","method":"POST","outcome":201,"path":"/v1/bench","prev_hash":"' || ${prev} || '","seq":' || ${seq} || '}'`;
  await sql.begin(async (tx) => {
    const [head] = await tx<{ seq: number; hash: string }[]>`SELECT seq, hash FROM audit_head WHERE id FOR UPDATE`;
    const first = Number(head.seq) + 1;
    const last = Number(head.seq) + count;
    await tx.unsafe(
      `
      WITH RECURSIVE c(seq, prev_hash, hash) AS (
        SELECT $1::bigint, $2::text, encode(sha256(convert_to(${canonical('$1::bigint', '$2::text')}, 'UTF8')), 'hex')
        UNION ALL
        SELECT seq + 1, hash, encode(sha256(convert_to(${canonical('(seq + 1)', 'hash')}, 'UTF8')), 'hex') FROM c WHERE seq < $3::bigint
      ), ins AS (
        INSERT INTO audit_entries (seq, id, at, actor, method, path, fingerprint, outcome, body, prev_hash, hash, run_id, canonical)
        SELECT seq, 'aud_bench' || lpad(seq::text, 16, '0'), '2025-01-01T00:00:00.000Z'::timestamptz, 'admin', 'POST', '/v1/bench', '',
               '201'::jsonb, jsonb_build_object('kind', 'bench.entry', 'n', seq, 'note', '${note}'), prev_hash, hash, NULL,
               ${canonical('seq', 'prev_hash')}
        FROM c
        RETURNING seq, hash
      )
      UPDATE audit_head SET seq = l.seq, hash = l.hash FROM (SELECT seq, hash FROM ins ORDER BY seq DESC LIMIT 1) l WHERE audit_head.id`,
      [first, head.hash, last],
    );
  });
}
