import Router from '@koa/router';
import { z } from 'zod';
import { runView } from '../../core/runs/run-view';
import { driftList, reconcileDrift } from '../../services/iac/drift';
import type { ServerContext } from '../../services/context';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { listEnvelope, pageQuery } from '../paging';
import { parseInput, queryObject } from '../validate';
import { fitsBytes } from '../schemas/common';
import { describeRoute } from '../openapi/registry';

const templateId = z.string({ message: 'template_id must be a string' }).min(1, 'template_id must not be empty').refine(fitsBytes(512), 'template_id must be at most 512 bytes');

const driftQuery = z.strictObject({ ...pageQuery(200, 1000), template_id: templateId.optional() });
const reconcileBody = z.strictObject({ template_id: templateId });

/**
 * `GET /v1/drift` and `POST /v1/drift/reconcile` (spec part A 4.2, 1.2; services/iac/drift.ts).
 * Drift is read by viewers (below admin, of the templates' runs they may read); reconciling is an
 * operator's, on the Team tier.
 */
export function driftRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/drift' });

  describeRoute({ method: 'get', path: '/v1/drift', summary: 'List drift', role: 'viewer', query: driftQuery });
  router.get('/', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const query = parseInput(driftQuery, queryObject(ctx.query));
    const { rows, total } = await driftList(server, caller, { limit: query.limit, offset: query.offset, templateId: query.template_id });
    ctx.body = listEnvelope(
      'drift',
      rows.map((row) => ({
        kind: 'resource',
        tool: row.tool,
        template_id: row.template_id,
        address: row.address,
        type: row.type,
        action: row.action,
        check_run_id: row.run_id,
        checked_at: row.checked_at.toISOString(),
        plan_digest: row.plan_digest,
        plan_kept: row.plan_kept,
      })),
      total,
      query.offset,
    );
  });

  describeRoute({ method: 'post', path: '/v1/drift/reconcile', summary: 'Reconcile drift by submitting runs', role: 'operator', body: reconcileBody, ok: 201 });
  router.post('/reconcile', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const body = parseInput(reconcileBody, ctx.request.body ?? {});
    const run = await reconcileDrift(server, caller, originOf(ctx), body.template_id);
    ctx.status = 201;
    ctx.set('Location', `/v1/runs/${run.id}`);
    ctx.body = runView(run);
  });

  return router;
}
