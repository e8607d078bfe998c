import { conflict, forbidden, notFound } from '../../core/errors';
import { newId } from '../../core/ids';
import { featureRefusal, policyLimitRefusal, tierAllows, tierAllowsPolicyCount, TIER_LIMITS, type Feature, type Tier } from '../../core/access/license';
import {
  countLimitedPolicies,
  deletePolicy,
  getPolicy,
  insertPolicy,
  lockPolicySet,
  updatePolicy,
  type Policy,
  type PolicyFields,
} from '../../store/policies';
import type { Caller } from '../../store/tokens';
import { recordMutation, type AuditOrigin } from '../audit/audit';
import type { ServerContext } from '../context';

/**
 * Approval policies (spec part A 2.10, 4.13; part B 5.2, 8). Admins write them. Every write checks
 * the install's tier under the policy-set lock, so two servers cannot both add the last allowed
 * policy.
 */

/**
 * An agent token may not change policies, whatever its account's role: the built-in agent hold
 * exists so a person sees what an agent does, and an agent able to write an exemption (or delete a
 * require-approval policy) could lift that hold from its own runs. An agent never approves (spec
 * part B 5.2 item 6); this keeps it from approving in advance.
 */
export function refuseAgentPolicyChange(caller: Caller): void {
  if (caller.token.kind === 'agent') {
    throw forbidden('an agent token may not change approval policies; use a person’s token');
  }
}

/** An exemption only ever lets an agent's run past the agent hold; the stored policy says so. */
const stored = (fields: PolicyFields): PolicyFields => (fields.effect === 'exempt' ? { ...fields, actor_kind: 'agent' } : fields);

/** A new policy, within the tier's features and count. */
export async function createPolicy(ctx: ServerContext, caller: Caller, origin: AuditOrigin, asked: PolicyFields): Promise<Policy> {
  const fields = stored(asked);
  return recordMutation(ctx.sql, origin, 201, async (tx, entry) => {
    await lockPolicySet(tx);
    const tier = ctx.licensing.tier;
    checkFeatures(fields, tier);
    const before = await countLimitedPolicies(tx);
    checkCount(tier, before, before + (counts(fields) ? 1 : 0));
    const created = await insertPolicy(tx, newId('pol'), fields, caller.account.username);
    entry.body = { kind: 'policy.created', policy_id: created.id, policy: auditedFields(created) };
    return created;
  });
}

/** Replaces a policy whole, within the tier's features and count. */
export async function replacePolicy(ctx: ServerContext, origin: AuditOrigin, policyId: string, asked: PolicyFields): Promise<Policy> {
  const fields = stored(asked);
  return recordMutation(ctx.sql, origin, 200, async (tx, entry) => {
    await lockPolicySet(tx);
    const current = await getPolicy(tx, policyId);
    if (!current) throw notFound(`policy ${policyId}`);
    refuseFilePolicyChange(current);
    const tier = ctx.licensing.tier;
    checkFeatures(fields, tier);
    const before = await countLimitedPolicies(tx);
    checkCount(tier, before, before - (counts(current) ? 1 : 0) + (counts(fields) ? 1 : 0));
    const updated = await updatePolicy(tx, current.id, fields);
    if (!updated) throw notFound(`policy ${policyId}`);
    entry.body = { kind: 'policy.updated', policy_id: updated.id, policy: auditedFields(updated), previous: auditedFields(current) };
    return updated;
  });
}

/** Deletes a policy; lowering the count is allowed on every tier. */
export async function removePolicy(ctx: ServerContext, origin: AuditOrigin, policyId: string): Promise<void> {
  await recordMutation(ctx.sql, origin, 204, async (tx, entry) => {
    const current = await getPolicy(tx, policyId);
    if (current) refuseFilePolicyChange(current);
    if (!current || !(await deletePolicy(tx, current.id))) throw notFound(`policy ${policyId}`);
    entry.body = { kind: 'policy.deleted', policy_id: current.id, policy: auditedFields(current) };
  });
}

/** A policy-file policy is the server's configuration: changed by editing the file and restarting, never through the API. */
function refuseFilePolicyChange(policy: Policy): void {
  if (policy.rego) {
    throw conflict(`policy ${policy.id} (${policy.name}) comes from the policy file (--policy-file); change the file and restart the server`, { field: 'rego' });
  }
}

/** Require-approval and exempt policies count toward the tier's limit; deny policies do not. */
function counts(policy: Pick<PolicyFields, 'effect'>): boolean {
  return policy.effect === 'require_approval' || policy.effect === 'exempt';
}

/** The licensed features a policy uses, each with the field that asks for it. */
function featuresOf(fields: PolicyFields): { feature: Feature; field: string }[] {
  const used: { feature: Feature; field: string }[] = [];
  if (fields.effect === 'deny') used.push({ feature: 'policy_deny', field: 'effect' });
  // An exempt policy may name actor and account on every tier (spec part A 1.2, 2.10).
  if (fields.effect !== 'exempt' && fields.actor !== null) used.push({ feature: 'policy_actor_scope', field: 'actor' });
  if (fields.effect !== 'exempt' && fields.account !== null) used.push({ feature: 'policy_account_scope', field: 'account' });
  if (fields.require_distinct_approver) used.push({ feature: 'policy_distinct_approvers', field: 'require_distinct_approver' });
  return used;
}

function checkFeatures(fields: PolicyFields, tier: Tier): void {
  for (const { feature, field } of featuresOf(fields)) {
    if (!tierAllows(tier, feature)) throw forbidden(featureRefusal(feature, tier), { feature, tier, field });
  }
}

/**
 * A write that adds to the count must stay within the tier's limit. One that keeps it (or lowers
 * it) always passes, so an install holding more than its tier allows (a license that lapsed) can
 * still edit what it has.
 */
function checkCount(tier: Tier, before: number, after: number): void {
  if (after > before && !tierAllowsPolicyCount(tier, after)) {
    throw forbidden(policyLimitRefusal(tier), { feature: 'policy_limit', tier, limit: TIER_LIMITS[tier].policies });
  }
}

/** What a policy's audit entries record of it: everything but its timestamps. */
function auditedFields(policy: Policy): Record<string, unknown> {
  const { created_at: _created, updated_at: _updated, id: _id, ...rest } = policy;
  return rest;
}
