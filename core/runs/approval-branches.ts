import type { StepDefinition } from './workflow-graph';

/**
 * What each answer to a workflow's approval step runs next (spec part B 6.1): approving runs the
 * steps that depend on it, denying runs its `if_denied` step. The approvals list and the
 * `workflow.step_awaiting_approval` event both name them.
 */
export function approvalBranches(graph: readonly StepDefinition[], step: Pick<StepDefinition, 'name' | 'if_denied'>): { on_approve: string[]; on_deny: string[] } {
  return {
    on_approve: graph.filter((s) => s.depends_on.includes(step.name)).map((s) => s.name),
    on_deny: step.if_denied ? [step.if_denied] : [],
  };
}
