import Router from '@koa/router';
import { z } from 'zod';
import { runView } from '../../core/run-view';
import type { ServerContext } from '../../services/context';
import { submitRun } from '../../services/runs';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { fitsBytes } from '../schemas/common';
import { pipelineSteps, pipelineToGraph } from '../schemas/steps';
import { parseInput } from '../validate';

/** As for a single run: runs.timeout_seconds is an integer column. */
const MAX_TIMEOUT_SECONDS = 365 * 24 * 3600;

const pipelineBody = z.strictObject({
  steps: pipelineSteps,
  extra_vars: z.record(z.string(), z.unknown(), { message: 'extra_vars must be an object' }).default({}),
  timeout: z
    .number({ message: 'timeout must be a number of seconds' })
    .int('timeout must be whole seconds')
    .min(0, 'timeout must not be negative')
    .max(MAX_TIMEOUT_SECONDS, `timeout must be at most ${MAX_TIMEOUT_SECONDS} seconds (a year)`)
    .optional(),
  queue: z.string({ message: 'queue must be a string' }).refine(fitsBytes(255), 'queue must be at most 255 bytes').default(''),
});

/** `POST /v1/pipelines`: ordered steps as one parent run; a failed step stops the rest. */
export function pipelineRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/pipelines' });
  router.post('/', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const input = parseInput(pipelineBody, ctx.request.body);
    const { run } = await submitRun(server, caller, originOf(ctx), {
      kind: 'pipeline',
      tool: 'pipeline',
      spec: { command: '', extra_vars: input.extra_vars },
      queue: input.queue,
      timeout: input.timeout,
      steps: pipelineToGraph(input.steps),
    });
    ctx.status = 201;
    ctx.set('Location', `/v1/runs/${run.id}`);
    ctx.body = runView(run);
  });
  return router;
}
