import Router from '@koa/router';
import { z } from 'zod';
import { badRequest, notFound } from '../../core/errors';
import { runView } from '../../core/run-view';
import type { ServerContext } from '../../services/context';
import { cancelRun, rerunRun, retryRun, submitRun } from '../../services/runs';
import { splitGraph } from '../../core/workflow-graph';
import { getRun, listChildRuns, listRuns } from '../../store/runs';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { listEnvelope, pageQuery } from '../paging';
import { fitsBytes } from '../schemas/common';
import { parseInput, queryObject, storableTime } from '../validate';
import { TERMINAL_STATUSES } from '../../core/run';

const MAX_TIMEOUT_SECONDS = 365 * 24 * 3600;
/** A split runs every shard at once on the pool; more than this is a queue, not a split. */
export const MAX_SHARDS = 100;

const runSubmission = z.strictObject({
  tool: z.string({ message: 'tool is required' }).min(1, 'tool is required'),
  command: z.string({ message: 'command is required and must be a string' }).min(1, 'command must not be empty'),
  extra_vars: z.record(z.string(), z.unknown(), { message: 'extra_vars must be an object' }).default({}),
  timeout: z.number({ message: 'timeout must be a number of seconds' }).int('timeout must be whole seconds').min(0, 'timeout must not be negative').max(MAX_TIMEOUT_SECONDS, `timeout must be at most ${MAX_TIMEOUT_SECONDS} seconds (a year)`).optional(),
  queue: z
    .string({ message: 'queue must be a string' })
    .refine(fitsBytes(255), 'queue must be at most 255 bytes')
    .default(''),
  dry_run: z.boolean({ message: 'dry_run must be true or false' }).default(false),
  shards: z
    .number({ message: 'shards must be a whole number' })
    .int('shards must be a whole number')
    .min(0, 'shards must not be negative')
    .max(MAX_SHARDS, `shards must be at most ${MAX_SHARDS}`)
    .optional(),
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
  task: z.string().optional(),
});

/** The Idempotency-Key header, at most 255 bytes. */
export function idempotencyKey(header: string | undefined): string | undefined {
  if (header === undefined || header === '') return undefined;
  if (!fitsBytes(255)(header)) throw badRequest('Idempotency-Key must be at most 255 bytes', { header: 'Idempotency-Key' });
  return header;
}

export function runRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/runs' });

  router.post('/', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const input = parseInput(runSubmission, ctx.request.body);
    const spec = { command: input.command, extra_vars: input.extra_vars, ...(input.dry_run ? { dry_run: true as const } : {}) };
    // Two or more shards split the run: one parent, one shard run per index (spec part A 2.1).
    const split = input.shards !== undefined && input.shards >= 2;
    const { run, created } = await submitRun(
      server,
      caller,
      originOf(ctx),
      {
        tool: input.tool,
        spec,
        queue: input.queue,
        timeout: input.timeout,
        ...(split ? { kind: 'split' as const, steps: splitGraph(input.tool, input.command, input.shards!) } : {}),
      },
      idempotencyKey(ctx.get('idempotency-key') || undefined),
    );
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
      const run = await again(server, caller, originOf(ctx), ctx.params.id, idempotencyKey(ctx.get('idempotency-key') || undefined));
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
