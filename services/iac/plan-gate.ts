import { createHash } from 'node:crypto';
import { classifyPlan, planDeletesAny, planSummary, unclassifiedPlan, type PlanClassification } from '../../core/iac/plan';
import { runPlanContext } from '../../core/credentials/seal-contexts';
import type { Sealer } from '../../core/credentials/seal';
import { newId } from '../../core/ids';
import { judgePlan, type GateVerdict, type Hold } from '../../core/runs/policy-gate';
import type { ExecutionOutcome } from '../../core/runs/run-outcome';
import { runView } from '../../core/runs/run-view';
import type { Run } from '../../core/runs/run';
import type { Sql } from '../../store/db';
import { listDecisionRecords } from '../../store/decisions';
import { getRunPlan, saveRunPlan, type RunPlan } from '../../store/iac';
import { listPolicies } from '../../store/policies';
import { getToken } from '../../store/tokens';
import { getTool } from '../../tools/registry';
import { entryFields, serviceOrigin } from '../audit/audit';
import { moveRun } from '../runs/run-lifecycle';

/**
 * The plan gate of terraform and opentofu runs (spec part A 3.1), wherever the plan was made: the
 * pool reads it out of the run's work dir (activities/runs.ts), a relay worker sends it
 * (services/relay/relay.ts). Both judge, record and hold it here, the one way.
 */

/** The most of a saved plan, and of its JSON, Cairn reads back; a larger one is unclassified (and held by any plan condition). */
export const MAX_PLAN_BYTES = 512 * 1024 * 1024;

export const planDigest = (bytes: Buffer) => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

/** A saved plan and its classification. */
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

/** The plan of a phase whose module fetch ran out of time (`seconds` as the driver's marker says it). */
export function planNotMade(seconds: string): ReadPlan {
  const limit = /^\d+$/.test(seconds) ? `${seconds}s` : 'its limit';
  const why = `the module fetch ran out of time after ${limit} (--module-fetch-timeout); no plan was made`;
  const none = Buffer.alloc(0);
  return { bytes: none, digest: planDigest(none), classification: unclassifiedPlan(why), notMade: why };
}

/**
 * A plan file and its `show -json` as read (either may have been cut at a bound: `size` says how
 * large it was): classified, or unclassified naming why.
 */
export function planOf(plan: { bytes: Buffer; size: number }, json: { bytes: Buffer; size: number } | undefined, bound = MAX_PLAN_BYTES): ReadPlan {
  const digest = planDigest(plan.bytes);
  if (plan.size > bound) return { bytes: plan.bytes, digest, classification: unclassifiedPlan(`the plan file is larger than ${bound} bytes`) };
  const classification = !json
    ? unclassifiedPlan('the plan JSON (show -json) was not written')
    : json.size > bound
      ? unclassifiedPlan(`the plan JSON is larger than ${bound} bytes`)
      : classifyPlan(json.bytes.toString('utf8'));
  return { bytes: plan.bytes, digest, classification };
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

/** What the gate decided of a plan: apply it now, hold the run for a person, `done` (a dry run's plan, recorded), or an end (refused). */
export type GateDecision =
  | { decision: 'apply' }
  | { decision: 'hold'; held: HeldPlan }
  | { decision: 'done' }
  | { decision: 'end'; outcome: ExecutionOutcome };

export interface HeldPlan {
  digest: string;
  summary: string;
  hold: Hold;
  notMade?: string;
}

/**
 * A plan phase's plan (exited 0), judged: a dry run's is recorded for drift; a real run's is
 * recorded with the verdict of the plan policies, and applied, held or refused. `note` writes a
 * `[cairn]` line to the run's log.
 */
export async function gatePlan(sql: Sql, sealer: Sealer | undefined, run: Run, plan: ReadPlan, note: (line: string) => void): Promise<GateDecision> {
  note(`${planSummary(plan.classification)}; digest ${plan.digest}`);
  if (run.spec.dry_run) {
    await recordPlan(sql, sealer, run, plan, 'dry_run');
    // A check that could not plan found nothing either way: it fails, and leaves drift as the last good check saw it.
    if (plan.notMade) return { decision: 'end', outcome: { kind: 'exited_failed', exitCode: 0, message: plan.notMade } };
    return { decision: 'done' };
  }
  const verdict = await judgeRunPlan(sql, run, plan.classification);
  if (verdict.verdict === 'deny') {
    await recordPlan(sql, sealer, run, plan, 'deny');
    return { decision: 'end', outcome: { kind: 'refused', message: `a deny policy refuses this plan (${verdict.policies.join(', ')}); nothing was applied` } };
  }
  if (verdict.verdict === 'hold' || plan.notMade) {
    // Unread in full, the plan is held by every policy with a plan condition; one never made is held even with none, having nothing to apply.
    const hold: Hold = verdict.verdict === 'hold' ? verdict.hold : { policies: [], agent_hold: false, require_reason: false, distinct_approver: false };
    await recordPlan(sql, sealer, run, plan, 'hold');
    note(
      plan.notMade
        ? `the plan gate holds this run: ${plan.notMade}. Rejecting it ends it; approving it applies nothing and ends it failed`
        : `the plan gate holds this run for approval (${hold.policies.join(', ')}); approving it applies exactly this plan`,
    );
    return { decision: 'hold', held: { digest: plan.digest, summary: planSummary(plan.classification), hold, notMade: plan.notMade } };
  }
  await recordPlan(sql, sealer, run, plan, 'run');
  return { decision: 'apply' };
}

/** Moves the running run to held, with its plan on the hold, its `run.held` event and a chain entry; undefined when a cancel came first. */
export async function holdAtPlanGate(sql: Sql, run: Run, held: HeldPlan): Promise<'held' | undefined> {
  const hold: Hold = { ...held.hold, plan: { digest: held.digest, summary: held.summary, ...(held.notMade ? { not_made: held.notMade } : {}) } };
  const moved = await moveRun(sql, run.id, 'hold it at the plan gate', (current) =>
    current && current.status === 'running' && !current.cancel_requested_at
      ? {
          changes: { status: 'held', hold },
          event: { kind: 'run.held', body: (next: Run) => ({ run: runView(next, 'preview'), blocker: 'approval_needed', hold, plan: held.summary }) },
          guard: { notCanceled: true },
          audit: () =>
            entryFields(serviceOrigin('RUN', `/v1/runs/${run.id}`), 202, {
              id: newId('aud'),
              run_id: run.id,
              body: { kind: 'run.plan_held', run_id: run.id, plan_digest: held.digest, policies: hold.policies, summary: held.summary },
            }),
        }
      : { settled: undefined },
  );
  return 'settled' in moved ? undefined : 'held';
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
