import { createHash } from 'node:crypto';
import { classifyPlan, planDeletesAny, planSummary, unclassifiedPlan, type PlanClassification } from '../core/iac/plan';
import { runPlanContext } from '../core/credentials/seal-contexts';
import type { Sealer } from '../core/credentials/seal';
import { judgePlan, type GateVerdict } from '../core/runs/policy-gate';
import type { Run } from '../core/runs/run';
import type { Sql } from '../store/db';
import { listDecisionRecords } from '../store/decisions';
import { getRunPlan, saveRunPlan, type RunPlan } from '../store/iac';
import { listPolicies } from '../store/policies';
import { getToken } from '../store/tokens';
import { getTool } from '../tools/registry';
import { MODULE_FETCH_TIMED_OUT_FILE, PLAN_FILE, PLAN_JSON_FILE } from '../tools/iac';
import { readWorkFile } from '../runtime/work-dir';

/** The most of a saved plan, and of its JSON, Cairn reads back; a larger one is unclassified (and held by any plan condition). */
const MAX_PLAN_BYTES = 512 * 1024 * 1024;

export const planDigest = (bytes: Buffer) => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

/** What a plan phase left in the work dir: the plan file and its classification. */
export interface ReadPlan {
  bytes: Buffer;
  digest: string;
  classification: PlanClassification;
  /**
   * Why no plan was made although the phase ended well: its module fetch ran out of time. The
   * plan is then unclassified and empty (its digest that of no bytes), and nothing can apply it.
   */
  notMade?: string;
}

/**
 * Reads the saved plan and classifies its JSON; a plan file missing is undefined (the tool failed
 * before saving one), unless the module fetch ran out of time (the driver's marker, tools/iac.ts).
 */
export async function readSavedPlan(workDir: string): Promise<ReadPlan | undefined> {
  const plan = await readWorkFile(workDir, PLAN_FILE, MAX_PLAN_BYTES);
  if (!plan) {
    const timedOut = await readWorkFile(workDir, MODULE_FETCH_TIMED_OUT_FILE, 64);
    if (!timedOut) return undefined;
    const seconds = /^\d+$/.test(timedOut.bytes.toString('utf8')) ? `${timedOut.bytes.toString('utf8')}s` : 'its limit';
    const why = `the module fetch ran out of time after ${seconds} (--module-fetch-timeout); no plan was made`;
    const none = Buffer.alloc(0);
    return { bytes: none, digest: planDigest(none), classification: unclassifiedPlan(why), notMade: why };
  }
  if (plan.size > MAX_PLAN_BYTES) return { bytes: plan.bytes, digest: planDigest(plan.bytes), classification: unclassifiedPlan(`the plan file is larger than ${MAX_PLAN_BYTES} bytes`) };
  const json = await readWorkFile(workDir, PLAN_JSON_FILE, MAX_PLAN_BYTES);
  const classification = !json
    ? unclassifiedPlan('the plan JSON (show -json) was not written')
    : json.size > MAX_PLAN_BYTES
      ? unclassifiedPlan(`the plan JSON is larger than ${MAX_PLAN_BYTES} bytes`)
      : classifyPlan(json.bytes.toString('utf8'));
  return { bytes: plan.bytes, digest: planDigest(plan.bytes), classification };
}

/** The plan gate's verdict on a real run's plan: the stored policies with a plan condition, and the run's own facts. */
export async function judgeRunPlan(sql: Sql, run: Run, classification: PlanClassification): Promise<GateVerdict> {
  const policies = await listPolicies(sql);
  const token = run.token_id ? await getToken(sql, run.token_id) : undefined;
  return judgePlan(
    {
      tool: run.tool,
      command: run.spec.command,
      inventory_id: run.spec.inventory_id ?? null,
      queue: run.queue,
      actor: token?.name ?? '',
      account: run.requested_by,
      actor_kind: run.actor_kind === 'agent' ? 'agent' : 'user',
      dry_run: false,
      dry_run_change_free: getTool(run.tool)?.dryRunChangeFree ?? false,
    },
    (types) => planDeletesAny(classification, types),
    policies,
  );
}

/** Keeps the plan with the run: the file sealed when the install has its key, with its digest and what it does. */
export async function recordPlan(sql: Sql, sealer: Sealer | undefined, run: Run, plan: ReadPlan, verdict: RunPlan['verdict']): Promise<RunPlan> {
  // A plan that will be applied later (held) or reconciled (a dry run's) is kept; one applied at once or refused is not.
  const keep = (verdict === 'hold' || verdict === 'dry_run') && !plan.notMade;
  const text = plan.bytes.toString('base64');
  return saveRunPlan(sql, {
    run_id: run.id,
    tool: run.tool,
    digest: plan.digest,
    classification: plan.classification,
    verdict,
    plan: keep ? (sealer ? sealer.seal(text, runPlanContext(run.id, plan.digest)) : text) : null,
    plan_sealed: keep && sealer !== undefined,
    plan_bytes: plan.bytes.length,
  });
}

export class SavedPlanError extends Error {}

/**
 * The plan an approved run applies: the one the gate held, opened, and its bytes checked against
 * the digest its hold (and so its approval) names; and an approval recorded for it. Anything else
 * refuses the apply.
 */
export async function approvedPlan(sql: Sql, sealer: Sealer | undefined, run: Run): Promise<Buffer> {
  const digest = run.hold?.plan?.digest;
  if (!digest) throw new SavedPlanError('the run was not held at the plan gate');
  if (run.hold?.plan?.not_made) throw new SavedPlanError(`not applied: no plan was made to apply (${run.hold.plan.not_made}); submit the run again to plan it`);
  const decisions = await listDecisionRecords(sql, run.id);
  if (!decisions.some((d) => d.kind === 'approve')) throw new SavedPlanError(`not applied: no recorded approval released the plan ${digest}`);
  const stored = await getRunPlan(sql, run.id);
  if (!stored || stored.digest !== digest || stored.plan === null) throw new SavedPlanError(`not applied: the saved plan ${digest} is no longer kept`);
  if (stored.applied_at) throw new SavedPlanError(`not applied: the saved plan ${digest} was applied already`);
  let text = stored.plan;
  if (stored.plan_sealed) {
    if (!sealer) throw new SavedPlanError("not applied: the saved plan is sealed and this worker has not the install's encryption key");
    text = sealer.open(stored.plan, runPlanContext(run.id, digest));
  }
  const bytes = Buffer.from(text, 'base64');
  if (planDigest(bytes) !== digest) throw new SavedPlanError(`not applied: the saved plan does not match the approved digest ${digest}`);
  return bytes;
}

export { planSummary };
