/**
 * The approval gate (spec part A 2.10, 3.1; part B 5.2 items 6 and 11): judges one submission
 * against the stored policies and the built-in agent hold. Pure: the caller reads the policies
 * and the facts, and records what the verdict says.
 *
 * - A matching `deny` policy refuses the run, whatever else matches.
 * - A matching `require_approval` policy holds it.
 * - An agent's run is held by the built-in hold unless a matching `exempt` policy lets it past;
 *   an exemption skips only that built-in hold, never a require-approval policy.
 * - A condition left empty matches anything; every condition set must match.
 * - `exclude_dry_run` leaves out a dry run whose tool is known to change nothing in one (a syntax
 *   check); an extension tool's dry run is matched as the real run (spec part A 1.3).
 */

export type PolicyEffect = 'require_approval' | 'deny' | 'exempt';

/** The matching conditions and effect of a stored policy, as the gate reads them. */
export interface GatePolicy {
  id: string;
  effect: PolicyEffect;
  tool: string | null;
  command_contains: string | null;
  inventory_id: string | null;
  queue: string | null;
  actor: string | null;
  account: string | null;
  actor_kind: string | null;
  require_reason: boolean;
  exclude_dry_run: boolean;
  require_distinct_approver: boolean;
  /**
   * A plan condition (terraform, opentofu): the policy matches at the plan gate, not at submission,
   * a plan that deletes or replaces a resource of one of these types (`*`: any type), or a plan
   * the gate could not read in full. Null: no plan condition (the policy is judged at submission).
   * Older rows and callers that never set it read as null.
   */
  plan_deletes?: string[] | null;
}

/** What the gate knows of a submission. */
export interface SubmissionFacts {
  tool: string;
  command: string;
  inventory_id: string | null;
  queue: string;
  /** The label of the token that asked (a token's name). */
  actor: string;
  /** The username of the account the token is bound to. */
  account: string;
  actor_kind: 'user' | 'agent';
  dry_run: boolean;
  /** Whether the tool's dry run is known to change nothing. */
  dry_run_change_free: boolean;
}

/** Why a held run is held and what its approver must meet; stored on the run. */
export interface Hold {
  /** Require-approval policies that matched, by id. */
  policies: string[];
  /** True when the built-in agent hold holds it (an agent's run no exemption matched). */
  agent_hold: boolean;
  require_reason: boolean;
  /** The requester may not approve their own run. */
  distinct_approver: boolean;
  /** A workflow approval step's deadline, after which it takes its deny path. */
  expires_at?: string | null;
  /**
   * A run held at the plan gate: the saved plan's digest (`sha256:` + hex of the plan file), which
   * the approval binds to and the apply checks, and what the plan does.
   */
  plan?: {
    digest: string;
    summary: string;
    /**
     * Why no plan was made (its module fetch ran out of time): held because the gate could judge
     * nothing, and an approval has nothing to apply (the run then ends failed, applying nothing).
     */
    not_made?: string;
  };
  /**
   * A run an AI proposed (POST /v1/ai/propose-run): the plain-language request it came from and the
   * model's reasoning, shown on the attention item; held for a person like an agent's run.
   */
  proposal?: { request: string; reasoning: string; provider: string; model: string };
}

export type GateVerdict =
  | { verdict: 'run'; exempted_by: string[] }
  | { verdict: 'hold'; hold: Hold }
  | { verdict: 'deny'; policies: string[] };

export function judgeSubmission(facts: SubmissionFacts, policies: readonly GatePolicy[]): GateVerdict {
  // A policy with a plan condition is judged at the plan gate (judgePlan), once there is a plan.
  const matching = policies.filter((policy) => !hasPlanCondition(policy) && matches(policy, facts));
  const denying = matching.filter((p) => p.effect === 'deny');
  if (denying.length > 0) return { verdict: 'deny', policies: denying.map((p) => p.id) };

  const holding = matching.filter((p) => p.effect === 'require_approval');
  const exempting = facts.actor_kind === 'agent' ? matching.filter((p) => p.effect === 'exempt') : [];
  const agentHold = facts.actor_kind === 'agent' && exempting.length === 0;
  if (holding.length === 0 && !agentHold) return { verdict: 'run', exempted_by: exempting.map((p) => p.id) };
  return {
    verdict: 'hold',
    hold: {
      policies: holding.map((p) => p.id),
      agent_hold: agentHold,
      require_reason: holding.some((p) => p.require_reason),
      distinct_approver: holding.some((p) => p.require_distinct_approver),
    },
  };
}

