import Router from '@koa/router';
import { readerOf } from '../../services/access/access';
import type { ServerContext } from '../../services/context';
import {
  createInventorySource,
  inventorySourceView,
  readableInventorySource,
  refreshInventorySource,
  removeInventorySource,
  replaceInventorySource,
  type InventorySourceDraft,
} from '../../services/ansible/inventory-sources';
import { listInventorySourcePage } from '../../store/inventory-sources';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { answerConfigList, configListQuery } from '../paging';
import { inventorySourceInput } from '../schemas/inventory-sources';
import { parseInput } from '../validate';
import { noFields } from '../schemas/common';
import { describeRoute } from '../openapi/registry';

/**
 * Dynamic inventory sources (spec part A 4.12), owned by their inventory: operators and admins
 * write them with manage on the inventory; reading one needs read on it (services/access.ts); the
 * list holds only sources of inventories the caller may read.
 */
export function inventorySourceRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/inventory-sources' });
  const { sql } = server;

  const draftOf = (body: unknown): InventorySourceDraft => {
    const input = parseInput(inventorySourceInput, body);
    return {
      inventory_id: input.inventory_id,
      name: input.name,
      kind: input.kind,
      script: input.script ?? null,
      project_id: input.project_id ?? null,
      path: input.path ?? null,
      timeout_seconds: input.timeout_seconds ?? null,
    };
  };

  describeRoute({ method: 'post', path: '/v1/inventory-sources', summary: 'Create an inventory source', body: inventorySourceInput, role: 'operator', ok: 201 });
  router.post('/', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const source = await createInventorySource(server, caller, originOf(ctx), draftOf(ctx.request.body));
    ctx.status = 201;
    ctx.set('Location', `/v1/inventory-sources/${source.id}`);
    ctx.body = inventorySourceView(source, caller);
  });

  describeRoute({ method: 'get', path: '/v1/inventory-sources', summary: 'List inventory sources', role: 'viewer', query: configListQuery });
  router.get('/', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    await answerConfigList(ctx, 'inventory_sources', (page) => listInventorySourcePage(sql, page, readerOf(caller)), (row) => inventorySourceView(row, caller));
  });

  describeRoute({ method: 'get', path: '/v1/inventory-sources/:id', summary: 'Read an inventory source', role: 'viewer' });
  router.get('/:id', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    ctx.body = inventorySourceView(await readableInventorySource(sql, caller, ctx.params.id), caller);
  });

  describeRoute({ method: 'put', path: '/v1/inventory-sources/:id', summary: 'Replace an inventory source', body: inventorySourceInput, role: 'operator' });
  router.put('/:id', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    ctx.body = inventorySourceView(await replaceInventorySource(server, caller, originOf(ctx), ctx.params.id, draftOf(ctx.request.body)), caller);
  });

  describeRoute({ method: 'delete', path: '/v1/inventory-sources/:id', summary: 'Delete an inventory source', role: 'operator', ok: 204 });
  router.delete('/:id', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    await removeInventorySource(server, caller, originOf(ctx), ctx.params.id);
    ctx.status = 204;
  });

  describeRoute({ method: 'post', path: '/v1/inventory-sources/:id/refresh', summary: 'Refresh an inventory source now', role: 'operator', body: noFields });
  router.post('/:id/refresh', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    parseInput(noFields, ctx.request.body);
    ctx.body = inventorySourceView(await refreshInventorySource(server, caller, originOf(ctx), ctx.params.id), caller);
  });

  return router;
}
