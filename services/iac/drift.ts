import { featureRefusal, tierAllows } from '../../core/access/license';
import { runPlanContext } from '../../core/credentials/seal-contexts';
import { badRequest, conflict, forbidden } from '../../core/errors';
import { planSummary } from '../../core/iac/plan';
import type { Hold } from '../../core/runs/policy-gate';
import type { Run } from '../../core/runs/run';
import { getRunPlan, latestDriftCheck, listDrift, saveRunPlan, type DriftRow } from '../../store/iac';
import type { Caller } from '../../store/tokens';
import { isPlanTool } from '../../tools/iac';
import { readerOf } from '../access/access';
import type { AuditOrigin } from '../audit/audit';
import type { ServerContext } from '../context';
import { launchTemplate } from '../runs/launch';
import { planDigest } from './plan-gate';
import { readableTemplate } from '../runs/templates';

/**
 * Drift (spec part A 4.2): what the latest check (a dry run) of a terraform or opentofu template
 * found it would change, and a proposal to reconcile it that applies the plan the check saved.
 */

/** Drifting resources, paged, only those of templates' runs the caller may read (below admin). */
export async function driftList(ctx: ServerContext, caller: Caller, page: { limit: number; offset: number; templateId?: string }): Promise<{ rows: DriftRow[]; total: number }> {
  return listDrift(ctx.sql, readerOf(caller), page);
}

/**
 * `POST /v1/drift/reconcile` (Team): a run of the template held for approval whatever the policies
 * say, carrying the plan the template's latest check saved, sealed to the new run; approving it
 * applies exactly that plan (activities/runs.ts). A template without drift, or whose check kept
 * no plan, answers 409. The caller launches the template, so it needs `use` on it.
 */
export async function reconcileDrift(ctx: ServerContext, caller: Caller, origin: AuditOrigin, templateId: string): Promise<Run> {
  const tier = ctx.licensing.tier;
  if (!tierAllows(tier, 'drift_reconcile')) throw forbidden(featureRefusal('drift_reconcile', tier), { feature: 'drift_reconcile', tier });
  const template = await readableTemplate(ctx.sql, caller, templateId);
  if (template.kind !== 'job' || !template.tool || !isPlanTool(template.tool)) {
    throw badRequest(`template ${template.id} is not a terraform or opentofu template: only their checks save a plan to reconcile`, { field: 'template_id' });
  }
  const check = await latestDriftCheck(ctx.sql, template.id);
  if (!check) throw conflict(`template ${template.id} has no drift: its latest check found no change, or a run has applied since; run a check (a dry run launch) first`, { template_id: template.id });
  const saved = await getRunPlan(ctx.sql, check.run_id);
  if (!saved || saved.plan === null) {
    throw conflict(`the check ${check.run_id} of template ${template.id} kept no plan; nothing can be reconciled from it`, { template_id: template.id, check_run_id: check.run_id });
  }
  let text = saved.plan;
  if (saved.plan_sealed) {
    if (!ctx.sealer) throw conflict(`the plan of check ${check.run_id} is sealed and this server has not the install's encryption key`, { check_run_id: check.run_id });
    text = ctx.sealer.open(saved.plan, runPlanContext(check.run_id, saved.digest));
  }
  const digest = planDigest(Buffer.from(text, 'base64'));
  if (digest !== saved.digest) throw conflict(`the plan of check ${check.run_id} does not match its digest ${saved.digest}`, { check_run_id: check.run_id });
  const summary = `${planSummary(saved.classification)}; reconciles the drift check ${check.run_id}`;
  const hold: Hold = { policies: [], agent_hold: false, require_reason: false, distinct_approver: false, plan: { digest, summary } };
  const { run } = await launchTemplate(ctx, caller, origin, template, { hold });
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
  return run;
}
