import Router from '@koa/router';
import type { ServerContext } from '../../services/context';
import { databaseAnswers } from '../../store/db';
import { requireRole } from '../middleware/auth';

export function healthRoutes(server: ServerContext): Router {
  const router = new Router();

  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });

  router.get('/readyz', async (ctx) => {
    const ready = await databaseAnswers(server.sql);
    ctx.status = ready ? 200 : 503;
    ctx.body = ready ? { status: 'ready' } : { error: 'the store does not answer', status: 'unavailable' };
  });

  router.get('/metrics', async (ctx) => {
    requireRole(ctx, 'viewer');
    ctx.type = server.metrics.contentType;
    ctx.body = await server.metrics.collect();
  });

  return router;
}
