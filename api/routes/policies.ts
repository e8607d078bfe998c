import Router from '@koa/router';
import type { Context } from 'koa';
import { forbidden, notFound } from '../../core/errors';
import { newId } from '../../core/ids';
import { featureRefusal, policyLimitRefusal, tierAllows, tierAllowsPolicyCount, TIER_LIMITS, type Feature, type Tier } from '../../core/license';
import { recordMutation } from '../../services/audit';
import type { ServerContext } from '../../services/context';
import {
  countLimitedPolicies,
  deletePolicy,
  getPolicy,
  insertPolicy,
  listPolicyPage,
  lockPolicySet,
  updatePolicy,
  type Policy,
  type PolicyFields,
} from '../../store/policies';
import type { Caller } from '../../store/tokens';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { answerConfigList } from '../paging';
import { policyFields, policyInput } from '../schemas/policies';
import { parseInput } from '../validate';

/**
 * Approval policies (spec part A 2.10, 4.13; part B 5.2, 8). Admins write them; operators and
 * admins read them, since requesters and approvers need to see why a run is held. Every write
 * checks the install's tier under the policy-set lock, so two servers cannot both add the last
 * allowed policy.
 */
export function policyRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/policies' });
  const { sql } = server;
  const tier = () => server.licensing.tier;

  router.post('/', async (ctx) => {
    const caller = requireWriter(ctx);
    const fields = policyFields(parseInput(policyInput, ctx.request.body));
    const policy = await recordMutation(sql, originOf(ctx), 201, async (tx, entry) => {
      await lockPolicySet(tx);
      checkFeatures(fields, tier());
      const before = await countLimitedPolicies(tx);
      checkCount(tier(), before, before + (counts(fields) ? 1 : 0));
      const created = await insertPolicy(tx, newId('pol'), fields, caller.account.username);
      entry.body = { kind: 'policy.created', policy_id: created.id, policy: auditedFields(created) };
      return created;
    });
    ctx.status = 201;
    ctx.set('Location', `/v1/policies/${policy.id}`);
    ctx.body = policyView(policy);
  });

  router.get('/', async (ctx) => {
    requireRole(ctx, 'operator');
    await answerConfigList(ctx, 'policies', (page) => listPolicyPage(sql, page), policyView);
  });

  router.get('/:id', async (ctx) => {
    requireRole(ctx, 'operator');
    const policy = await getPolicy(sql, ctx.params.id);
    if (!policy) throw notFound(`policy ${ctx.params.id}`);
    ctx.body = policyView(policy);
  });

  router.put('/:id', async (ctx) => {
    requireWriter(ctx);
    const fields = policyFields(parseInput(policyInput, ctx.request.body));
    const policy = await recordMutation(sql, originOf(ctx), 200, async (tx, entry) => {
      await lockPolicySet(tx);
      const current = await getPolicy(tx, ctx.params.id);
      if (!current) throw notFound(`policy ${ctx.params.id}`);
      checkFeatures(fields, tier());
      const before = await countLimitedPolicies(tx);
      checkCount(tier(), before, before - (counts(current) ? 1 : 0) + (counts(fields) ? 1 : 0));
      const updated = await updatePolicy(tx, current.id, fields);
      if (!updated) throw notFound(`policy ${ctx.params.id}`);
      entry.body = {
        kind: 'policy.updated',
        policy_id: updated.id,
        policy: auditedFields(updated),
        previous: auditedFields(current),
      };
      return updated;
    });
    ctx.body = policyView(policy);
  });

  router.delete('/:id', async (ctx) => {
    requireWriter(ctx);
    await recordMutation(sql, originOf(ctx), 204, async (tx, entry) => {
      const current = await getPolicy(tx, ctx.params.id);
      if (!current || !(await deletePolicy(tx, current.id))) throw notFound(`policy ${ctx.params.id}`);
      entry.body = { kind: 'policy.deleted', policy_id: current.id, policy: auditedFields(current) };
    });
    ctx.status = 204;
  });

  return router;
}

/**
 * An admin, and not through an agent token: the built-in agent hold exists so a person sees what
 * an agent does, and an agent able to write an exemption (or delete a require-approval policy)
 * could lift that hold from its own runs. An agent never approves (spec part B 5.2 item 6); this
 * keeps it from approving in advance.
 */
function requireWriter(ctx: Context): Caller {
  const caller = requireRole(ctx, 'admin');
  if (caller.token.kind === 'agent') {
    throw forbidden('an agent token may not change approval policies; use a person’s token');
  }
  return caller;
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

/** A policy as the API shows it: every column, RFC 3339 times, and `rego` (null: not from the policy file). */
export function policyView(policy: Policy) {
  return {
    id: policy.id,
    name: policy.name,
    effect: policy.effect,
    tool: policy.tool,
    command_contains: policy.command_contains,
    inventory_id: policy.inventory_id,
    queue: policy.queue,
    actor: policy.actor,
    account: policy.account,
    actor_kind: policy.actor_kind,
    require_reason: policy.require_reason,
    exclude_dry_run: policy.exclude_dry_run,
    require_distinct_approver: policy.require_distinct_approver,
    rego: null,
    created_by: policy.created_by,
    created_at: policy.created_at.toISOString(),
    updated_at: policy.updated_at.toISOString(),
  };
}
