import { runPlanContext } from '../../core/credentials/seal-contexts';
import { conflict } from '../../core/errors';
import { planSummary } from '../../core/iac/plan';
import type { Hold } from '../../core/runs/policy-gate';
import type { Run } from '../../core/runs/run';
import type { Template } from '../../store/templates';
import { getRunPlan, saveRunPlan } from '../../store/iac';
import { getRun } from '../../store/runs';
import type { Caller } from '../../store/tokens';
import type { AuditOrigin } from '../audit/audit';
import type { ServerContext } from '../context';
import { launchTemplate, type LaunchOptions } from '../runs/launch';
import { planDigest } from './plan-gate';

/**
 * A run of the template held for approval whatever the policies say, carrying the plan an earlier
 * dry run of it saved, sealed to the new run; approving it applies exactly that plan
 * (activities/runs.ts). The drift reconcile and a pull request's `/service apply` both propose this
 * way. 409 when the dry run kept no plan, or its plan no longer matches its digest.
 */
export async function proposeSavedPlan(
  ctx: ServerContext,
  caller: Caller,
  origin: AuditOrigin,
  template: Template,
  planRunId: string,
  note: string,
  launch: Pick<LaunchOptions, 'extraVars' | 'idempotencyKey' | 'source'> = {},
): Promise<{ run: Run; created: boolean }> {
  const saved = await getRunPlan(ctx.sql, planRunId);
  if (!saved || saved.plan === null) throw conflict(`the plan of run ${planRunId} is not kept (applied, or never saved); nothing can be applied from it`, { plan_run_id: planRunId });
  let text = saved.plan;
  if (saved.plan_sealed) {
    if (!ctx.sealer) throw conflict(`the plan of run ${planRunId} is sealed and this server has not the install's encryption key`, { plan_run_id: planRunId });
    text = ctx.sealer.open(saved.plan, runPlanContext(planRunId, saved.digest));
  }
  const digest = planDigest(Buffer.from(text, 'base64'));
  if (digest !== saved.digest) throw conflict(`the plan of run ${planRunId} does not match its digest ${saved.digest}`, { plan_run_id: planRunId });
  const hold: Hold = { policies: [], agent_hold: false, require_reason: false, distinct_approver: false, plan: { digest, summary: `${planSummary(saved.classification)}; ${note}` } };
  // The apply works at the commit the plan was made at, whatever the project's checkout holds now.
  const planned = await getRun(ctx.sql, planRunId);
  const projectCommit = planned?.spec.project?.commit;
  const { run, created } = await launchTemplate(ctx, caller, origin, template, { hold, ...(projectCommit ? { projectCommit } : {}), ...launch });
  // A repeated launch (the same Idempotency-Key) names the run the first made, its plan saved then.
  if (!created) return { run, created };
  await saveRunPlan(ctx.sql, {
    run_id: run.id,
    tool: run.tool,
    digest,
    classification: saved.classification,
    verdict: 'hold',
    plan: ctx.sealer ? ctx.sealer.seal(text, runPlanContext(run.id, digest)) : text,
    plan_sealed: ctx.sealer !== undefined,
    plan_bytes: saved.plan_bytes,
  });
  return { run, created };
}
