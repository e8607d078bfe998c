import Router from '@koa/router';
import type { Context } from 'koa';
import { badRequest, conflict, forbidden, notFound } from '../../core/errors';
import { newId } from '../../core/ids';
import { featureRefusal, tierAllows, type Tier } from '../../core/license';
import { runView } from '../../core/run-view';
import { recordMutation } from '../../services/audit';
import type { ServerContext } from '../../services/context';
import { launchTemplate } from '../../services/launch';
import {
  changesWhatRuns,
  parseTemplateSurvey,
  requireTemplateTools,
  storedSurvey,
  templateView,
  type SecretDefaultChange,
  type SecretDefaultClearReason,
  type TemplateEditor,
} from '../../services/templates';
import { isUniqueViolation } from '../../store/db';
import {
  deleteTemplate,
  getTemplate,
  getTemplateForUpdate,
  insertTemplate,
  listTemplatePage,
  updateTemplate,
  type Template,
  type TemplateFields,
} from '../../store/templates';
import type { Caller } from '../../store/tokens';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { answerConfigList } from '../paging';
import { launchInput, templateInput, type TemplateInput } from '../schemas/templates';
import { workflowToGraph } from '../schemas/steps';
import { parseInput } from '../validate';
import { idempotencyKey } from './runs';

/**
 * Templates (spec part A 2.3, 2.4, 4.6; part B 8). Operators and admins write and launch them,
 * as they may submit the same runs directly; every role reads them. Every read shows a secret
 * question's default as `[redacted]`. An edit that changes what a template runs clears the sealed
 * defaults the editor did not set, unless an admin edits (services/templates.ts `storedSurvey`);
 * the `PUT` answer names them in `secret_defaults_cleared`.
 */
export function templateRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/templates' });
  const { sql } = server;

  router.post('/', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const checked = await checkBody(ctx, server.licensing.tier);
    const id = newId('tpl');
    const template = await recordMutation(sql, originOf(ctx), 201, async (tx, entry) => {
      const fields = runFieldsOf(checked);
      const { survey, changes } = storedSurvey(server.sealer, id, checked.surveyFields, editorOf(caller));
      const created = await uniqueName(checked.name, () => insertTemplate(tx, id, { ...fields, survey }, caller.account.username));
      entry.body = { kind: 'template.created', template_id: created.id, template: audited(created), ...secretDefaultsNote(changes, {}) };
      return created;
    });
    ctx.status = 201;
    ctx.set('Location', `/v1/templates/${template.id}`);
    ctx.body = templateView(template);
  });

  router.get('/', async (ctx) => {
    requireRole(ctx, 'viewer');
    await answerConfigList(ctx, 'templates', (page) => listTemplatePage(sql, page), templateView);
  });

  router.get('/:id', async (ctx) => {
    requireRole(ctx, 'viewer');
    const template = await getTemplate(sql, ctx.params.id);
    if (!template) throw notFound(`template ${ctx.params.id}`);
    ctx.body = templateView(template);
  });

  router.put('/:id', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const checked = await checkBody(ctx, server.licensing.tier);
    if (checked.id !== undefined && checked.id !== null && checked.id !== ctx.params.id) {
      throw badRequest(`id: the body names template ${String(checked.id)} but the path names ${ctx.params.id}; the id cannot change`, { field: 'id' });
    }
    const { template, cleared } = await recordMutation(sql, originOf(ctx), 200, async (tx, entry) => {
      const current = await getTemplateForUpdate(tx, ctx.params.id);
      if (!current) throw notFound(`template ${ctx.params.id}`);
      const fields = runFieldsOf(checked);
      const { survey, changes, cleared } = storedSurvey(server.sealer, current.id, checked.surveyFields, editorOf(caller), {
        survey: current.survey,
        createdBy: current.created_by,
        runChanged: changesWhatRuns(current, fields),
      });
      const updated = await uniqueName(checked.name, () => updateTemplate(tx, current.id, { ...fields, survey }));
      if (!updated) throw notFound(`template ${ctx.params.id}`);
      entry.body = {
        kind: 'template.updated',
        template_id: updated.id,
        template: audited(updated),
        previous: audited(current),
        ...secretDefaultsNote(changes, cleared),
      };
      return { template: updated, cleared };
    });
    // The answer says which stored secret defaults this edit cleared, and why.
    ctx.body = { ...templateView(template), ...(Object.keys(cleared).length ? { secret_defaults_cleared: cleared } : {}) };
  });

  router.delete('/:id', async (ctx) => {
    requireRole(ctx, 'operator');
    await recordMutation(sql, originOf(ctx), 204, async (tx, entry) => {
      const current = await getTemplateForUpdate(tx, ctx.params.id);
      if (!current || !(await deleteTemplate(tx, current.id))) throw notFound(`template ${ctx.params.id}`);
      entry.body = { kind: 'template.deleted', template_id: current.id, template: audited(current) };
    });
    ctx.status = 204;
  });

  router.post('/:id/launch', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const input = parseInput(launchInput, ctx.request.body ?? {});
    const template = await getTemplate(sql, ctx.params.id);
    if (!template) throw notFound(`template ${ctx.params.id}`);
    const { run, created } = await launchTemplate(server, caller, originOf(ctx), template, {
      answers: input.answers,
      timeout: input.timeout,
      idempotencyKey: idempotencyKey(ctx.get('idempotency-key') || undefined),
    });
    ctx.status = created ? 201 : 200;
    ctx.set('Location', `/v1/runs/${run.id}`);
    ctx.body = runView(run);
  });

  return router;
}

