import type { Context, Next } from 'koa';
import getRawBody from 'raw-body';
import { DomainError, badRequest } from '../../core/errors';
import { decodeJsonBytes, MAX_JSON_DEPTH, scanJsonText } from '../../core/json-scan';
import { HOOK_PATH } from '../hook-path';
import { INVENTORY_BODY_LIMIT } from '../../core/ansible/inventory';
import { isCallbackPath } from '../../core/ansible/callbacks';
import { SAML_ACS_PATH } from '../../core/access/saml-settings';

declare module 'koa' {
  interface Request {
    /** The parsed JSON body of a write, set by jsonBody. */
    body?: unknown;
    /** The body's bytes as received, set by jsonBody on a hook delivery (whose signature covers them), a provisioning callback and an import. */
    rawBody?: Buffer;
  }
}

export const WRITE_BODY_LIMIT = 1024 * 1024;

/** The methods that change something: they carry a body and are recorded in the audit chain. */
export const WRITE_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Reads a JSON body for writes: at most 1 MiB (413 names the limit) and valid JSON (see
 * {@link parseJsonText}). The parsed value is `ctx.request.body`; an empty body is `{}`.
 *
 * A hook delivery (`POST /hooks/{token}`) is read within the same bound but not parsed: its bytes
 * are `ctx.request.rawBody`, since its signature covers the bytes exactly as sent and must be
 * checked before anything in them is read. The hook parses them itself, with the same checks. So
 * do a provisioning callback (a form or JSON) and an import (after checking its format).
 */
export async function jsonBody(ctx: Context, next: Next): Promise<void> {
  if (!WRITE_METHODS.has(ctx.method)) return next();
  const bytes = await readBody(ctx);
  // A provisioning callback's body may be a form as well as JSON: its route reads the bytes either
  // way. SAML's assertion consumer takes a form only. An import's route names an unknown or unread
  // format before it reads the body as JSON.
  if (HOOK_PATH.test(ctx.path) || isCallbackPath(ctx.path) || ctx.path === SAML_ACS_PATH || isImportWrite(ctx)) {
    ctx.request.rawBody = bytes;
    return next();
  }
  ctx.request.body = parseJsonText(decodeJsonBytes(bytes));
  await next();
}

/** `POST /v1/inventories` and `PUT /v1/inventories/{id}` take bodies up to 26 MiB (spec part B 8), imports 25 MiB; every other write 1 MiB. */
const INVENTORY_WRITE = /^\/v1\/inventories(\/[^/]+)?\/?$/;
/** `POST /v1/import/{format}` takes bodies up to 25 MiB (spec part A 4.14, part B 8). */
const IMPORT_WRITE = /^\/v1\/import\/[^/]+\/?$/;
export const IMPORT_BODY_LIMIT = 25 * 1024 * 1024;

/** A relay worker's facts report (one host's facts may be 1 MiB): up to 8 MiB a call. */
const RELAY_FACTS_WRITE = /^\/relay\/v1\/runs\/[^/]+\/host-facts$/;
export const RELAY_FACTS_BODY_LIMIT = 8 * 1024 * 1024;
/** A relay worker's plan report: a plan file (base64) and its JSON, each within its own bound (core/iac/plan.ts): up to 72 MiB a call. */
const RELAY_PLAN_WRITE = /^\/relay\/v1\/runs\/[^/]+\/(propose-apply|drift-plan)$/;
export const RELAY_PLAN_BODY_LIMIT = 72 * 1024 * 1024;

const isImportWrite = (ctx: Context) => IMPORT_WRITE.test(ctx.path) && ctx.method === 'POST';

function bodyLimitOf(ctx: Context): { bytes: number; name: string } {
  if (INVENTORY_WRITE.test(ctx.path) && (ctx.method === 'POST' || ctx.method === 'PUT') && !ctx.path.endsWith('/preview')) {
    return { bytes: INVENTORY_BODY_LIMIT, name: '26 MiB limit for inventories' };
  }
  if (isImportWrite(ctx)) return { bytes: IMPORT_BODY_LIMIT, name: '25 MiB limit for imports' };
  if (RELAY_FACTS_WRITE.test(ctx.path) && ctx.method === 'POST') return { bytes: RELAY_FACTS_BODY_LIMIT, name: '8 MiB limit for relay facts reports' };
  if (RELAY_PLAN_WRITE.test(ctx.path) && ctx.method === 'POST') return { bytes: RELAY_PLAN_BODY_LIMIT, name: '72 MiB limit for relay plan reports' };
  return { bytes: WRITE_BODY_LIMIT, name: '1 MiB limit for writes' };
}

async function readBody(ctx: Context): Promise<Buffer> {
  try {
    return await getRawBody(ctx.req, { limit: bodyLimitOf(ctx).bytes, length: ctx.request.length });
  } catch (err) {
    if ((err as { type?: string }).type === 'entity.too.large') {
      const { bytes, name } = bodyLimitOf(ctx);
      throw new DomainError('too_large', `request body is larger than the ${name}`, { limit_bytes: bytes });
    }
    throw badRequest(`request body could not be read: ${(err as Error).message}`);
  }
}

/**
 * Parses a body's JSON text; blank text is `{}`. Before it is parsed, one scan refuses with a 400
 * naming the field: nesting deeper than MAX_JSON_DEPTH, a string or key holding NUL, a lone
 * surrogate or bytes that are not UTF-8, a key given twice in one object, a `__proto__` key, and
 * a number too large for a double.
 */
export function parseJsonText(text: string): unknown {
  if (text.trim() === '') return {};
  const fault = scanJsonText(text, MAX_JSON_DEPTH);
  if (fault) throw badRequest(fault.message, { field: fault.field });
  try {
    return JSON.parse(text);
  } catch (err) {
    // The parser's message quotes the text around the fault, which may be a password: keep only the position.
    const at = /at position (\d+)/.exec((err as Error).message);
    throw badRequest(`request body is not valid JSON${at ? ` (at position ${at[1]})` : ''}`);
  }
}
