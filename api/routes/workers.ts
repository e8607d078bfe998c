import Router from '@koa/router';
import type { ServerContext } from '../../services/context';
import { listWorkerPage, type ListedWorker } from '../../store/workers';
import { requireRole } from '../middleware/auth';
import { answerConfigList, configListQuery } from '../paging';
import { describeRoute } from '../openapi/registry';

/**
 * The executor fleet (spec part A 4.12): every worker process connected to this install, the
 * servers' own pool workers included, with the queue each serves and its lease freshness. Any
 * signed-in account may read it.
 */
export function workerRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/workers' });
  describeRoute({ method: 'get', path: '/v1/workers', summary: 'List workers', role: 'viewer', query: configListQuery });
  router.get('/', async (ctx) => {
    requireRole(ctx, 'viewer');
    await answerConfigList(ctx, 'workers', (page) => listWorkerPage(server.sql, page), workerView);
  });
  return router;
}

/** A worker as the API shows it: `queue` "" is the default pool; `lease` is `lost` after three missed renewals. */
export function workerView(worker: ListedWorker) {
  return {
    id: worker.id,
    queue: worker.queue,
    host: worker.host,
    pid: worker.pid,
    started_at: worker.started_at,
    renewed_at: worker.renewed_at,
    renew_seconds: worker.renew_seconds,
    lease: worker.lost ? ('lost' as const) : ('fresh' as const),
    kind: worker.kind,
    version: worker.version,
    last_contact: worker.renewed_at,
    runs_held: worker.runs_held,
  };
}
