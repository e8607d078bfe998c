import type { Context, Next } from 'koa';
import type { AuditOrigin } from '../../services/audit/audit';
import type { Caller } from '../../store/tokens';
import { WRITE_METHODS } from './body';

/**
 * Describes every mutating request for the audit chain: the caller, method, path (never the
 * query string, which can carry tickets) and the request whose fingerprint the chain entry will
 * carry. Routes pass it to `recordMutation` with the work they do, after naming the body fields
 * their schema knows are secret (`withholdFields` in services/audit.ts).
 */
export async function auditOrigin(ctx: Context, next: Next): Promise<void> {
  if (WRITE_METHODS.has(ctx.method)) {
    const caller = ctx.state.caller as Caller | undefined;
    const origin: AuditOrigin = {
      actor: caller?.account.username ?? 'anonymous',
      method: ctx.method,
      path: ctx.path,
      request: { method: ctx.method, path: ctx.path, query: { ...ctx.query }, body: ctx.request.body },
      withheld: new Set(),
    };
    ctx.state.origin = origin;
  }
  await next();
}

/** The audit origin of this mutating request. */
export function originOf(ctx: Context): AuditOrigin {
  const origin = ctx.state.origin as AuditOrigin | undefined;
  if (!origin) throw new Error(`${ctx.method} ${ctx.path} is not a mutating request; it has no audit origin`);
  return origin;
}

