/**
 * The plan gate's reading of a terraform or opentofu plan (spec part A 2.10, 3.1: "a plan gate's
 * apply holds a run"): the JSON of `show -json` of the saved plan, classified into creates,
 * updates, replaces and deletes, in all and per resource type. Pure; the worker reads the file.
 */

export type PlanAction = 'create' | 'update' | 'replace' | 'delete';

export interface PlanCounts {
  create: number;
  update: number;
  replace: number;
  delete: number;
}

export interface PlanResourceChange {
  address: string;
  type: string;
  action: PlanAction;
}

/** What the gate knows of a plan; stored with the run (schema/033_iac.sql) and shown in its view. */
export interface PlanClassification {
  /** False when the plan could not be read in full: the gate then holds it as it would the worst plan. */
  classified: boolean;
  /** Why it is unclassified. */
  reason?: string;
  totals: PlanCounts;
  /** Per resource type, only types with a change. */
  by_type: Record<string, PlanCounts>;
  /** Each resource that changes, in plan order, at most {@link MAX_LISTED} of them. */
  resources: PlanResourceChange[];
  /** How many changing resources were left out of `resources`. */
  resources_left_out: number;
  /** Whether the plan changes anything (resources or outputs). */
  changes: boolean;
  /** The tool's version that made the plan, from its JSON. */
  tool_version?: string;
}

export const MAX_LISTED = 500;

/** What one relay plan report (propose-apply, drift-plan) carries at most: the plan file, and its `show -json` inline (spec part B 8). */
export const RELAY_PLAN_FILE_BYTES = 24 * 1024 * 1024;
export const RELAY_PLAN_JSON_BYTES = 32 * 1024 * 1024;

const zero = (): PlanCounts => ({ create: 0, update: 0, replace: 0, delete: 0 });

/** The action of one resource change's `actions` list; undefined for no-op and read. */
export function actionOf(actions: unknown): PlanAction | undefined {
  if (!Array.isArray(actions)) return undefined;
  const a = actions.filter((x): x is string => typeof x === 'string');
  if (a.includes('delete') && a.includes('create')) return 'replace';
  if (a.includes('delete')) return 'delete';
  if (a.includes('create')) return 'create';
  if (a.includes('update')) return 'update';
  return undefined;
}

export function unclassifiedPlan(reason: string): PlanClassification {
  return { classified: false, reason, totals: zero(), by_type: {}, resources: [], resources_left_out: 0, changes: true };
}

/** Classifies `show -json` output. Anything it cannot read makes the plan unclassified, never change free. */
export function classifyPlan(json: string): PlanClassification {
  let doc: unknown;
  try {
    doc = JSON.parse(json);
  } catch {
    return unclassifiedPlan('the plan JSON does not parse');
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) return unclassifiedPlan('the plan JSON is not an object');
  const plan = doc as { format_version?: unknown; resource_changes?: unknown; output_changes?: unknown; terraform_version?: unknown; errored?: unknown };
  if (typeof plan.format_version !== 'string') return unclassifiedPlan('the plan JSON names no format_version');
  if (plan.errored === true) return unclassifiedPlan('the plan errored');
  if (plan.resource_changes !== undefined && !Array.isArray(plan.resource_changes)) return unclassifiedPlan('resource_changes is not a list');
  const totals = zero();
  const byType: Record<string, PlanCounts> = {};
  const resources: PlanResourceChange[] = [];
  let leftOut = 0;
  for (const entry of (plan.resource_changes as unknown[] | undefined) ?? []) {
    if (!entry || typeof entry !== 'object') return unclassifiedPlan('a resource change is not an object');
    const rc = entry as { address?: unknown; type?: unknown; mode?: unknown; change?: { actions?: unknown } };
    if (typeof rc.type !== 'string' || typeof rc.address !== 'string' || !rc.change || !Array.isArray(rc.change.actions)) {
      return unclassifiedPlan('a resource change lacks its address, type or actions');
    }
    const action = actionOf(rc.change.actions);
    if (!action) continue;
    totals[action] += 1;
    (byType[rc.type] ??= zero())[action] += 1;
    if (resources.length < MAX_LISTED) resources.push({ address: rc.address, type: rc.type, action });
    else leftOut += 1;
  }
  const outputs = plan.output_changes && typeof plan.output_changes === 'object' ? Object.values(plan.output_changes as Record<string, { actions?: unknown }>) : [];
  const outputChanges = outputs.some((o) => o && Array.isArray(o.actions) && o.actions.some((a) => a !== 'no-op'));
  const resourceChanges = totals.create + totals.update + totals.replace + totals.delete > 0;
  return {
    classified: true,
    totals,
    by_type: byType,
    resources,
    resources_left_out: leftOut,
    changes: resourceChanges || outputChanges,
    ...(typeof plan.terraform_version === 'string' ? { tool_version: plan.terraform_version } : {}),
  };
}

/**
 * Whether a plan deletes (or replaces, which deletes first) a resource of one of `types`; `*`
 * matches any type. An unclassified plan matches every such condition: the gate could not read
 * it in full, so it is held like the worst plan it might be.
 */
export function planDeletesAny(plan: PlanClassification, types: readonly string[]): boolean {
  if (!plan.classified) return true;
  const deleting = Object.entries(plan.by_type).filter(([, c]) => c.delete + c.replace > 0).map(([type]) => type);
  if (deleting.length === 0) return false;
  return types.includes('*') || deleting.some((type) => types.includes(type));
}

/** One line saying what a plan does, for an attention item and the log. */
export function planSummary(plan: PlanClassification): string {
  if (!plan.classified) return `plan not classified: ${plan.reason ?? 'unreadable'}`;
  const t = plan.totals;
  const parts = [`${t.create} to create`, `${t.update} to update`, `${t.replace} to replace`, `${t.delete} to delete`];
  const deleting = Object.entries(plan.by_type)
    .filter(([, c]) => c.delete + c.replace > 0)
    .map(([type, c]) => `${type} ×${c.delete + c.replace}`);
  return `plan: ${parts.join(', ')}${deleting.length ? ` (deletes ${deleting.join(', ')})` : ''}`;
}
