import type { PlanClassification } from '../core/iac/plan';
import type { Db, Sql } from './db';
import { LOCKS } from './locks';
import { runReadableBy } from './access';

/** A run's saved plan as the plan gate recorded it (schema/033_iac.sql). */
export interface RunPlan {
  run_id: string;
  tool: string;
  digest: string;
  classification: PlanClassification;
  verdict: 'run' | 'hold' | 'deny' | 'dry_run';
  /** The plan file, base64 (sealed when plan_sealed). */
  plan: string | null;
  plan_sealed: boolean;
  plan_bytes: number;
  planned_at: Date;
  applied_at: Date | null;
}

export type NewRunPlan = Omit<RunPlan, 'planned_at' | 'applied_at'>;

/** Records a run's plan; a requeued attempt that plans again replaces the earlier one. */
export async function saveRunPlan(db: Db, plan: NewRunPlan): Promise<RunPlan> {
  const [row] = await db<RunPlan[]>`
    INSERT INTO run_plans (run_id, tool, digest, classification, verdict, plan, plan_sealed, plan_bytes)
    VALUES (${plan.run_id}, ${plan.tool}, ${plan.digest}, ${db.json(plan.classification as never)}, ${plan.verdict}, ${plan.plan}, ${plan.plan_sealed}, ${plan.plan_bytes})
    ON CONFLICT (run_id) DO UPDATE SET
      tool = EXCLUDED.tool, digest = EXCLUDED.digest, classification = EXCLUDED.classification, verdict = EXCLUDED.verdict,
      plan = EXCLUDED.plan, plan_sealed = EXCLUDED.plan_sealed, plan_bytes = EXCLUDED.plan_bytes, planned_at = now(), applied_at = NULL
    RETURNING *`;
  return { ...row, plan_bytes: Number(row.plan_bytes) };
}

export async function getRunPlan(db: Db, runId: string): Promise<RunPlan | undefined> {
  const [row] = await db<RunPlan[]>`SELECT * FROM run_plans WHERE run_id = ${runId}`;
  return row && { ...row, plan_bytes: Number(row.plan_bytes) };
}

/** The plans of several runs, without their plan files (a run list's view). */
export async function getRunPlanSummaries(db: Db, runIds: string[]): Promise<Map<string, Omit<RunPlan, 'plan'>>> {
  if (runIds.length === 0) return new Map();
  const rows = await db<Omit<RunPlan, 'plan'>[]>`
    SELECT run_id, tool, digest, classification, verdict, plan_sealed, plan_bytes, planned_at, applied_at FROM run_plans WHERE run_id = ANY(${runIds})`;
  return new Map(rows.map((r) => [r.run_id, { ...r, plan_bytes: Number(r.plan_bytes) }]));
}

/** The saved plan was applied: the file is no longer kept (its classification stays). */
export async function markPlanApplied(db: Db, runId: string): Promise<void> {
  await db`UPDATE run_plans SET applied_at = now(), plan = NULL WHERE run_id = ${runId}`;
}

/** A state lock held on one reserved connection; released by `release` or by the connection's end. */
export interface StateLock {
  release(): Promise<void>;
}

/**
 * Takes the session-scoped advisory lock of one terraform state Cairn keeps, on a connection of
 * its own held until release: `false` from `tryOnce` means another run holds it. A worker that dies
 * drops its connection, and the lock with it.
 */
export async function tryStateLock(sql: Sql, key: string): Promise<StateLock | undefined> {
  const reserved = await sql.reserve();
  try {
    const [{ locked }] = await reserved<{ locked: boolean }[]>`SELECT pg_try_advisory_lock(${LOCKS.iacState[0]}::int, hashtext(${key})) AS locked`;
    if (!locked) {
      reserved.release();
      return undefined;
    }
  } catch (err) {
    reserved.release();
    throw err;
  }
  return {
    async release() {
      try {
        await reserved`SELECT pg_advisory_unlock(${LOCKS.iacState[0]}::int, hashtext(${key}))`;
      } finally {
        reserved.release();
      }
    },
  };
}

/** One resource drifting from its template's configuration: what the latest check of the template found. */
export interface DriftRow {
  template_id: string;
  tool: string;
  /** The check: the dry run whose plan found it. */
  run_id: string;
  checked_at: Date;
  plan_digest: string;
  plan_kept: boolean;
  address: string;
  type: string;
  action: string;
}

/**
 * The latest plan of each template, among checks (dry runs that succeeded) and applied runs: a
 * template drifts when that latest plan is a check that found changes, and each resource it would
 * change is one drift row. An apply after the check settles it. With `readerId`, only templates'
 * runs that account may read (store/access.ts runReadableBy).
 */
function latestPlans(db: Db, readerId: string | undefined, templateId: string | undefined) {
  return db`
    SELECT DISTINCT ON (r.template_id) r.template_id, r.tool, r.id AS run_id, p.planned_at, p.digest, p.verdict, p.plan IS NOT NULL AS plan_kept, p.classification
    FROM run_plans p JOIN runs r ON r.id = p.run_id
    WHERE r.template_id IS NOT NULL AND r.status = 'succeeded'
      AND (p.verdict = 'dry_run' OR p.applied_at IS NOT NULL)
      ${templateId !== undefined ? db`AND r.template_id = ${templateId}` : db``}
      ${readerId !== undefined ? db`AND ${runReadableBy(db, readerId, 'r')}` : db``}
    ORDER BY r.template_id, p.planned_at DESC, r.id DESC`;
}

export async function listDrift(db: Db, readerId: string | undefined, page: { limit: number; offset: number; templateId?: string }): Promise<{ rows: DriftRow[]; total: number }> {
  const drift = db`
    WITH latest AS (${latestPlans(db, readerId, page.templateId)})
    SELECT l.template_id, l.tool, l.run_id, l.planned_at AS checked_at, l.digest AS plan_digest, l.plan_kept,
           res->>'address' AS address, res->>'type' AS type, res->>'action' AS action, res_n
    FROM latest l, jsonb_array_elements(l.classification->'resources') WITH ORDINALITY AS e(res, res_n)
    WHERE l.verdict = 'dry_run' AND (l.classification->>'changes')::boolean`;
  const [rows, [{ n }]] = await Promise.all([
    db<DriftRow[]>`SELECT template_id, tool, run_id, checked_at, plan_digest, plan_kept, address, type, action FROM (${drift}) d
                   ORDER BY template_id, res_n LIMIT ${page.limit} OFFSET ${page.offset}`,
    db<{ n: number }[]>`SELECT count(*)::int AS n FROM (${drift}) d`,
  ]);
  return { rows, total: n };
}

/** The latest check of a template whose plan still holds drift, or undefined when none does (no check, no change, or applied since). */
export async function latestDriftCheck(db: Db, templateId: string): Promise<{ run_id: string; digest: string; plan_kept: boolean; classification: PlanClassification } | undefined> {
  const [row] = await db<{ run_id: string; digest: string; verdict: string; plan_kept: boolean; classification: PlanClassification }[]>`
    ${latestPlans(db, undefined, templateId)}`;
  if (!row || row.verdict !== 'dry_run' || !row.classification.changes) return undefined;
  return row;
}
