import Router from '@koa/router';
import { badRequest } from '../../core/errors';
import { readerOf } from '../../services/access/access';
import type { ServerContext } from '../../services/context';
import { changeTrigger, createTrigger, readableTrigger, removeTrigger, rotateTriggerSecret, triggerView } from '../../services/schedules/triggers';
import { listTriggerPage } from '../../store/triggers';
import { getHookDelivery, listHookDeliveryPage } from '../../store/hook-deliveries';
import { deliveryKey } from '../../core/schedules/webhooks';
import { hookDeliveryView } from '../../services/schedules/hook-deliveries';
import { notFound } from '../../core/errors';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { answerConfigList, configListQuery, listEnvelope, pageQuery } from '../paging';
import { z } from 'zod';
import { rotateSecretInput, triggerCreateInput, triggerUpdateInput } from '../schemas/triggers';
import { parseInput } from '../validate';
import { describeRoute } from '../openapi/registry';

/**
 * Webhook triggers (spec part A 4.7; part B 8). Operators and admins make, change and delete them,
 * as they may launch the templates they fire; every role reads them. The signing secret is
 * answered at creation and at each rotation, the hook path at creation only; no read shows either.
 */
/** A trigger's delivery list pages by `limit` (default 100, at most 1000) and `offset`. */
const deliveryListQuery = z.strictObject(pageQuery(100, 1000));

export function triggerRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/triggers' });
  const { sql } = server;

  describeRoute({ method: 'post', path: '/v1/triggers', summary: 'Create a trigger: a push trigger, or with `review` (forge, api_url, write-only token) a pull request review trigger', role: 'operator', body: triggerCreateInput, ok: 201 });
  router.post('/', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const input = parseInput(triggerCreateInput, ctx.request.body);
    const { trigger, secret, hookPath } = await createTrigger(server, caller, originOf(ctx), {
      name: input.name,
      template_id: input.template_id,
      enforce_signature: input.enforce_signature ?? true,
      secret: input.secret,
      review: input.review ?? undefined,
    });
    ctx.status = 201;
    ctx.set('Location', `/v1/triggers/${trigger.id}`);
    ctx.body = { ...triggerView(trigger), secret, hook_path: hookPath };
  });

  describeRoute({ method: 'get', path: '/v1/triggers', summary: 'List triggers', role: 'viewer', query: configListQuery });
  router.get('/', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    await answerConfigList(ctx, 'triggers', (page) => listTriggerPage(sql, page, readerOf(caller)), triggerView);
  });

  describeRoute({ method: 'get', path: '/v1/triggers/:id', summary: 'Read a trigger', role: 'viewer' });
  router.get('/:id', async (ctx) => {
    ctx.body = triggerView(await readableTrigger(server, requireRole(ctx, 'viewer'), ctx.params.id));
  });

  describeRoute({ method: 'get', path: '/v1/triggers/:id/deliveries', summary: "List a push trigger's recorded deliveries, newest first", role: 'viewer', query: deliveryListQuery });
  router.get('/:id/deliveries', async (ctx) => {
    const trigger = await readableTrigger(server, requireRole(ctx, 'viewer'), ctx.params.id);
    const query = parseInput(deliveryListQuery, ctx.query);
    const { rows, total } = await listHookDeliveryPage(sql, trigger.id, query);
    ctx.body = listEnvelope('deliveries', rows.map(hookDeliveryView), total, query.offset);
  });

  describeRoute({ method: 'get', path: '/v1/triggers/:id/deliveries/:delivery_id', summary: "Read a push delivery's record: pending, launched (its run), refused or skipped (why)", role: 'viewer' });
  router.get('/:id/deliveries/:delivery_id', async (ctx) => {
    const trigger = await readableTrigger(server, requireRole(ctx, 'viewer'), ctx.params.id);
    // The id as the sender sent it, or as Cairn keeps it (a long one's SHA-256): the same record.
    const record = await getHookDelivery(sql, trigger.id, deliveryKey(ctx.params.delivery_id));
    if (!record) throw notFound(`delivery ${ctx.params.delivery_id} of trigger ${trigger.id}`);
    ctx.body = hookDeliveryView(record);
  });

  describeRoute({ method: 'put', path: '/v1/triggers/:id', summary: 'Replace a trigger: rename, toggle signature enforcement, or replace a review trigger\'s review settings (token omitted: kept)', role: 'operator', body: triggerUpdateInput });
  router.put('/:id', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const input = parseInput(triggerUpdateInput, ctx.request.body);
    if (input.id !== undefined && input.id !== null && input.id !== ctx.params.id) {
      throw badRequest(`id: the body names trigger ${String(input.id)} but the path names ${ctx.params.id}; the id cannot change`, { field: 'id' });
    }
    const trigger = await changeTrigger(server, caller, originOf(ctx), ctx.params.id, {
      name: input.name ?? undefined,
      enforce_signature: input.enforce_signature ?? undefined,
      template_id: input.template_id,
      review: input.review ?? undefined,
    });
    ctx.body = triggerView(trigger);
  });

  describeRoute({ method: 'post', path: '/v1/triggers/:id/rotate-secret', summary: 'Rotate a trigger\'s secret', role: 'operator', body: rotateSecretInput });
  router.post('/:id/rotate-secret', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const input = parseInput(rotateSecretInput, ctx.request.body);
    const { trigger, secret } = await rotateTriggerSecret(server, caller, originOf(ctx), ctx.params.id, input.secret);
    ctx.body = { ...triggerView(trigger), secret };
  });

  describeRoute({ method: 'delete', path: '/v1/triggers/:id', summary: 'Delete a trigger', role: 'operator', ok: 204 });
  router.delete('/:id', async (ctx) => {
    await removeTrigger(server, requireRole(ctx, 'operator'), originOf(ctx), ctx.params.id);
    ctx.status = 204;
  });

  return router;
}
