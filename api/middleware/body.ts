import type { Context, Next } from 'koa';
import getRawBody from 'raw-body';
import { ApiError, badRequest } from '../../core/errors';
import { findNulString, formatFieldPath } from '../../core/field-path';

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
 * Reads a JSON body for writes: at most 1 MiB (413 names the limit), valid JSON, and no string
 * holding NUL (400 names the field). The parsed value is `ctx.request.body`; an empty body is `{}`.
 */
export async function jsonBody(ctx: Context, next: Next): Promise<void> {
  if (!WRITE_METHODS.has(ctx.method)) return next();
  let raw: string;
  try {
    raw = await getRawBody(ctx.req, { limit: WRITE_BODY_LIMIT, length: ctx.request.length, encoding: 'utf8' });
  } catch (err) {
    if ((err as { type?: string }).type === 'entity.too.large') {
      throw new ApiError(413, 'request body is larger than the 1 MiB limit for writes', { limit_bytes: WRITE_BODY_LIMIT });
    }
    throw badRequest(`request body could not be read: ${(err as Error).message}`);
  }
  let body: unknown = {};
  if (raw.trim() !== '') {
    try {
      body = JSON.parse(raw);
    } catch (err) {
      // The parser's message quotes the text around the fault, which may be a password: keep only the position.
      const at = /at position (\d+)/.exec((err as Error).message);
      throw badRequest(`request body is not valid JSON${at ? ` (at position ${at[1]})` : ''}`);
    }
  }
  const nul = findNulString(body);
  if (nul) {
    const field = formatFieldPath(nul) || '(body)';
    throw badRequest(`${field} holds a NUL character`, { field });
  }
  ctx.request.body = body;
  await next();
}
