import type { RegisterDecision, RegisterRun } from '../core/audit/register';
import type { Db } from './db';

/**
 * The period change register's reads (spec part A 4.15, 1.2): the runs created in a period with
 * their change labels, their decisions, and the chain entries that name them.
 */

/** The runs created in [from, to), at most `cap` of them (oldest first), and how many there are. */
export async function registerRuns(db: Db, from: Date, to: Date, cap: number): Promise<{ runs: RegisterRun[]; total: number }> {
  const runs = await db<RegisterRun[]>`
    SELECT r.id, r.kind, r.tool, r.status, r.change_label, r.requested_by, r.template_id, t.name AS template_name,
           r.parent_run_id, r.step_name, r.created_at, r.started_at, r.finished_at, r.error
    FROM runs r LEFT JOIN templates t ON t.id = r.template_id
    WHERE r.created_at >= ${from} AND r.created_at < ${to}
    ORDER BY r.created_at, r.id
    LIMIT ${cap}`;
  const [{ n }] = await db<{ n: number }[]>`SELECT count(*)::int AS n FROM runs WHERE created_at >= ${from} AND created_at < ${to}`;
  return { runs, total: n };
}

export async function registerDecisions(db: Db, runIds: string[]): Promise<RegisterDecision[]> {
  if (!runIds.length) return [];
  return db<RegisterDecision[]>`
    SELECT d.id, d.run_id, d.kind, d.decision_id, d.actor, d.actor_kind, d.reason, d.commitment, d.at,
           d.redacted_at, d.redacted_by, d.redaction_category, e.seq::int AS seq, x.seq::int AS redaction_seq
    FROM decision_records d
    LEFT JOIN audit_entries e ON e.id = d.id
    LEFT JOIN audit_entries x ON x.id = d.redaction_entry_id
    WHERE d.run_id = ANY(${runIds})
    ORDER BY d.at, d.id`;
}

export interface RegisterEntry {
  seq: number;
  id: string;
  run_id: string;
  at: Date;
  kind: string | null;
  hash: string;
}

/** The chain entries that name the runs, in chain order. */
export async function registerEntries(db: Db, runIds: string[]): Promise<RegisterEntry[]> {
  if (!runIds.length) return [];
  return db<RegisterEntry[]>`
    SELECT seq::int AS seq, id, run_id, at, body ->> 'kind' AS kind, hash
    FROM audit_entries WHERE run_id = ANY(${runIds})
    ORDER BY seq`;
}
