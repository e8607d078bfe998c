import Router from '@koa/router';
import { decodeJsonBytes } from '../../core/json-scan';
import { badRequest } from '../../core/errors';
import { deliveryJsonText } from '../../core/schedules/webhooks';
import type { ServerContext } from '../../services/context';
import { deliverHook } from '../../services/schedules/triggers';
import { parseJsonText } from '../middleware/body';
import { describeRoute } from '../openapi/registry';

/**
 * `POST /hooks/{token}` (spec part A 1.1, 4.7; part B 5.1, 7.3, 8): a git forge's delivery. Public:
 * the path token and the delivery's signature are its credential, checked by services/triggers.ts
 * over the raw bytes the body middleware kept, before anything in them is read.
 */
export function hookRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/hooks' });

  describeRoute({
    method: 'post',
    path: '/hooks/:token',
    summary: 'Webhook delivery: the path token and the signature are the credential',
    description:
      'A push that would launch is recorded, with its owed launch, before it is answered: 202 `{"accepted": true, "trigger_id", "delivery_id"}` with a Location to `GET /v1/triggers/{id}/deliveries/{delivery_id}`, or, within the server\'s `--hook-answer-wait`, the launch\'s outcome (201 run, 200 redelivery or skipped, 409, 502). One run per delivery id.',
    bodyType: 'application/json',
    ok: 202,
    errors: [401, 403, 404, 409, 413, 429, 502],
  });
  router.post('/:token', async (ctx) => {
    // Counted from the request's first byte: the answer is due within five seconds of it.
    const receivedAt = (ctx.state.receivedAt as number | undefined) ?? Date.now();
    const rawBody = ctx.request.rawBody ?? Buffer.alloc(0);
    const contentType = ctx.get('content-type') || undefined;
    const answer = await deliverHook(server, {
      token: ctx.params.token,
      rawBody,
      headers: ctx.headers,
      contentType,
      query: { ...ctx.query },
      receivedAt,
      parseBody: () => {
        const text = deliveryJsonText(decodeJsonBytes(rawBody), contentType);
        if (text === undefined) throw badRequest('a form-encoded delivery must carry its JSON in the payload field', { field: 'payload' });
        return parseJsonText(text);
      },
    });
    ctx.status = answer.status;
    if (answer.location) ctx.set('Location', answer.location);
    ctx.body = answer.body;
  });

  return router;
}
