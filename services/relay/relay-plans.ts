import { DomainError } from '../../core/errors';
import { RELAY_PLAN_JSON_BYTES, unclassifiedPlan } from '../../core/iac/plan';
import { RunInputError, type ExecutionOutcome } from '../../core/runs/run-outcome';
import type { Run } from '../../core/runs/run';
import { markPlanApplied } from '../../store/iac';
import { stagedRelayReports, stageRelayReports, type RelayLease } from '../../store/relay';
import { getRun } from '../../store/runs';
import { isPlanTool } from '../../tools/iac';
import { getTool } from '../../tools/registry';
import type { IacInputs } from '../../tools/types';
import type { ServerContext } from '../context';
import { approvedPlan, gatePlan, holdAtPlanGate, planDigest, planOf, planSummary, SavedPlanError, type GateDecision, type HeldPlan, type ReadPlan } from '../iac/plan-gate';

/**
 * Terraform and opentofu runs on relay workers (spec part A 4.18): the worker plans, hands the
 * plan over (propose-apply, or drift-plan for a dry run), and the server judges it at the same
 * plan gate as the pool's (services/iac/plan-gate.ts): apply now, hold for a person, or refuse.
 * An approved run's next attempt carries exactly the saved plan, checked against the approved digest.
 */


/** What an attempt of a plan tool does, kept from its start: plan (and report it), or apply an approved plan. */
interface AttemptPhase {
  phase: 'plan' | 'apply';
  digest?: string;
}

/** What the gate decided of the plan an attempt reported. */
interface GatedPlan {
  decision: GateDecision['decision'];
  digest: string;
  held?: HeldPlan;
  outcome?: ExecutionOutcome;
}

/** A plan-tool run's inputs as its server resolves them: its phase, and an approved run's saved plan. The worker adds its own site. */
export async function relayIacInputs(server: ServerContext, run: Run): Promise<{ iac?: IacInputs }> {
  if (!isPlanTool(run.tool)) return {};
  let savedPlan: Buffer | undefined;
  if (!run.spec.dry_run && run.hold?.plan) {
    try {
      savedPlan = await approvedPlan(server.sql, server.sealer, run);
    } catch (err) {
      if (err instanceof SavedPlanError) throw new RunInputError(err.message);
      throw err;
    }
  }
  return { iac: { binary: getTool(run.tool)!.binary, phase: savedPlan ? 'apply' : 'plan', savedPlan } };
}

/** Keeps the started attempt's phase, and answers what the worker needs to stage its site; undefined for other tools. */
export async function startIacAttempt(server: ServerContext, lease: RelayLease, run: Run): Promise<{ tool: string; phase: 'plan' | 'apply'; digest?: string } | undefined> {
  if (!isPlanTool(run.tool)) return undefined;
  const applying = !run.spec.dry_run && run.hold?.plan ? run.hold.plan.digest : undefined;
  const phase: AttemptPhase = applying ? { phase: 'apply', digest: applying } : { phase: 'plan' };
  await stageRelayReports(server.sql, lease.run_id, lease.attempt, 'iac', [phase]);
  return { tool: run.tool, ...phase };
}

export interface ReportedPlan {
  /** The saved plan file. */
  plan: Buffer;
  /** Its `show -json`, or null when it was larger than the worker sends (`planJsonBytes` says how large). */
  planJson: string | null;
  planJsonBytes?: number;
}

export interface PlanAnswer {
  decision: 'apply' | 'hold' | 'recorded' | 'refused';
  digest: string;
  summary: string;
  /** `[cairn]` lines for the run's log, written by the worker in its output's order. */
  notes: string[];
}

/**
 * A plan an attempt reports: `propose-apply` for a real run (judged at the plan gate), `drift-plan`
 * for a dry run (recorded as the template's drift check). Once per attempt, and only from an
 * attempt that plans.
 */
