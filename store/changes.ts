import type { RunStatus } from '../core/runs/run';
import { runReadableBy } from './access';
import type { Db } from './db';

/**
 * Changes (spec part A 2.13, 4.4): runs grouped by their change label (`runs.change_label`, the
 * `change` of their spec; schema/018_facts_estate.sql).
 */

// coalesce: a run of no template compares its NULL template_id, which would leave the condition NULL.
const readable = (db: Db, readerId: string | undefined) => (readerId === undefined ? db`true` : db`coalesce(${runReadableBy(db, readerId, 'r')}, false)`);

export interface ChangeSummaryRow {
  change: string;
  runs: number;
  withheld: number;
  started_at: Date;
  last_activity_at: Date;
  actors: string[];
  statuses: Partial<Record<RunStatus, number>>;
}

/**
 * The changes among the newest `cap` labelled runs, newest change first, counting only the
 * runs the reader may read (the rest in `withheld`); a change with no run the reader may read is
 * left out. `scanned` counts the runs read; `partial` says more labelled runs exist past the cap.
 */
export async function listChanges(db: Db, cap: number, readerId?: string): Promise<{ rows: ChangeSummaryRow[]; scanned: number; partial: boolean }> {
  const rows = await db<(ChangeSummaryRow & { scanned: number })[]>`
    WITH scan AS MATERIALIZED (
      SELECT r.id FROM runs r WHERE r.change_label IS NOT NULL ORDER BY r.created_at DESC, r.id DESC LIMIT ${cap + 1}
    ), kept AS MATERIALIZED (
      SELECT id FROM scan LIMIT ${cap}
    ), judged AS (
      SELECT r.change_label, r.status, r.created_at, coalesce(r.finished_at, r.started_at, r.created_at) AS touched, r.requested_by,
             ${readable(db, readerId)} AS readable
      FROM kept k JOIN runs r ON r.id = k.id
    ), by_status AS (
      SELECT change_label, status, count(*)::int AS n FROM judged WHERE readable GROUP BY change_label, status
    )
    SELECT j.change_label AS change,
           (count(*) FILTER (WHERE j.readable))::int AS runs,
           (count(*) FILTER (WHERE NOT j.readable))::int AS withheld,
           min(j.created_at) FILTER (WHERE j.readable) AS started_at,
           max(j.touched) FILTER (WHERE j.readable) AS last_activity_at,
           array_agg(DISTINCT j.requested_by) FILTER (WHERE j.readable) AS actors,
           (SELECT jsonb_object_agg(s.status, s.n) FROM by_status s WHERE s.change_label = j.change_label) AS statuses,
           (SELECT count(*)::int FROM scan) AS scanned
    FROM judged j
    GROUP BY j.change_label
    HAVING count(*) FILTER (WHERE j.readable) > 0
    ORDER BY max(j.touched) FILTER (WHERE j.readable) DESC, j.change_label`;
  const [{ n }] = await db<{ n: number }[]>`SELECT count(*)::int AS n FROM (SELECT 1 FROM runs WHERE change_label IS NOT NULL ORDER BY created_at DESC, id DESC LIMIT ${cap + 1}) s`;
  return { rows: rows.map(({ scanned: _s, ...row }) => row), scanned: Math.min(n, cap), partial: n > cap };
}

export interface ChangeMember {
  id: string;
  kind: string;
  tool: string;
  status: RunStatus;
  requested_by: string;
  template_id: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  error: string | null;
}

/** Every run carrying one change label, oldest first (at most `cap` listed), with how many the reader may not read. */
export async function changeMembers(db: Db, change: string, cap: number, readerId?: string): Promise<{ members: ChangeMember[]; readable: number; withheld: number; statuses: Partial<Record<RunStatus, number>> }> {
  const rows = await db<(ChangeMember & { readable: boolean })[]>`
    SELECT r.id, r.kind, r.tool, r.status, r.requested_by, r.template_id, r.created_at, r.started_at, r.finished_at, r.error,
           ${readable(db, readerId)} AS readable
    FROM runs r WHERE r.change_label = ${change}
    ORDER BY r.created_at, r.id`;
  const visible = rows.filter((r) => r.readable);
  const statuses: Partial<Record<RunStatus, number>> = {};
  for (const r of visible) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
  return {
    members: visible.slice(0, cap).map(({ readable: _r, ...m }) => m),
    readable: visible.length,
    withheld: rows.length - visible.length,
    statuses,
  };
}
