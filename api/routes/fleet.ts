import type { Context } from 'koa';
import Router from '@koa/router';
import { z } from 'zod';
import type { ServerContext } from '../../services/context';
import {
  boundedCount,
  compareRuns,
  fleet,
  HOST_RUNS_CAP,
  HOST_RUNS_DEFAULT,
  hostRuns,
  taskTrends,
  WINDOW_CAP,
  WINDOW_DEFAULT,
} from '../../services/ansible/host-results';
import { requireRole } from '../middleware/auth';
import { parseInput, queryObject } from '../validate';
import { describeRoute } from '../openapi/registry';

/**
 * Reads over ansible runs' per-host and per-task results (spec part A 4.1 compare, 4.4; part B 8):
 * `GET /v1/runs/{id}/compare`, `GET /v1/fleet`, `GET /v1/tasks`, `GET /v1/hosts/{host}/runs`.
 * Viewers may read them; each covers only the runs the caller may read.
 */
const windowQuery = z.strictObject({ window: z.string().optional() });
const limitQuery = z.strictObject({ limit: z.string().optional() });
const compareQuery = z.strictObject({
  with: z.string({ message: 'with is required: a run id, or prev for the run before it from the same source' }).min(1, 'with must not be empty'),
});

export function fleetRoutes(server: ServerContext): Router {
  const router = new Router();
  const { sql } = server;

  describeRoute({ method: 'get', path: '/v1/runs/:id/compare', summary: 'Compare a run with another or the previous one', role: 'viewer', query: compareQuery });
  router.get('/v1/runs/:id/compare', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const query = parseInput(compareQuery, queryObject(ctx.query));
    ctx.body = await compareRuns(sql, caller, ctx.params.id, query.with);
  });

  /** The `window` a fleet or task read asks for: the default when absent, at most the cap. */
  const windowOf = (ctx: Context) => boundedCount(parseInput(windowQuery, queryObject(ctx.query)).window, 'window', WINDOW_DEFAULT, WINDOW_CAP);

  describeRoute({ method: 'get', path: '/v1/fleet', summary: 'Per-host outcomes over the last runs', role: 'viewer' });
  router.get('/v1/fleet', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const window = windowOf(ctx);
    const hosts = await fleet(sql, caller, window);
    ctx.body = { window, window_cap: WINDOW_CAP, hosts, count: hosts.length, total: hosts.length };
  });

  describeRoute({ method: 'get', path: '/v1/tasks', summary: 'Per-task outcomes over the last runs', role: 'viewer' });
  router.get('/v1/tasks', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const window = windowOf(ctx);
    const tasks = await taskTrends(sql, caller, window);
    ctx.body = { window, window_cap: WINDOW_CAP, tasks, count: tasks.length, total: tasks.length };
  });

  describeRoute({ method: 'get', path: '/v1/hosts/:host/runs', summary: 'The runs of a host', role: 'viewer', query: limitQuery });
  router.get('/v1/hosts/:host/runs', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const query = parseInput(limitQuery, queryObject(ctx.query));
    const limit = boundedCount(query.limit, 'limit', HOST_RUNS_DEFAULT, HOST_RUNS_CAP);
    const runs = await hostRuns(sql, caller, ctx.params.host, limit);
    ctx.body = { host: ctx.params.host, limit, runs, count: runs.length, total: runs.length };
  });

  return router;
}
