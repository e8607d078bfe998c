import Router from '@koa/router';
import { z } from 'zod';
import { notFound } from '../../core/errors';
import { runView } from '../../core/run-view';
import type { ServerContext } from '../../services/context';
import { jobRequest } from '../../services/launch';
import { cancelRun, rerunRun, retryRun, submitRun } from '../../services/runs';
import { getRun, listChildRuns, listRuns } from '../../store/runs';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { listEnvelope, pageQuery } from '../paging';
import { command, extraVars, idempotencyKey, queue, shards, timeout, tool } from '../schemas/run-fields';
import { parseInput, queryObject, storableTime } from '../validate';
import { TERMINAL_STATUSES } from '../../core/run';

const runSubmission = z.strictObject({
  tool,
  command,
  extra_vars: extraVars.default({}),
  timeout: timeout.optional(),
  queue: queue.default(''),
  dry_run: z.boolean({ message: 'dry_run must be true or false' }).default(false),
  shards: shards.optional(),
});

const RUN_STATUSES = ['held', 'pending', 'running', ...TERMINAL_STATUSES] as const;

const runListQuery = z.strictObject({
  ...pageQuery(200, 1000),
  status: z.enum(RUN_STATUSES, { message: `status must be one of ${RUN_STATUSES.join(', ')}` }).optional(),
  tool: z.string().optional(),
  order: z.enum(['asc', 'desc'], { message: 'order must be asc or desc' }).default('desc'),
  after: storableTime('after').optional(),
  before: storableTime('before').optional(),
  q: z.string().max(200, 'q must be at most 200 characters').optional(),
  // Listed so that sending it is refused with its own message, not as an unknown field.
  task: z.never({ message: 'per-task summaries are not served yet, so runs cannot be listed by task' }).optional(),
});

export function runRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/runs' });

  router.post('/', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const input = parseInput(runSubmission, ctx.request.body);
    const request = jobRequest({
      tool: input.tool,
      command: input.command,
      extraVars: input.extra_vars,
      dryRun: input.dry_run,
      queue: input.queue,
      timeout: input.timeout,
      shards: input.shards,
    });
    const { run, created } = await submitRun(server, caller, originOf(ctx), request, idempotencyKey(ctx));
    ctx.status = created ? 201 : 200;
    ctx.set('Location', `/v1/runs/${run.id}`);
    ctx.body = runView(run);
  });

  router.get('/', async (ctx) => {
    requireRole(ctx, 'viewer');
    const query = parseInput(runListQuery, queryObject(ctx.query));
    const { rows, total } = await listRuns(server.sql, query);
    // Rows are previews: a run's whole command and extra vars are in GET /v1/runs/{id}.
    ctx.body = listEnvelope('runs', rows.map((run) => runView(run, 'preview')), total, query.offset);
  });

  router.get('/:id', async (ctx) => {
    requireRole(ctx, 'viewer');
    const run = await getRun(server.sql, ctx.params.id);
    if (!run) throw notFound(`run ${ctx.params.id}`);
    ctx.body = runView(run);
  });

  router.post('/:id/cancel', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const run = await cancelRun(server, caller, originOf(ctx), ctx.params.id);
    ctx.status = run.finished_at ? 200 : 202;
    ctx.body = runView(run);
  });

  for (const [path, again] of [
    ['rerun', rerunRun],
    ['retry', retryRun],
  ] as const) {
    router.post(`/:id/${path}`, async (ctx) => {
      const caller = requireRole(ctx, 'operator');
      const run = await again(server, caller, originOf(ctx), ctx.params.id, idempotencyKey(ctx));
      ctx.status = 201;
      ctx.set('Location', `/v1/runs/${run.id}`);
      ctx.body = runView(run);
    });
  }

  // A pipeline's or workflow's steps, or a split's shards, in definition order.
  for (const [path, kinds] of [
    ['steps', ['pipeline', 'workflow']],
    ['shards', ['split']],
  ] as const) {
    router.get(`/:id/${path}`, async (ctx) => {
      requireRole(ctx, 'viewer');
      const run = await getRun(server.sql, ctx.params.id);
      if (!run) throw notFound(`run ${ctx.params.id}`);
      if (!(kinds as readonly string[]).includes(run.kind)) {
        throw notFound(`${path} of run ${run.id}: it is a ${run.kind}, not a ${kinds.join(' or ')}`);
      }
      const children = await listChildRuns(server.sql, run.id);
      ctx.body = listEnvelope(path, children.map((child) => runView(child, 'preview')), children.length, 0);
    });
  }

  return router;
}
