import Router from '@koa/router';
import { z } from 'zod';
import { runView } from '../../core/runs/run-view';
import type { ServerContext } from '../../services/context';
import { submitRun, type RunRequest } from '../../services/runs/runs';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { credentialIds } from '../schemas/credentials';
import { extraVars, idempotencyKey, queue, timeout } from '../schemas/run-fields';
import { pipelineSteps, pipelineToGraph } from '../schemas/steps';
import { parseInput } from '../validate';
import { describeRoute } from '../openapi/registry';

const pipelineBody = z.strictObject({
  steps: pipelineSteps,
  extra_vars: extraVars.default({}),
  timeout: timeout.optional(),
  queue: queue.default(''),
  // Credentials every step is given (spec part A 2.9); the caller needs use on each.
  credentials: credentialIds('credentials').optional(),
});

/**
 * `POST /v1/pipelines`: ordered steps as one parent run; a failed step stops the rest. An
 * Idempotency-Key works as on `POST /v1/runs`: a repeat answers 200 with the pipeline it made.
 * `credentials` are checked as on `POST /v1/runs` and given to every step.
 */
export function pipelineRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/pipelines' });
  describeRoute({ method: 'post', path: '/v1/pipelines', summary: 'Submit a pipeline of steps', role: 'operator', body: pipelineBody });
  router.post('/', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const input = parseInput(pipelineBody, ctx.request.body);
    const request: RunRequest = {
      kind: 'pipeline',
      tool: 'pipeline',
      spec: { command: '', extra_vars: input.extra_vars },
      queue: input.queue,
      timeout: input.timeout,
      steps: pipelineToGraph(input.steps),
    };
    if (input.credentials?.length) request.credentials = input.credentials;
    const { run, created } = await submitRun(server, caller, originOf(ctx), request, idempotencyKey(ctx));
    ctx.status = created ? 201 : 200;
    ctx.set('Location', `/v1/runs/${run.id}`);
    ctx.body = runView(run);
  });
  return router;
}
