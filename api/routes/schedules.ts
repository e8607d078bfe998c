import Router from '@koa/router';
import type { Context } from 'koa';
import { readerOf } from '../../services/access/access';
import type { ServerContext } from '../../services/context';
import { jobRequest } from '../../services/runs/launch';
import { createSchedule, previewSchedule, readableSchedule, removeSchedule, replaceSchedule, scheduleView, type ScheduleDraft } from '../../services/schedules/schedules';
import { listSchedulePage, type ScheduleSubmission } from '../../store/schedules';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { answerConfigList, configListQuery } from '../paging';
import { previewQuery, scheduleInput, type ScheduleInput } from '../schemas/schedules';
import { ansibleInputOf } from '../schemas/run-fields';
import { pipelineToGraph } from '../schemas/steps';
import { parseInput, queryObject } from '../validate';
import { describeRoute } from '../openapi/registry';

/**
 * Schedules (spec part A 2.6, 4.3; part B 8). Operators and admins write them, as they may submit
 * the same runs directly; every role reads them and previews rules.
 */
export function scheduleRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/schedules' });
  const { sql } = server;

  describeRoute({ method: 'post', path: '/v1/schedules', summary: 'Create a schedule', body: scheduleInput, role: 'operator', ok: 201 });
  router.post('/', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const schedule = await createSchedule(server, caller, originOf(ctx), draftOf(ctx));
    ctx.status = 201;
    ctx.set('Location', `/v1/schedules/${schedule.id}`);
    ctx.body = scheduleView(schedule);
  });

  describeRoute({ method: 'get', path: '/v1/schedules', summary: 'List schedules', role: 'viewer', query: configListQuery });
  router.get('/', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    await answerConfigList(ctx, 'schedules', (page) => listSchedulePage(sql, page, readerOf(caller)), scheduleView);
  });

  // Before `/:id`, which would take `preview` for an id.
  describeRoute({ method: 'get', path: '/v1/schedules/preview', summary: 'Preview a schedule\'s next times', role: 'viewer', query: previewQuery });
  router.get('/preview', async (ctx) => {
    requireRole(ctx, 'viewer');
    ctx.body = previewSchedule(parseInput(previewQuery, queryObject(ctx.query)));
  });

  describeRoute({ method: 'get', path: '/v1/schedules/:id', summary: 'Read a schedule', role: 'viewer' });
  router.get('/:id', async (ctx) => {
    ctx.body = scheduleView(await readableSchedule(server, requireRole(ctx, 'viewer'), ctx.params.id));
  });

  describeRoute({ method: 'put', path: '/v1/schedules/:id', summary: 'Replace a schedule', body: scheduleInput, role: 'operator' });
  router.put('/:id', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    ctx.body = scheduleView(await replaceSchedule(server, caller, originOf(ctx), ctx.params.id, draftOf(ctx)));
  });

  describeRoute({ method: 'delete', path: '/v1/schedules/:id', summary: 'Delete a schedule', role: 'operator', body: scheduleInput, ok: 204 });
  router.delete('/:id', async (ctx) => {
    await removeSchedule(server, requireRole(ctx, 'operator'), originOf(ctx), ctx.params.id);
    ctx.status = 204;
  });

  return router;
}

/** A schedule body, parsed: its rule as sent, and what it fires as the request each fire submits. */
function draftOf(ctx: Context): ScheduleDraft {
  const input = parseInput(scheduleInput, ctx.request.body);
  return {
    name: input.name ?? null,
    cron: input.cron ?? null,
    rrule: input.rrule ?? null,
    timezone: input.timezone ?? null,
    spring_forward: input.spring_forward ?? null,
    enabled: input.enabled ?? true,
    template_id: input.template_id ?? null,
    submission: submissionOf(input),
  };
}

function submissionOf(input: ScheduleInput): ScheduleSubmission | null {
  if (input.run) {
    const run = input.run;
    const request = jobRequest({
      tool: run.tool,
      command: run.command ?? '',
      ansible: ansibleInputOf(run),
      extraVars: run.extra_vars,
      dryRun: run.dry_run,
      queue: run.queue,
      timeout: run.timeout,
      shards: run.shards,
    });
    if (run.credentials?.length) request.credentials = run.credentials;
    return { kind: 'run', body: run, request: request as unknown as Record<string, unknown> };
  }
  if (input.pipeline) {
    const { steps, extra_vars, queue, timeout, credentials } = input.pipeline;
    const request = {
      kind: 'pipeline',
      tool: 'pipeline',
      spec: { command: '', extra_vars },
      queue,
      timeout,
      steps: pipelineToGraph(steps),
      ...(credentials?.length ? { credentials } : {}),
    };
    return { kind: 'pipeline', body: input.pipeline, request };
  }
  return null;
}