interface CheckedBody extends TemplateInput {
  surveyFields: ReturnType<typeof parseTemplateSurvey>;
  graph: ReturnType<typeof workflowToGraph> | null;
}

/**
 * Everything about a body that needs no transaction: its shape, survey, graph, tools and tier.
 * The survey's secret defaults are withheld from the request's fingerprint as it is parsed.
 */
async function checkBody(ctx: Context, tier: Tier): Promise<CheckedBody> {
  const input = parseInput(templateInput, ctx.request.body);
  const surveyFields = parseTemplateSurvey(input.survey, originOf(ctx));
  const graph = input.steps ? workflowToGraph(input.steps) : null;
  await requireTemplateTools(graph ? null : (input.tool ?? null), graph);
  // A named queue needs Team, as at submission; refused when saved, not only at each launch.
  const queue = input.queue ?? '';
  if (queue !== '' && !tierAllows(tier, 'named_queue')) {
    throw forbidden(featureRefusal('named_queue', tier), { feature: 'named_queue', field: 'queue', tier });
  }
  return { ...input, surveyFields, graph };
}

/** The stored fields but the survey, whose secret defaults `storedSurvey` seals. */
function runFieldsOf(checked: CheckedBody): Omit<TemplateFields, 'survey'> {
  const workflow = checked.graph !== null;
  return {
    name: checked.name,
    kind: workflow ? 'workflow' : 'job',
    tool: workflow ? null : (checked.tool ?? null),
    command: workflow ? null : (checked.command ?? null),
    extra_vars: checked.extra_vars ?? {},
    inventory_id: null,
    queue: checked.queue ?? '',
    timeout_seconds: checked.timeout ?? 0,
    shards: workflow ? null : (checked.shards ?? null),
    steps: checked.graph,
    notifications: [],
  };
}

const editorOf = (caller: Caller): TemplateEditor => ({
  accountId: caller.account.id,
  username: caller.account.username,
  admin: caller.account.role === 'admin',
});

/** A template name is unique: a second one is a 409 naming it. */
async function uniqueName<T>(name: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`a template named ${JSON.stringify(name)} exists already; template names are unique`, { field: 'name' });
    throw err;
  }
}

/** What a template's chain entries record of it: its read view (secret defaults redacted) without times. */
function audited(template: Template): Record<string, unknown> {
  const { created_at: _c, updated_at: _u, id: _id, ...rest } = templateView(template);
  return rest;
}

/** What happened to each secret default, by var, and why each cleared one was: names, actions and reasons, never values. */
function secretDefaultsNote(changes: Record<string, SecretDefaultChange>, cleared: Record<string, SecretDefaultClearReason>): Record<string, unknown> {
  return {
    ...(Object.keys(changes).length ? { secret_defaults: changes } : {}),
    ...(Object.keys(cleared).length ? { secret_defaults_cleared: cleared } : {}),
  };
}
