import type { Context, Next } from 'koa';
import { DomainError, statusOf } from '../../core/errors';
import { loggablePath } from '../hook-path';

/**
 * First in the chain: every failure leaves as `{"error": "...", ...details}`. Errors meant for the
 * client keep their status and words; anything else is a 500 whose detail stays in the server log,
 * written by the logger's `err` serializer (core/log-safety.ts), which keeps no value the request
 * sent. The path is logged without its query string, which can carry tickets, and without a hook's token.
 */
export async function errorHandler(ctx: Context, next: Next): Promise<void> {
  try {
    await next();
    if (ctx.status === 404 && ctx.body === undefined) {
      ctx.status = 404;
      ctx.body = { error: `no route for ${ctx.method} ${ctx.path}` };
    } else if (ctx.status === 405 && ctx.body === undefined) {
      ctx.body = { error: `${ctx.method} is not allowed on ${ctx.path}` };
    } else if (ctx.status === 501 && ctx.body === undefined) {
      // The router answers an HTTP method it does not know with a bare 501.
      ctx.body = { error: `the ${ctx.method} method is not supported` };
    }
  } catch (err) {
    if (err instanceof DomainError) {
      ctx.status = statusOf(err.code);
      ctx.set(err.headers);
      ctx.body = { error: err.message, ...err.details };
      return;
    }
    const status = (err as { status?: number; expose?: boolean }).status;
    if (status && status >= 400 && status < 500 && (err as { expose?: boolean }).expose) {
      ctx.status = status;
      ctx.body = { error: (err as Error).message };
      return;
    }
    ctx.state.logger?.error({ err, method: ctx.method, path: loggablePath(ctx.path) }, 'request failed');
    ctx.status = 500;
    ctx.body = { error: 'internal server error; the server log has the details', request_id: ctx.state.requestId };
  }
}
