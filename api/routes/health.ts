import Router from '@koa/router';
import type { ServerContext } from '../../services/context';
import { databaseAnswers } from '../../store/db';
import { requireRole } from '../middleware/auth';
import { describeRoute } from '../openapi/registry';

export function healthRoutes(server: ServerContext): Router {
  const router = new Router();

  describeRoute({ method: 'get', path: '/healthz', summary: 'Liveness: the process answers (public)', okExample: { status: 'ok' } });
  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });

  describeRoute({ method: 'get', path: '/readyz', summary: 'Readiness: the store answers (public)', okExample: { status: 'ready' }, errors: [503] });
  router.get('/readyz', async (ctx) => {
    const ready = await databaseAnswers(server.sql);
    ctx.status = ready ? 200 : 503;
    ctx.body = ready ? { status: 'ready' } : { error: 'the store does not answer', status: 'unavailable' };
  });

  describeRoute({ method: 'get', path: '/metrics', summary: 'Prometheus metrics', role: 'viewer', okType: 'text/plain' });
  router.get('/metrics', async (ctx) => {
    requireRole(ctx, 'viewer');
    ctx.type = server.metrics.contentType;
    ctx.body = await server.metrics.collect();
  });

  return router;
}
