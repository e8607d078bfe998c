import Router from '@koa/router';
import { z } from 'zod';
import { notFound } from '../../core/errors';
import type { ServerContext } from '../../services/context';
import {
  attachmentView,
  attachTarget,
  createTarget,
  deliveryId,
  deliveryView,
  detachTarget,
  removeTarget,
  replaceTarget,
  targetView,
  targetViews,
  withholdDestinationSecrets,
} from '../../services/notifications/notifications';
import { readableRun, readerOf } from '../../services/access/access';
import {
  getTarget,
  listAttachmentsOfTarget,
  listDeliveriesOfTarget,
  listRunNotifications,
  listTargetPage,
  targetDeliveryStats,
} from '../../store/notifications';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { answerConfigList, listEnvelope, pageQuery, configListQuery } from '../paging';
import { attachmentInput, deliveryListQuery, targetInput } from '../schemas/notifications';
import { parseInput, queryObject } from '../validate';
import { describeRoute } from '../openapi/registry';

/**
 * Named notification targets, their attachments and deliveries (spec part A 4.8), and what a run's
 * targets were told (`GET /v1/runs/{id}/notifications`, 4.1). Admins create targets; an admin or a
 * manager of a target changes and deletes it; attaching and detaching ask use of the target and
 * management of the object (services/notifications.ts); operators read, a target's deliveries only
 * of the runs they may read. No read ever carries a target's `url` or `key`.
 */
const attachmentListQuery = z.strictObject(pageQuery(1000, 1000));
const deliveryPageQuery = z.strictObject({ ...pageQuery(100, 1000), ...deliveryListQuery });

export function notificationRoutes(server: ServerContext): Router {
  const router = new Router();
  const { sql } = server;

  const draftOf = (body: unknown, origin: ReturnType<typeof originOf>) => {
    withholdDestinationSecrets(origin);
    return parseInput(targetInput, body);
  };

  const viewOf = async (id: string) => {
    const target = await getTarget(sql, id);
    if (!target) throw notFound(`notification target ${id}`);
    return targetView(target, (await targetDeliveryStats(sql, [id])).get(id));
  };

  describeRoute({ method: 'post', path: '/v1/notifications', summary: 'Create a notification target', role: 'admin', body: targetInput, ok: 201 });
  router.post('/v1/notifications', async (ctx) => {
    const caller = requireRole(ctx, 'admin');
    const target = await createTarget(server, caller, originOf(ctx), draftOf(ctx.request.body, originOf(ctx)));
    ctx.status = 201;
    ctx.set('Location', `/v1/notifications/${target.id}`);
    ctx.body = await viewOf(target.id);
  });

  describeRoute({ method: 'get', path: '/v1/notifications', summary: 'List notifications', role: 'operator', query: configListQuery });
  router.get('/v1/notifications', async (ctx) => {
    requireRole(ctx, 'operator');
    await answerConfigList(
      ctx,
      'notifications',
      async (page) => {
        const { rows, total } = await listTargetPage(sql, page);
        return { rows: await targetViews(sql, rows), total };
      },
      (view) => view,
    );
  });

  describeRoute({ method: 'get', path: '/v1/notifications/:id', summary: 'Read a notification', role: 'operator' });
  router.get('/v1/notifications/:id', async (ctx) => {
    requireRole(ctx, 'operator');
    ctx.body = await viewOf(ctx.params.id);
  });

  describeRoute({ method: 'put', path: '/v1/notifications/:id', summary: 'Replace a notification target', role: 'viewer', body: targetInput, errors: [403] });
  router.put('/v1/notifications/:id', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    await replaceTarget(server, caller, originOf(ctx), ctx.params.id, draftOf(ctx.request.body, originOf(ctx)));
    ctx.body = await viewOf(ctx.params.id);
  });

  describeRoute({ method: 'delete', path: '/v1/notifications/:id', summary: 'Delete a notification', role: 'viewer', ok: 204 });
  router.delete('/v1/notifications/:id', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    await removeTarget(server, caller, originOf(ctx), ctx.params.id);
    ctx.status = 204;
  });

  describeRoute({ method: 'get', path: '/v1/notifications/:id/attachments', summary: 'The attachments of a notification', query: attachmentListQuery, role: 'operator' });
  router.get('/v1/notifications/:id/attachments', async (ctx) => {
    requireRole(ctx, 'operator');
    const query = parseInput(attachmentListQuery, queryObject(ctx.query));
    if (!(await getTarget(sql, ctx.params.id))) throw notFound(`notification target ${ctx.params.id}`);
    const { rows, total } = await listAttachmentsOfTarget(sql, ctx.params.id, query);
    ctx.body = listEnvelope('attachments', rows.map(attachmentView), total, query.offset);
  });

  describeRoute({ method: 'post', path: '/v1/notifications/:id/attachments', summary: 'Attach a notification target to a template or project', role: 'viewer', body: attachmentInput, ok: 201 });
  router.post('/v1/notifications/:id/attachments', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const input = parseInput(attachmentInput, ctx.request.body);
    const attachment = await attachTarget(server, caller, originOf(ctx), ctx.params.id, input);
    ctx.status = 201;
    ctx.body = attachmentView(attachment);
  });

  describeRoute({ method: 'delete', path: '/v1/notifications/:id/attachments/:attachment', summary: 'Delete an attachment', role: 'viewer', ok: 204 });
  router.delete('/v1/notifications/:id/attachments/:attachment', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    await detachTarget(server, caller, originOf(ctx), ctx.params.id, ctx.params.attachment);
    ctx.status = 204;
  });

  describeRoute({ method: 'get', path: '/v1/notifications/:id/deliveries', summary: 'The deliveries of a notification', query: deliveryPageQuery, role: 'operator' });
  router.get('/v1/notifications/:id/deliveries', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const query = parseInput(deliveryPageQuery, queryObject(ctx.query));
    if (!(await getTarget(sql, ctx.params.id))) throw notFound(`notification target ${ctx.params.id}`);
    // Only deliveries of runs the caller may read (spec part B 5.2 rule 5).
    const { rows, total } = await listDeliveriesOfTarget(sql, ctx.params.id, query, readerOf(caller));
    ctx.body = listEnvelope('deliveries', rows.map(deliveryView), total, query.offset);
  });

  describeRoute({ method: 'get', path: '/v1/runs/:id/notifications', summary: 'The notifications of a run', role: 'operator' });
  router.get('/v1/runs/:id/notifications', async (ctx) => {
    // Whoever reads the run reads what its targets were told (target ids and states, never a URL).
    const run = await readableRun(sql, requireRole(ctx, 'operator'), ctx.params.id);
    const { events, deliveries } = await listRunNotifications(sql, run.id);
    ctx.body = {
      run_id: run.id,
      events: events.map((e) => ({
        sequence: e.seq,
        event: e.event,
        state: e.state,
        reason: e.reason,
        owed_at: e.owed_at.toISOString(),
        recorded_at: e.recorded_at ? e.recorded_at.toISOString() : null,
        deliveries: deliveries
          .filter((d) => d.seq === e.seq)
          .map((d) => ({
            ...deliveryView(d),
            id: deliveryId(d),
            target_name: d.target_name,
            target_kind: d.target_kind,
          })),
      })),
    };
  });

  return router;
}
