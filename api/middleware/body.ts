import type { Context, Next } from 'koa';
import getRawBody from 'raw-body';
import { ApiError, badRequest } from '../../core/errors';
import { decodeJsonBytes, MAX_JSON_DEPTH, scanJsonText } from '../../core/json-scan';

declare module 'koa' {
  interface Request {
    /** The parsed JSON body of a write, set by jsonBody. */
    body?: unknown;
  }
}

export const WRITE_BODY_LIMIT = 1024 * 1024;

/** The methods that change something: they carry a body and are recorded in the audit chain. */
export const WRITE_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Reads a JSON body for writes: at most 1 MiB (413 names the limit) and valid JSON. Before it is
 * parsed, one scan of the text refuses with a 400 naming the field: nesting deeper than
 * MAX_JSON_DEPTH, a string or key holding NUL, a lone surrogate or bytes that are not UTF-8, a key
 * given twice in one object, a `__proto__` key, and a number too large for a double. The parsed
 * value is `ctx.request.body`; an empty body is `{}`.
 */
export async function jsonBody(ctx: Context, next: Next): Promise<void> {
  if (!WRITE_METHODS.has(ctx.method)) return next();
  let bytes: Buffer;
  try {
    bytes = await getRawBody(ctx.req, { limit: WRITE_BODY_LIMIT, length: ctx.request.length });
  } catch (err) {
    if ((err as { type?: string }).type === 'entity.too.large') {
      throw new ApiError(413, 'request body is larger than the 1 MiB limit for writes', { limit_bytes: WRITE_BODY_LIMIT });
    }
    throw badRequest(`request body could not be read: ${(err as Error).message}`);
  }
  const text = decodeJsonBytes(bytes);
  let body: unknown = {};
  if (text.trim() !== '') {
    const fault = scanJsonText(text, MAX_JSON_DEPTH);
    if (fault) throw badRequest(fault.message, { field: fault.field });
    try {
      body = JSON.parse(text);
    } catch (err) {
      // The parser's message quotes the text around the fault, which may be a password: keep only the position.
      const at = /at position (\d+)/.exec((err as Error).message);
      throw badRequest(`request body is not valid JSON${at ? ` (at position ${at[1]})` : ''}`);
    }
  }
  ctx.request.body = body;
  await next();
}
