import Router from '@koa/router';
import { readerOf } from '../../services/access/access';
import type { ServerContext } from '../../services/context';
import {
  createInventory,
  inventorySummaryView,
  inventoryView,
  previewInventory,
  readableInventory,
  removeInventory,
  replaceInventory,
  type InventoryDraft,
} from '../../services/ansible/inventories';
import { listInventoryPage } from '../../store/inventories';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { answerConfigList, configListQuery } from '../paging';
import { composedInventoryInput, inventoryInput, previewInput, storedPreviewInput } from '../schemas/inventories';
import { composedPreviewInput } from '../schemas/inventory-sources';
import { definitionOf, previewComposed } from '../../services/ansible/composed-inventories';
import { badRequest } from '../../core/errors';
import { parseInput } from '../validate';
import { describeRoute } from '../openapi/registry';

/**
 * Stored inventories (spec part A 4.12; part B 8): operators and admins store them; the account
 * that stores one manages it. Below admin, reading one needs read on it, naming it in a run use,
 * editing and deleting manage (services/access.ts); the list holds only what the caller may read
 * and never content. Bodies of `POST` and `PUT` may be 26 MiB (api/middleware/body.ts).
 */
export function inventoryRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/inventories' });
  const { sql } = server;

  const draftOf = (body: unknown): InventoryDraft => {
    // A smart or constructed inventory names its `kind` (services/composed-inventories.ts).
    const kind = body && typeof body === 'object' ? (body as Record<string, unknown>).kind : undefined;
    if (kind !== undefined && kind !== null && kind !== 'static') {
      const composed = parseInput(composedInventoryInput, body);
      return {
        name: composed.name,
        kind: composed.kind,
        content: '',
        inputs: composed.inputs,
        host_filter: composed.kind === 'smart' ? composed.host_filter : null,
        source_vars: composed.kind === 'constructed' ? (composed.source_vars ?? null) : null,
        org_id: composed.org_id ?? null,
        queue: composed.queue ?? '',
        id: composed.id,
      };
    }
    const input = parseInput(inventoryInput, body);
    return { name: input.name, content: input.content, format: input.format ?? null, org_id: input.org_id ?? null, queue: input.queue ?? '', id: input.id };
  };

  describeRoute({ method: 'post', path: '/v1/inventories', summary: 'Create an inventory (static, smart, or composed with `sources`)', body: inventoryInput, role: 'operator', ok: 201 });
  router.post('/', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const inventory = await createInventory(server, caller, originOf(ctx), draftOf(ctx.request.body));
    ctx.status = 201;
    ctx.set('Location', `/v1/inventories/${inventory.id}`);
    ctx.body = inventoryView(inventory, caller);
  });

  // Before `/:id` routes: `preview` is not an id.
  describeRoute({ method: 'post', path: '/v1/inventories/preview', summary: 'Preview an inventory draft\'s hosts', role: 'operator', body: previewInput });
  router.post('/preview', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    // A smart or constructed inventory names its `kind` (services/composed-inventories.ts).
    const body = ctx.request.body as Record<string, unknown> | undefined;
    if (body && typeof body === 'object' && 'kind' in body) {
      ctx.body = await previewComposed(server, caller, parseInput(composedPreviewInput, body));
      return;
    }
    const input = parseInput(previewInput, ctx.request.body);
    ctx.body = await previewInventory(server, caller, { content: input.content, format: input.format }, input.limit ?? undefined);
  });

  describeRoute({ method: 'post', path: '/v1/inventories/:id/preview', summary: 'Preview a stored inventory\'s hosts', role: 'operator', body: storedPreviewInput });
  router.post('/:id/preview', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const input = parseInput(storedPreviewInput, ctx.request.body ?? {});
    const inventory = await readableInventory(sql, caller, ctx.params.id);
    if (inventory.kind !== 'static') {
      // Resolved as a run would be now, over its inputs as they are (each needing read by the caller).
      if (input.limit) throw badRequest(`limit: the preview of a ${inventory.kind} inventory applies no limit`, { field: 'limit' });
      ctx.body = await previewComposed(server, caller, definitionOf(inventory), 'read', inventory.id);
      return;
    }
    ctx.body = await previewInventory(server, caller, { id: ctx.params.id }, input.limit ?? undefined);
  });

  describeRoute({ method: 'get', path: '/v1/inventories', summary: 'List inventories', role: 'viewer', query: configListQuery });
  router.get('/', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    await answerConfigList(ctx, 'inventories', (page) => listInventoryPage(sql, page, readerOf(caller)), inventorySummaryView);
  });

  describeRoute({ method: 'get', path: '/v1/inventories/:id', summary: 'Read an inventory', role: 'viewer' });
  router.get('/:id', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    ctx.body = inventoryView(await readableInventory(sql, caller, ctx.params.id), caller);
  });

  describeRoute({ method: 'put', path: '/v1/inventories/:id', summary: 'Replace an inventory', body: inventoryInput, role: 'operator' });
  router.put('/:id', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    ctx.body = inventoryView(await replaceInventory(server, caller, originOf(ctx), ctx.params.id, draftOf(ctx.request.body)), caller);
  });

  describeRoute({ method: 'delete', path: '/v1/inventories/:id', summary: 'Delete an inventory', role: 'operator', ok: 204 });
  router.delete('/:id', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    await removeInventory(server, caller, originOf(ctx), ctx.params.id);
    ctx.status = 204;
  });

  return router;
}