export async function reportPlan(server: ServerContext, lease: RelayLease, report: 'propose-apply' | 'drift-plan', reported: ReportedPlan): Promise<PlanAnswer> {
  const { sql } = server;
  const run = await getRun(sql, lease.run_id);
  if (!run) throw new DomainError('not_found', `run ${lease.run_id} does not exist`);
  if (!isPlanTool(run.tool)) throw new DomainError('invalid', `run ${run.id} is a ${run.tool} run: only terraform and opentofu runs report plans`, { report });
  if (report === 'drift-plan' && !run.spec.dry_run) throw new DomainError('invalid', `run ${run.id} is not a dry run: its plan goes to the plan gate through propose-apply`, { report });
  if (report === 'propose-apply' && run.spec.dry_run) throw new DomainError('invalid', `run ${run.id} is a dry run: its plan is handed over through drift-plan`, { report });
  const [phase] = await stagedRelayReports<AttemptPhase>(sql, run.id, lease.attempt, 'iac');
  if (!phase) throw new DomainError('conflict', 'this attempt has not been started (start it first)', { report });
  if (phase.phase === 'apply') throw new DomainError('conflict', `this attempt applies the approved plan ${phase.digest}: it reports no plan`, { report });
  if ((await stagedRelayReports<GatedPlan>(sql, run.id, lease.attempt, 'plan')).length) throw new DomainError('conflict', 'this attempt has reported its plan already', { report });
  const plan: ReadPlan =
    reported.planJson === null && reported.planJsonBytes === undefined
      ? planOf({ bytes: reported.plan, size: reported.plan.length }, undefined)
      : reported.planJson === null
      ? { bytes: reported.plan, digest: planDigest(reported.plan), classification: unclassifiedPlan(`the plan JSON (${reported.planJsonBytes ?? 'unknown'} bytes) is larger than a relay worker sends (${RELAY_PLAN_JSON_BYTES} bytes)`) }
      : planOf({ bytes: reported.plan, size: reported.plan.length }, { bytes: Buffer.from(reported.planJson, 'utf8'), size: Buffer.byteLength(reported.planJson) });
  const notes: string[] = [];
  const gated = await gatePlan(sql, server.sealer, run, plan, (line) => notes.push(line));
  const kept: GatedPlan = { decision: gated.decision, digest: plan.digest, ...(gated.decision === 'hold' && { held: gated.held }), ...(gated.decision === 'end' && { outcome: gated.outcome }) };
  await stageRelayReports(sql, run.id, lease.attempt, 'plan', [kept]);
  const decision = gated.decision === 'end' ? 'refused' : gated.decision === 'done' ? 'recorded' : gated.decision;
  if (gated.decision === 'end' && 'message' in gated.outcome) notes.push(gated.outcome.message);
  return { decision, digest: plan.digest, summary: planSummary(plan.classification), notes };
}

/**
 * A plan-tool attempt's end as its server records it: what the gate decided outranks what the
 * worker says (a held or refused plan ends the attempt there); a plan phase that reported no plan
 * fails; an applied plan is marked applied and no longer kept. `held` completes the attempt held.
 */
export async function settleIacAttempt(server: ServerContext, run: Run, lease: RelayLease, outcome: ExecutionOutcome | { kind: 'gated' }): Promise<ExecutionOutcome | 'held'> {
  const { sql } = server;
  const [phase] = await stagedRelayReports<AttemptPhase>(sql, run.id, lease.attempt, 'iac');
  const [gated] = await stagedRelayReports<GatedPlan>(sql, run.id, lease.attempt, 'plan');
  if (gated?.decision === 'hold') return (await holdAtPlanGate(sql, run, gated.held!)) ?? { kind: 'canceled' };
  if (gated?.decision === 'end') return gated.outcome!;
  if (outcome.kind === 'gated') throw new DomainError('conflict', 'no plan of this attempt was held or refused at the plan gate: report the tool\'s own end', { field: 'outcome.kind' });
  if (outcome.kind !== 'exited' || outcome.exitCode !== 0) return outcome;
  if (phase?.phase === 'apply' || gated?.decision === 'apply') {
    await markPlanApplied(sql, run.id);
    return outcome;
  }
  if (!gated) return { kind: 'exited_failed', exitCode: 0, message: `the plan phase reported no plan (${run.spec.dry_run ? 'drift-plan' : 'propose-apply'})` };
  return outcome;
}
