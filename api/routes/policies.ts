import Router from '@koa/router';
import type { Context } from 'koa';
import { notFound } from '../../core/errors';
import type { ServerContext } from '../../services/context';
import { createPolicy, refuseAgentPolicyChange, removePolicy, replacePolicy } from '../../services/runs/policies';
import { getPolicy, listPolicyPage, type Policy } from '../../store/policies';
import type { Caller } from '../../store/tokens';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { answerConfigList, configListQuery } from '../paging';
import { policyFields, policyInput } from '../schemas/policies';
import { parseInput } from '../validate';
import { describeRoute } from '../openapi/registry';

/**
 * Approval policies (spec part A 2.10, 4.13; part B 5.2, 8). Admins, never through an agent token,
 * write them (services/policies.ts); operators and admins read them, since requesters and
 * approvers need to see why a run is held.
 */
export function policyRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/policies' });
  const { sql } = server;

  describeRoute({ method: 'post', path: '/v1/policies', summary: 'Create a policy', body: policyInput, ok: 201 });
  router.post('/', async (ctx) => {
    const caller = requireWriter(ctx);
    const fields = policyFields(parseInput(policyInput, ctx.request.body));
    const policy = await createPolicy(server, caller, originOf(ctx), fields);
    ctx.status = 201;
    ctx.set('Location', `/v1/policies/${policy.id}`);
    ctx.body = policyView(policy);
  });

  describeRoute({ method: 'get', path: '/v1/policies', summary: 'List policies', role: 'operator', query: configListQuery });
  router.get('/', async (ctx) => {
    requireRole(ctx, 'operator');
    await answerConfigList(ctx, 'policies', (page) => listPolicyPage(sql, page), policyView);
  });

  describeRoute({ method: 'get', path: '/v1/policies/:id', summary: 'Read a policy', role: 'operator' });
  router.get('/:id', async (ctx) => {
    requireRole(ctx, 'operator');
    const policy = await getPolicy(sql, ctx.params.id);
    if (!policy) throw notFound(`policy ${ctx.params.id}`);
    ctx.body = policyView(policy);
  });

  describeRoute({ method: 'put', path: '/v1/policies/:id', summary: 'Replace a policy', body: policyInput });
  router.put('/:id', async (ctx) => {
    requireWriter(ctx);
    const fields = policyFields(parseInput(policyInput, ctx.request.body));
    ctx.body = policyView(await replacePolicy(server, originOf(ctx), ctx.params.id, fields));
  });

  describeRoute({ method: 'delete', path: '/v1/policies/:id', summary: 'Delete a policy', role: 'admin', ok: 204 });
  router.delete('/:id', async (ctx) => {
    requireWriter(ctx);
    await removePolicy(server, originOf(ctx), ctx.params.id);
    ctx.status = 204;
  });

  return router;
}

/** An admin, and not through an agent token. */
function requireWriter(ctx: Context): Caller {
  const caller = requireRole(ctx, 'admin');
  refuseAgentPolicyChange(caller);
  return caller;
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
    plan_deletes: policy.plan_deletes ?? null,
    rego: policy.rego ?? null,
    created_by: policy.created_by,
    created_at: policy.created_at.toISOString(),
    updated_at: policy.updated_at.toISOString(),
  };
}