const hasPlanCondition = (policy: GatePolicy) => Array.isArray(policy.plan_deletes) && policy.plan_deletes.length > 0;

/**
 * The plan gate (spec part A 3.1: "a plan gate's apply holds a run"): a real terraform or opentofu
 * run has planned, and `deletes` says whether its plan deletes any of given types (core/iac/plan.ts
 * planDeletesAny). Only policies with a plan condition are judged here; the submission's facts
 * must match their other conditions too. A matching deny refuses the apply; a matching
 * require-approval holds it. No agent hold here: that was judged at submission.
 */
export function judgePlan(facts: SubmissionFacts, deletes: (types: readonly string[]) => boolean, policies: readonly GatePolicy[]): GateVerdict {
  const matching = policies.filter((policy) => hasPlanCondition(policy) && policy.effect !== 'exempt' && matches(policy, facts) && deletes(policy.plan_deletes!));
  const denying = matching.filter((p) => p.effect === 'deny');
  if (denying.length > 0) return { verdict: 'deny', policies: denying.map((p) => p.id) };
  const holding = matching.filter((p) => p.effect === 'require_approval');
  if (holding.length === 0) return { verdict: 'run', exempted_by: [] };
  return {
    verdict: 'hold',
    hold: {
      policies: holding.map((p) => p.id),
      agent_hold: false,
      require_reason: holding.some((p) => p.require_reason),
      distinct_approver: holding.some((p) => p.require_distinct_approver),
    },
  };
}

function matches(policy: GatePolicy, facts: SubmissionFacts): boolean {
  if (policy.exclude_dry_run && facts.dry_run && facts.dry_run_change_free) return false;
  if (policy.effect === 'exempt' && (policy.actor_kind ?? 'agent') !== facts.actor_kind) return false;
  return (
    equalOrUnset(policy.tool, facts.tool) &&
    (policy.command_contains === null || policy.command_contains === '' || facts.command.includes(policy.command_contains)) &&
    equalOrUnset(policy.inventory_id, facts.inventory_id) &&
    equalOrUnset(policy.queue, facts.queue) &&
    equalOrUnset(policy.actor, facts.actor) &&
    equalOrUnset(policy.account, facts.account) &&
    equalOrUnset(policy.actor_kind, facts.actor_kind)
  );
}

function equalOrUnset(condition: string | null, value: string | null): boolean {
  return condition === null || condition === value;
}

/**
 * One verdict for a submission made of several runs (a pipeline's or workflow's steps, a split's
 * shards): refused if any is refused, held (once, for all) if any is held, else it runs.
 */
export function combineVerdicts(verdicts: readonly GateVerdict[]): GateVerdict {
  const denied = verdicts.flatMap((v) => (v.verdict === 'deny' ? v.policies : []));
  if (denied.length > 0) return { verdict: 'deny', policies: [...new Set(denied)] };
  const holds = verdicts.flatMap((v) => (v.verdict === 'hold' ? [v.hold] : []));
  if (holds.length === 0) {
    return { verdict: 'run', exempted_by: [...new Set(verdicts.flatMap((v) => (v.verdict === 'run' ? v.exempted_by : [])))] };
  }
  return {
    verdict: 'hold',
    hold: {
      policies: [...new Set(holds.flatMap((h) => h.policies))],
      agent_hold: holds.some((h) => h.agent_hold),
      require_reason: holds.some((h) => h.require_reason),
      distinct_approver: holds.some((h) => h.distinct_approver),
    },
  };
}
