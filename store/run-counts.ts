import type postgres from 'postgres';
import type { Db, Sql } from './db';
import { LOCKS, tryTakeLock } from './locks';

/** Which runs a maintained count counts; `templates` (a subquery of template ids) keeps the runs of those templates. */
export interface RunCountFilter {
  status?: string;
  tool?: string;
  templates?: postgres.Fragment;
}

/**
 * Exact run counts per (status, tool, template) without scanning `runs` (schema/017_scale.sql):
 * the compacted `run_counts` plus the `run_count_deltas` that triggers append in the same
 * transaction as every insert, delete and change of status, tool or template, read in one
 * snapshot. As an SQL expression, for a statement that counts more than this.
 */
export function maintainedRunCount(db: Db, filter: RunCountFilter = {}): postgres.Fragment {
  const where = (table: string) => {
    const t = db(table);
    return db`WHERE true ${filter.status !== undefined ? db`AND ${t}.status = ${filter.status}` : db``}
                        ${filter.tool !== undefined ? db`AND ${t}.tool = ${filter.tool}` : db``}
                        ${filter.templates !== undefined ? db`AND ${t}.template IN (${filter.templates})` : db``}`;
  };
  return db`(coalesce((SELECT sum(n) FROM run_counts ${where('run_counts')}), 0)
           + coalesce((SELECT sum(delta) FROM run_count_deltas ${where('run_count_deltas')}), 0))`;
}

/** {@link maintainedRunCount} on its own. */
export async function countRuns(db: Db, filter: RunCountFilter = {}): Promise<number> {
  const [{ n }] = await db<{ n: string }[]>`SELECT ${maintainedRunCount(db, filter)} AS n`;
  return Number(n);
}

/** Every (status, tool) with at least one run, and how many: what `GROUP BY status, tool` over `runs` would say. */
export async function runCountsByStatusAndTool(db: Db): Promise<{ status: string; tool: string; n: number }[]> {
  const rows = await db<{ status: string; tool: string; n: string }[]>`
    SELECT status, tool, sum(n) AS n FROM (
      SELECT status, tool, n FROM run_counts UNION ALL SELECT status, tool, delta FROM run_count_deltas
    ) c GROUP BY status, tool HAVING sum(n) <> 0 ORDER BY status, tool`;
  return rows.map((r) => ({ status: r.status, tool: r.tool, n: Number(r.n) }));
}

/**
 * Folds the deltas into `run_counts`: deletes the deltas it sees and adds their sums, in one
 * statement, so a reader sees them before or after, never both or neither. One server at a time
 * (the others skip the round); returns how many delta rows were folded.
 */
export async function compactRunCounts(sql: Sql): Promise<number> {
  return sql.begin(async (tx) => {
    if (!(await tryTakeLock(tx, LOCKS.runCounts))) return 0;
    const [{ folded }] = await tx<{ folded: number }[]>`
      WITH moved AS (
        DELETE FROM run_count_deltas RETURNING status, tool, template, delta
      ), summed AS (
        SELECT status, tool, template, sum(delta) AS delta, count(*) AS rows FROM moved GROUP BY status, tool, template
      ), applied AS (
        INSERT INTO run_counts (status, tool, template, n)
        SELECT status, tool, template, delta FROM summed ORDER BY status, tool, template
        ON CONFLICT (status, tool, template) DO UPDATE SET n = run_counts.n + excluded.n
      )
      SELECT coalesce(sum(rows), 0)::int AS folded FROM summed`;
    // Rows that reached zero stay: they cost nothing and the next run of that kind reuses them.
    return folded;
  });
}
