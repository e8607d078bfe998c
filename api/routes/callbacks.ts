import Router from '@koa/router';
import type { Context } from 'koa';
import { callerAddress, formFields } from '../../core/ansible/callbacks';
import { badRequest } from '../../core/errors';
import { decodeJsonBytes } from '../../core/json-scan';
import { answerCallback, mintCallbackKey, revokeCallbackKey, type CallbackRequest } from '../../services/ansible/callbacks';
import type { ServerContext } from '../../services/context';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { parseJsonText } from '../middleware/body';
import { noFields } from '../schemas/common';
import { parseInput } from '../validate';
import { describeRoute } from '../openapi/registry';

/**
 * Provisioning callbacks (spec part A 1.1, 4.6; part B 7.5).
 *
 * - `POST /v1/templates/{id}/callback-key` mints or rotates the host config key (manage on the
 *   template; shown once), `DELETE` revokes it.
 * - `POST /v1/templates/{id}/callback` and `POST /api/v2/job_templates/{external_id}/callback/`
 *   (trailing slash optional; the only path served under /api/) carry no token: the key in the
 *   body, JSON or form-encoded, is the credential (api/middleware/auth.ts lists them as public, and
 *   the body middleware keeps their bytes for this route to read either way).
 */
export function callbackRoutes(server: ServerContext): Router {
  const router = new Router();

  describeRoute({ method: 'post', path: '/v1/templates/:id/callback-key', summary: 'Mint a template\'s host config key', role: 'operator', body: noFields });
  router.post('/v1/templates/:id/callback-key', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    parseInput(noFields, ctx.request.body);
    ctx.body = await mintCallbackKey(server, caller, originOf(ctx), ctx.params.id);
  });

  describeRoute({ method: 'delete', path: '/v1/templates/:id/callback-key', summary: 'Revoke a template\'s host config key', role: 'operator', ok: 204 });
  router.delete('/v1/templates/:id/callback-key', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    await revokeCallbackKey(server, caller, originOf(ctx), ctx.params.id);
    ctx.status = 204;
  });

  describeRoute({ method: 'post', path: '/v1/templates/:id/callback', summary: 'Provisioning callback: a host asks for a run of this template; the host config key is the credential', errors: [403, 429], ok: 201 });
  router.post('/v1/templates/:id/callback', async (ctx) => {
    await answer(ctx, { templateId: ctx.params.id });
  });

  describeRoute({ method: 'post', path: '/api/v2/job_templates/:external/callback', summary: 'AWX-compatible provisioning callback (the host config key is the credential)', errors: [403, 429] });
  router.post('/api/v2/job_templates/:external/callback', async (ctx) => {
    await answer(ctx, { externalId: ctx.params.external });
  });
  describeRoute({ method: 'post', path: '/api/v2/job_templates/:external/callback/', summary: 'AWX-compatible provisioning callback, with the trailing slash AWX clients send', errors: [403, 429], ok: 201 });
  router.post('/api/v2/job_templates/:external/callback/', async (ctx) => {
    await answer(ctx, { externalId: ctx.params.external });
  });

  async function answer(ctx: Context, target: CallbackRequest['target']): Promise<void> {
    const outcome = await answerCallback(server, {
      target,
      address: callerAddress(ctx.req.socket.remoteAddress),
      path: ctx.path,
      readFields: () => callbackFields(ctx),
    });
    ctx.status = 201;
    ctx.set('Location', `/v1/runs/${outcome.runId}`);
    ctx.body = { run_id: outcome.runId, status: outcome.status, host: outcome.host, template_id: outcome.templateId };
  }

  return router;
}

/** The callback's body as fields: a form (`application/x-www-form-urlencoded`) or a JSON object. */
function callbackFields(ctx: Context): Record<string, unknown> {
  const raw = ctx.request.rawBody ?? Buffer.alloc(0);
  const text = decodeJsonBytes(raw);
  if (ctx.is('application/x-www-form-urlencoded')) return formFields(text);
  const parsed = parseJsonText(text);
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw badRequest('the body must be a JSON object or a form carrying host_config_key', { field: 'host_config_key' });
  }
  return parsed as Record<string, unknown>;
}
