import Router from '@koa/router';
import type { Context } from 'koa';
import { badRequest, notFound } from '../../core/errors';
import {
  createUser,
  deleteUser,
  issueToken,
  logIn,
  logOut,
  revokeToken,
  tokenView,
  updateUser,
  userView,
  type AccountRequest,
} from '../../services/access/accounts';
import { withholdFields } from '../../services/audit/audit';
import type { ServerContext } from '../../services/context';
import { getAccountById, listAccounts } from '../../store/accounts';
import { actorKindOf, listTokens, type Caller } from '../../store/tokens';
import { originOf } from '../middleware/audit-origin';
import { callerOf, requireRole } from '../middleware/auth';
import { CONSOLE_HEADER, clearSessionCookie, fromConsole, sessionCookieOf, setSessionCookie } from '../middleware/console-session';
import { answerConfigList, configListQuery } from '../paging';
import { login, tokenCreate, userCreate, userUpdate } from '../schemas/accounts';
import { parseInput } from '../validate';
import { noFields } from '../schemas/common';
import { describeRoute } from '../openapi/registry';

/** The caller's change, recorded in the chain as this request answered with `status`. */
const requestOf = (ctx: Context, caller: Caller, status: number): AccountRequest => ({ by: caller, origin: originOf(ctx), outcome: status });

export function accountRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1' });
  const { sql } = server;

  describeRoute({ method: 'post', path: '/v1/auth/login', summary: 'Sign in with a user name and password; answers a session token', body: login, errors: [401, 429], bodyExample: { username: 'admin', password: 'correct horse battery staple' } });
  router.post('/auth/login', async (ctx) => {
    const input = parseInput(login, ctx.request.body);
    withholdFields(originOf(ctx), ['password']);
    // A cookie session is the console's alone: asking for one without its header is refused, so a
    // cross-site form cannot sign a browser in to another account (login CSRF).
    if (input.cookie && !fromConsole(ctx)) throw badRequest(`cookie: a cookie session needs the ${CONSOLE_HEADER}: 1 header`, { field: 'cookie' });
    // The socket's address (app.proxy is off): behind a proxy, the proxy's address is what counts.
    const { token, secret, account } = await logIn(sql, originOf(ctx), input, ctx.request.ip);
    const session = { token_id: token.id, expires_at: token.expires_at?.toISOString(), username: account.username, role: account.role };
    if (input.cookie) {
      // The secret goes only into the HttpOnly cookie: the page's script never holds it.
      setSessionCookie(ctx, secret, token.expires_at!);
      ctx.body = { ...session, session: 'cookie' };
    } else {
      ctx.body = { token: secret, ...session };
    }
  });

  describeRoute({ method: 'post', path: '/v1/auth/check', summary: 'Check whether the caller\'s role and grants allow an action', body: noFields });
  router.post('/auth/check', async (ctx) => {
    const caller = callerOf(ctx);
    parseInput(noFields, ctx.request.body);
    ctx.body = {
      valid: true,
      username: caller.account.username,
      role: caller.account.role,
      token: tokenView(caller.token),
    };
  });

  describeRoute({ method: 'get', path: '/v1/auth/me', summary: 'Who the caller is (user, role, token)' });
  router.get('/auth/me', async (ctx) => {
    const caller = callerOf(ctx);
    ctx.body = {
      id: caller.account.id,
      username: caller.account.username,
      role: caller.account.role,
      kind: actorKindOf(caller),
      token: tokenView(caller.token),
    };
  });

  describeRoute({ method: 'post', path: '/v1/auth/logout', summary: 'Sign out: revoke the calling session token', body: noFields, ok: 204 });
  router.post('/auth/logout', async (ctx) => {
    const caller = callerOf(ctx);
    parseInput(noFields, ctx.request.body);
    await logOut(sql, caller, originOf(ctx));
    if (sessionCookieOf(ctx) !== undefined) clearSessionCookie(ctx);
    ctx.status = 204;
  });

  describeRoute({ method: 'post', path: '/v1/tokens', summary: 'Create a token', role: 'viewer', body: tokenCreate, ok: 201 });
  router.post('/tokens', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const input = parseInput(tokenCreate, ctx.request.body);
    const { token, secret, account } = await issueToken(sql, requestOf(ctx, caller, 201), input);
    ctx.status = 201;
    ctx.body = { ...tokenView({ ...token, username: account.username }), token: secret };
  });

  describeRoute({ method: 'get', path: '/v1/tokens', summary: 'List tokens', role: 'admin', query: configListQuery });
  router.get('/tokens', async (ctx) => {
    requireRole(ctx, 'admin');
    await answerConfigList(ctx, 'tokens', (page) => listTokens(sql, page), tokenView);
  });

  describeRoute({ method: 'delete', path: '/v1/tokens/:id', summary: 'Revoke a token', role: 'admin', ok: 204 });
  router.delete('/tokens/:id', async (ctx) => {
    const caller = requireRole(ctx, 'admin');
    await revokeToken(sql, requestOf(ctx, caller, 204), ctx.params.id);
    ctx.status = 204;
  });

  describeRoute({ method: 'post', path: '/v1/users', summary: 'Create a user', role: 'admin', body: userCreate, ok: 201 });
  router.post('/users', async (ctx) => {
    const caller = requireRole(ctx, 'admin');
    const input = parseInput(userCreate, ctx.request.body);
    withholdFields(originOf(ctx), ['password']);
    const account = await createUser(sql, requestOf(ctx, caller, 201), input);
    ctx.status = 201;
    ctx.set('Location', `/v1/users/${account.id}`);
    ctx.body = userView(account);
  });

  describeRoute({ method: 'get', path: '/v1/users', summary: 'List users', role: 'admin', query: configListQuery });
  router.get('/users', async (ctx) => {
    requireRole(ctx, 'admin');
    await answerConfigList(ctx, 'users', (page) => listAccounts(sql, page), userView);
  });

  describeRoute({ method: 'get', path: '/v1/users/:id', summary: 'Read a user', role: 'admin' });
  router.get('/users/:id', async (ctx) => {
    requireRole(ctx, 'admin');
    const account = await getAccountById(sql, ctx.params.id);
    if (!account) throw notFound(`user ${ctx.params.id}`);
    ctx.body = userView(account);
  });

  describeRoute({ method: 'put', path: '/v1/users/:id', summary: 'Replace a user', role: 'admin', body: userUpdate });
  router.put('/users/:id', async (ctx) => {
    const caller = requireRole(ctx, 'admin');
    const input = parseInput(userUpdate, ctx.request.body);
    withholdFields(originOf(ctx), ['password']);
    ctx.body = userView(await updateUser(sql, requestOf(ctx, caller, 200), ctx.params.id, input));
  });

  describeRoute({ method: 'delete', path: '/v1/users/:id', summary: 'Delete a user', role: 'admin', ok: 204 });
  router.delete('/users/:id', async (ctx) => {
    const caller = requireRole(ctx, 'admin');
    await deleteUser(sql, requestOf(ctx, caller, 204), ctx.params.id);
    ctx.status = 204;
  });

  return router;
}
