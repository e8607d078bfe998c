import Router from '@koa/router';
import type { ServerContext } from '../../services/context';
import { changeDetail, changeList } from '../../services/ansible/changes';
import { estate, estateChanges } from '../../services/ansible/estate';
import { requireRole } from '../middleware/auth';
import { changesQuery, estateDiffQuery, estateQuery } from '../schemas/estate';
import { parseInput, queryObject } from '../validate';
import { describeRoute } from '../openapi/registry';

/**
 * The estate and changes (spec part A 2.13, 4.4): `GET /v1/estate`, `GET /v1/estate/diff`,
 * `GET /v1/changes`, `GET /v1/changes/{change}`. Viewers may read them; each covers only runs the
 * caller may read, counting the rest in `withheld`.
 */
export function estateRoutes(server: ServerContext): Router {
  const router = new Router();

  describeRoute({ method: 'get', path: '/v1/estate', summary: 'List estate', role: 'viewer', query: estateQuery });
  router.get('/v1/estate', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const query = parseInput(estateQuery, queryObject(ctx.query));
    ctx.body = await estate(server, caller, query.at, { limit: query.limit, offset: query.offset });
  });

  describeRoute({ method: 'get', path: '/v1/estate/diff', summary: 'Estate difference between two times', role: 'viewer', query: estateDiffQuery });
  router.get('/v1/estate/diff', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const query = parseInput(estateDiffQuery, queryObject(ctx.query));
    ctx.body = await estateChanges(server, caller, query.from!, query.to, { limit: query.limit, offset: query.offset });
  });

  describeRoute({ method: 'get', path: '/v1/changes', summary: 'List changes', role: 'viewer', query: changesQuery });
  router.get('/v1/changes', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    parseInput(changesQuery, queryObject(ctx.query));
    ctx.body = await changeList(server.sql, caller);
  });

  describeRoute({ method: 'get', path: '/v1/changes/:change', summary: 'Read a change', role: 'viewer' });
  router.get('/v1/changes/:change', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    ctx.body = await changeDetail(server.sql, caller, ctx.params.change);
  });

  return router;
}
