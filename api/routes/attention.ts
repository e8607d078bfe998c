import Router from '@koa/router';
import { readerOf } from '../../services/access/access';
import { listAttention } from '../../services/attention/attention';
import type { ServerContext } from '../../services/context';
import { requireRole } from '../middleware/auth';
import { listEnvelope } from '../paging';
import { attentionQuery } from '../schemas/attention';
import { parseInput, queryObject } from '../validate';
import { describeRoute } from '../openapi/registry';

/**
 * `GET /v1/attention` (spec part A 2.12, 3.3, 4.2): unfinished work under its main blocker, with
 * `counts` per blocker and the install-wide `thresholds`. Viewer; below admin, only the runs the
 * caller may read (the runs list's rule, store/access.ts runReadableBy).
 */
export function attentionRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/attention' });
  describeRoute({ method: 'get', path: '/v1/attention', summary: 'What needs attention', role: 'viewer', query: attentionQuery });
  router.get('/', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const query = parseInput(attentionQuery, queryObject(ctx.query));
    const answer = await listAttention(server, { ...query, readerId: readerOf(caller) });
    ctx.body = { ...listEnvelope('items', answer.items, answer.total, query.offset), counts: answer.counts, thresholds: answer.thresholds };
  });
  return router;
}
