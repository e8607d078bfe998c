import Router from '@koa/router';
import type { Context } from 'koa';
import { runView } from '../../core/runs/run-view';
import type { ServerContext } from '../../services/context';
import { launchTemplate } from '../../services/runs/launch';
import { readerOf } from '../../services/access/access';
import { createTemplate, parseTemplateSurvey, readableTemplate, removeTemplate, replaceTemplate, templateView, type TemplateDraft } from '../../services/runs/templates';
import { listTemplatePage } from '../../store/templates';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { answerConfigList, configListQuery } from '../paging';
import { idempotencyKey } from '../schemas/run-fields';
import { workflowToGraph } from '../schemas/steps';
import { launchInput, templateInput } from '../schemas/templates';
import { parseInput } from '../validate';
import { describeRoute } from '../openapi/registry';

/**
 * Templates (spec part A 2.3, 2.4, 4.6; part B 8). Operators and admins create them, as they may
 * submit the same runs directly; the account that creates one manages it. Below admin, reading
 * one needs read on it, launching use (checked in launchTemplate, which every launch passes),
 * editing and deleting manage (services/access.ts); the list holds only what the caller may
 * read. Every read shows a secret
 * question's default as `[redacted]`. The `PUT` answer names the sealed defaults an edit cleared
 * in `secret_defaults_cleared` (services/templates.ts).
 */
export function templateRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/templates' });
  const { sql } = server;

  describeRoute({ method: 'post', path: '/v1/templates', summary: 'Create a template', body: templateInput, role: 'operator', ok: 201 });
  router.post('/', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const template = await createTemplate(server, caller, originOf(ctx), draftOf(ctx));
    ctx.status = 201;
    ctx.set('Location', `/v1/templates/${template.id}`);
    ctx.body = templateView(template);
  });

  describeRoute({ method: 'get', path: '/v1/templates', summary: 'List templates', role: 'viewer', query: configListQuery });
  router.get('/', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    await answerConfigList(ctx, 'templates', (page) => listTemplatePage(sql, page, readerOf(caller)), templateView);
  });

  describeRoute({ method: 'get', path: '/v1/templates/:id', summary: 'Read a template', role: 'viewer' });
  router.get('/:id', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    ctx.body = templateView(await readableTemplate(sql, caller, ctx.params.id));
  });

  describeRoute({ method: 'put', path: '/v1/templates/:id', summary: 'Replace a template', body: templateInput, role: 'operator' });
  router.put('/:id', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const { template, cleared } = await replaceTemplate(server, caller, originOf(ctx), ctx.params.id, draftOf(ctx));
    ctx.body = { ...templateView(template), ...(Object.keys(cleared).length ? { secret_defaults_cleared: cleared } : {}) };
  });

  describeRoute({ method: 'delete', path: '/v1/templates/:id', summary: 'Delete a template', role: 'operator', ok: 204 });
  router.delete('/:id', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    await removeTemplate(server, caller, originOf(ctx), ctx.params.id);
    ctx.status = 204;
  });

  describeRoute({ method: 'post', path: '/v1/templates/:id/launch', summary: 'Launch a run from a template', role: 'operator', body: launchInput });
  router.post('/:id/launch', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const input = parseInput(launchInput, ctx.request.body ?? {});
    const template = await readableTemplate(sql, caller, ctx.params.id);
    const { run, created } = await launchTemplate(server, caller, originOf(ctx), template, {
      answers: input.answers,
      timeout: input.timeout,
      idempotencyKey: idempotencyKey(ctx),
      credentials: input.credentials,
      change: input.change,
      dryRun: input.dry_run,
    });
    ctx.status = created ? 201 : 200;
    ctx.set('Location', `/v1/runs/${run.id}`);
    ctx.body = runView(run);
  });

  return router;
}

/**
 * A template body, parsed: its shape, its survey (whose secret defaults are withheld from the
 * request's fingerprint as it is read) and its steps as a checked graph.
 */
function draftOf(ctx: Context): TemplateDraft {
  const input = parseInput(templateInput, ctx.request.body);
  const survey = parseTemplateSurvey(input.survey, originOf(ctx));
  return { ...input, survey, steps: input.steps ? workflowToGraph(input.steps) : null };
}
