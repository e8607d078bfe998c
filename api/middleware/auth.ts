import type { Context, Next } from 'koa';
import { forbidden, unauthorized } from '../../core/errors';
import { hashBearerSecret } from '../../core/credentials/secrets';
import type { Role } from '../../store/accounts';
import { openCaller, resolveToken, touchToken, type Caller } from '../../store/tokens';
import type { ServerContext } from '../../services/context';
import { HOOK_PATH } from '../hook-path';
import { CALLBACK_PATH, EXTERNAL_CALLBACK_PATH } from '../../core/ansible/callbacks';
import { CONSOLE_HEADER, fromConsole, sessionCookieOf } from './console-session';

/** Routes a caller reaches without a bearer token; the stream route checks its own ticket, a hook its token and signature. */
const PUBLIC = [
  /^\/healthz$/,
  /^\/readyz$/,
  /^\/$/,
  /^\/ui(\/.*)?$/,
  /^\/v1\/auth\/login$/,
  // OpenID Connect sign-in: its start is public, its callback checked by state and the browser's cookie (spec part B 5.1).
  /^\/auth\/oidc(\/login|\/callback)?$/,
  // SAML sign-in: its start and metadata are public, its assertion consumer checked by the assertion's signature and InResponseTo (spec part B 5.1).
  /^\/auth\/saml(\/login|\/acs|\/metadata)?$/,
  // Forge links: the callback is checked by its state and the browser's cookie (spec part B 5.1).
  /^\/auth\/forge\/callback$/,
  /^\/v1\/runs\/[^/]+\/stream$/,
  // The seal and the federation discovery documents (spec part B 5.1).
  /^\/\.well-known\/(seal\.json|openid-configuration|jwks\.json)$/,
  // Webhook deliveries: the path token and the delivery's signature are the credential (spec part B 5.1).
  HOOK_PATH,
  // Provisioning callbacks: the host config key in the body is the credential (spec part A 1.1 rule 2).
  CALLBACK_PATH,
  EXTERNAL_CALLBACK_PATH,
  // The worker relay: its routes check the worker token and the per-claim capability themselves (api/routes/relay.ts).
  /^\/relay(\/.*)?$/,
];

/** Whether a path is served without a bearer token (its own credential, if any, is checked by its route). */
export const isPublicPath = (path: string): boolean => PUBLIC.some((re) => re.test(path));

/** last_used_at is kept to the minute, so most requests stay a single read. */
const TOUCH_INTERVAL_MS = 60_000;

const RANK: Record<Role, number> = { viewer: 0, operator: 1, admin: 2 };

/**
 * Resolves the caller of every non-public request: a bearer token, or else the console's session
 * cookie, which counts only beside the console's header and only for a password login's session
 * token (so no API or agent token ever acts through a cookie). No credential or a dead one is a 401.
 */
export function authenticate(server: ServerContext) {
  return async (ctx: Context, next: Next) => {
    if (isPublicPath(ctx.path)) return next();
    const header = ctx.get('authorization');
    const cookie = header ? undefined : sessionCookieOf(ctx);
    let caller: Caller | undefined;
    if (cookie !== undefined) {
      if (!fromConsole(ctx)) {
        throw unauthorized(`a console session cookie counts only with the ${CONSOLE_HEADER}: 1 header; other clients send Authorization: Bearer <token>`);
      }
      caller = await resolveToken(server.sql, hashBearerSecret(cookie));
      if (!caller || caller.token.kind !== 'session') throw unauthorized('the console session is not valid (signed out, revoked or expired); sign in again');
    } else if (!header && server.config.open && (caller = await openCaller(server.sql))) {
      // An install running open (--open, and no token at all): the request acts as its first admin
      // (spec part B 5.1). The first token minted, by anyone, ends it.
    } else {
      const match = /^Bearer\s+(\S+)$/i.exec(header);
      if (!match) throw unauthorized('this route needs an Authorization: Bearer <token> header');
      caller = await resolveToken(server.sql, hashBearerSecret(match[1]));
      if (!caller) throw unauthorized('the bearer token is not valid (unknown, revoked or expired)');
    }
    ctx.state.caller = caller;
    if (!caller.token.last_used_at || Date.now() - caller.token.last_used_at.getTime() > TOUCH_INTERVAL_MS) {
      touchToken(server.sql, caller.token.id).catch(() => undefined);
    }
    await next();
  };
}

export function callerOf(ctx: Context): Caller {
  const caller = ctx.state.caller as Caller | undefined;
  if (!caller) throw unauthorized();
  return caller;
}

/** The caller, who must hold at least this role: a viewer reads, an operator runs, an admin administers. */
export function requireRole(ctx: Context, role: Role): Caller {
  const caller = callerOf(ctx);
  if (RANK[caller.account.role] < RANK[role]) {
    throw forbidden(`this needs the ${role} role; ${caller.account.username} is ${caller.account.role}`, { required_role: role });
  }
  return caller;
}
