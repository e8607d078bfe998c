import { readWorkFile } from '../runtime/work-dir';
import { MODULE_FETCH_TIMED_OUT_FILE, PLAN_FILE, PLAN_JSON_FILE } from '../tools/iac';
import { MAX_PLAN_BYTES, planNotMade, planOf, type ReadPlan } from '../services/iac/plan-gate';

export { approvedPlan, gatePlan, holdAtPlanGate, judgeRunPlan, planDigest, planSummary, recordPlan, SavedPlanError, type ReadPlan } from '../services/iac/plan-gate';

/**
 * Reads the saved plan out of a plan phase's work dir and classifies its JSON; a plan file missing
 * is undefined (the tool failed before saving one), unless the module fetch ran out of time (the
 * driver's marker, tools/iac.ts).
 */
export async function readSavedPlan(workDir: string): Promise<ReadPlan | undefined> {
  const plan = await readWorkFile(workDir, PLAN_FILE, MAX_PLAN_BYTES);
  if (!plan) {
    const timedOut = await readWorkFile(workDir, MODULE_FETCH_TIMED_OUT_FILE, 64);
    return timedOut ? planNotMade(timedOut.bytes.toString('utf8')) : undefined;
  }
  if (plan.size > MAX_PLAN_BYTES) return planOf(plan, undefined);
  return planOf(plan, await readWorkFile(workDir, PLAN_JSON_FILE, MAX_PLAN_BYTES));
}
