import Router from '@koa/router';
import type { ServerContext } from '../../services/context';
import { clearFacts, hostFacts, inventoryFacts, inventoryHostFacts } from '../../services/ansible/facts';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { describeRoute } from '../openapi/registry';

/**
 * The fact cache's routes (spec part A 4.4, 4.12; services/facts.ts):
 *
 * - `GET /v1/inventories/{id}/facts`, `GET /v1/inventories/{id}/facts/{host}`: operator role and
 *   read on the inventory; hosts whose gathering run the caller may not read are left out (counted
 *   in `withheld`), a host's facts masked below admin.
 * - `DELETE` of either: operator role and manage on the inventory; the next run gathers afresh.
 * - `GET /v1/hosts/{host}/facts`: the most recent facts gathered for a host from any inventory;
 *   viewers may read it, for a run they may read.
 *
 * With `--fact-cache-admin-only` every fact read is 403 below admin.
 */
export function factRoutes(server: ServerContext): Router {
  const router = new Router();

  describeRoute({ method: 'get', path: '/v1/inventories/:id/facts', summary: 'The facts of an inventory', role: 'operator' });
  router.get('/v1/inventories/:id/facts', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    ctx.body = await inventoryFacts(server, caller, ctx.params.id);
  });

  describeRoute({ method: 'get', path: '/v1/inventories/:id/facts/:host', summary: 'Read a fact', role: 'operator' });
  router.get('/v1/inventories/:id/facts/:host', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    ctx.body = await inventoryHostFacts(server, caller, ctx.params.id, ctx.params.host);
  });

  describeRoute({ method: 'delete', path: '/v1/inventories/:id/facts', summary: 'Forget the facts of an inventory', role: 'operator', ok: 204 });
  router.delete('/v1/inventories/:id/facts', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    await clearFacts(server, caller, originOf(ctx), ctx.params.id);
    ctx.status = 204;
  });

  describeRoute({ method: 'delete', path: '/v1/inventories/:id/facts/:host', summary: 'Forget one host\'s facts', role: 'operator', ok: 204 });
  router.delete('/v1/inventories/:id/facts/:host', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    await clearFacts(server, caller, originOf(ctx), ctx.params.id, ctx.params.host);
    ctx.status = 204;
  });

  describeRoute({ method: 'get', path: '/v1/hosts/:host/facts', summary: 'The facts of a host', role: 'viewer' });
  router.get('/v1/hosts/:host/facts', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    ctx.body = await hostFacts(server, caller, ctx.params.host);
  });

  return router;
}
