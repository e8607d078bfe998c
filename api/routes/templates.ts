import Router from '@koa/router';
import type { Context } from 'koa';
import { badRequest, conflict, forbidden, notFound } from '../../core/errors';
import { newId } from '../../core/ids';
import { featureRefusal, tierAllows, type Tier } from '../../core/license';
import { runView } from '../../core/run-view';
import type { Sealer } from '../../core/seal';
import { recordMutation } from '../../services/audit';
import type { ServerContext } from '../../services/context';
import { launchTemplate } from '../../services/launch';
import { parseTemplateSurvey, requireTemplateTools, storedSurvey, templateView, type SecretDefaultChange } from '../../services/templates';
import { isUniqueViolation } from '../../store/db';
import {
  deleteTemplate,
  getTemplate,
  getTemplateForUpdate,
  insertTemplate,
  listTemplatePage,
  updateTemplate,
  type StoredSurveyField,
  type Template,
  type TemplateFields,
} from '../../store/templates';
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
 * question's default as `[redacted]`.
 */
export function templateRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/templates' });
  const { sql } = server;

  router.post('/', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const checked = await checkBody(ctx, server.licensing.tier);
    const id = newId('tpl');
    const template = await recordMutation(sql, originOf(ctx), 201, async (tx, entry) => {
      const { fields, changes } = fieldsOf(checked, server.sealer, id, undefined);
      const created = await uniqueName(checked.name, () => insertTemplate(tx, id, fields, caller.account.username));
      entry.body = { kind: 'template.created', template_id: created.id, template: audited(created), ...secretDefaultsNote(changes) };
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
    requireRole(ctx, 'operator');
    const checked = await checkBody(ctx, server.licensing.tier);
    if (checked.id !== undefined && checked.id !== null && checked.id !== ctx.params.id) {
      throw badRequest(`id: the body names template ${String(checked.id)} but the path names ${ctx.params.id}; the id cannot change`, { field: 'id' });
    }
    const template = await recordMutation(sql, originOf(ctx), 200, async (tx, entry) => {
      const current = await getTemplateForUpdate(tx, ctx.params.id);
      if (!current) throw notFound(`template ${ctx.params.id}`);
      const { fields, changes } = fieldsOf(checked, server.sealer, current.id, current.survey);
      const updated = await uniqueName(checked.name, () => updateTemplate(tx, current.id, fields));
      if (!updated) throw notFound(`template ${ctx.params.id}`);
      entry.body = {
        kind: 'template.updated',
        template_id: updated.id,
        template: audited(updated),
        previous: audited(current),
        ...secretDefaultsNote(changes),
      };
      return updated;
    });
    ctx.body = templateView(template);
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

/** Everything about a body that needs no transaction: its shape, survey, graph, tools and tier. */
async function checkBody(ctx: Context, tier: Tier): Promise<CheckedBody> {
  const input = parseInput(templateInput, ctx.request.body);
  const surveyFields = parseTemplateSurvey(input.survey);
  const graph = input.steps ? workflowToGraph(input.steps) : null;
  await requireTemplateTools(graph ? null : (input.tool ?? null), graph);
  // A named queue needs Team, as at submission; refused when saved, not only at each launch.
  const queue = input.queue ?? '';
  if (queue !== '' && !tierAllows(tier, 'named_queue')) {
    throw forbidden(featureRefusal('named_queue', tier), { feature: 'named_queue', field: 'queue', tier });
  }
  return { ...input, surveyFields, graph };
}

/** The stored fields: secret defaults sealed (or kept, replaced, cleared) for the template `id`. */
function fieldsOf(
  checked: CheckedBody,
  sealer: Sealer | undefined,
  id: string,
  previous: StoredSurveyField[] | undefined,
): { fields: TemplateFields; changes: Record<string, SecretDefaultChange> } {
  const { survey, changes } = storedSurvey(sealer, id, checked.surveyFields, previous);
  const workflow = checked.graph !== null;
  return {
    fields: {
      name: checked.name,
      kind: workflow ? 'workflow' : 'job',
      tool: workflow ? null : (checked.tool ?? null),
      command: workflow ? null : (checked.command ?? null),
      extra_vars: checked.extra_vars ?? {},
      inventory_id: null,
      queue: checked.queue ?? '',
      timeout_seconds: checked.timeout ?? 0,
      shards: workflow ? null : (checked.shards ?? null),
      survey,
      steps: checked.graph,
      notifications: [],
    },
    changes,
  };
}

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

/** What happened to each secret default, by var: names and actions, never values. */
function secretDefaultsNote(changes: Record<string, SecretDefaultChange>): Record<string, unknown> {
  return Object.keys(changes).length ? { secret_defaults: changes } : {};
}
