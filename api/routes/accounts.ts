import Router from '@koa/router';
import { ApiError, conflict, forbidden, notFound } from '../../core/errors';
import { newId } from '../../core/ids';
import { hashPassword, verifyPassword } from '../../core/secrets';
import { mintToken, tokenView, userView, type Minter } from '../../services/accounts';
import type { ServerContext } from '../../services/context';
import {
  countAdminsLocked,
  createAccount,
  deleteAccount,
  getAccountById,
  getAccountByUsername,
  listAccounts,
  updateAccount,
} from '../../store/accounts';
import { isUniqueViolation } from '../../store/db';
import { actorKindOf, deleteToken, listTokens, type Caller } from '../../store/tokens';
import { recordMutation } from '../../services/audit';
import { originOf } from '../middleware/audit-origin';
import { callerOf, requireRole } from '../middleware/auth';
import { answerConfigList } from '../paging';
import { login, tokenCreate, userCreate, userUpdate } from '../schemas/accounts';
import { parseInput } from '../validate';

/** Login sessions last a working day; API tokens last until revoked unless minted with expires_in. */
const SESSION_SECONDS = 12 * 3600;

const minterOf = (caller: Caller): Minter => ({
  name: caller.account.username,
  type: actorKindOf(caller),
});

export function accountRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1' });
  const { sql } = server;

  router.post('/auth/login', async (ctx) => {
    const input = parseInput(login, ctx.request.body);
    const account = await getAccountByUsername(sql, input.username);
    const ok = await verifyPassword(input.password, account?.password_hash ?? null);
    if (!account || !ok) throw new ApiError(401, 'username or password is wrong');
    const { token, secret } = await recordMutation(sql, originOf(ctx), 200, (tx, entry) => {
      entry.actor = account.username;
      entry.body = { kind: 'session.created', account_id: account.id };
      return mintToken(tx, account, {
        name: 'login session',
        kind: 'session',
        minter: { name: account.username, type: 'user' },
        expiresAt: new Date(Date.now() + SESSION_SECONDS * 1000),
      });
    });
    ctx.body = { token: secret, token_id: token.id, expires_at: token.expires_at?.toISOString(), username: account.username, role: account.role };
  });

  router.post('/auth/check', async (ctx) => {
    const caller = callerOf(ctx);
    ctx.body = {
      valid: true,
      username: caller.account.username,
      role: caller.account.role,
      token: tokenView(caller.token),
    };
  });

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

  router.post('/auth/logout', async (ctx) => {
    const caller = callerOf(ctx);
    await recordMutation(sql, originOf(ctx), 204, (tx, entry) => {
      entry.body = { kind: 'session.ended', token_id: caller.token.id };
      return deleteToken(tx, caller.token.id);
    });
    ctx.status = 204;
  });

  router.post('/tokens', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const input = parseInput(tokenCreate, ctx.request.body);
    let account = caller.account;
    if (input.username && input.username !== caller.account.username) {
      if (caller.account.role !== 'admin') throw forbidden('only an admin mints tokens for another account');
      const other = await getAccountByUsername(sql, input.username);
      if (!other) throw notFound(`account ${input.username}`);
      account = other;
    }
    // An agent mints agent tokens: that is its default, and asking for more is refused.
    const kind = input.kind ?? actorKindOf(caller);
    if (caller.token.kind === 'agent' && kind !== 'agent') throw forbidden('an agent may mint only agent tokens');
    const { token, secret } = await recordMutation(sql, originOf(ctx), 201, async (tx, entry) => {
      const minted = await mintToken(tx, account, {
        name: input.name,
        kind,
        minter: minterOf(caller),
        expiresAt: input.expires_in ? new Date(Date.now() + input.expires_in * 1000) : null,
      });
      entry.body = { kind: 'token.created', token_id: minted.token.id, account_id: account.id, token_kind: kind };
      return minted;
    });
    ctx.status = 201;
    ctx.body = { ...tokenView({ ...token, username: account.username }), token: secret };
  });

  router.get('/tokens', async (ctx) => {
    requireRole(ctx, 'admin');
    await answerConfigList(ctx, 'tokens', (page) => listTokens(sql, page), tokenView);
  });

  router.delete('/tokens/:id', async (ctx) => {
    requireRole(ctx, 'admin');
    await recordMutation(sql, originOf(ctx), 204, async (tx, entry) => {
      if (!(await deleteToken(tx, ctx.params.id))) throw notFound(`token ${ctx.params.id}`);
      entry.body = { kind: 'token.revoked', token_id: ctx.params.id };
    });
    ctx.status = 204;
  });

  router.post('/users', async (ctx) => {
    requireRole(ctx, 'admin');
    const input = parseInput(userCreate, ctx.request.body);
    try {
      const passwordHash = input.password ? await hashPassword(input.password) : null;
      const account = await recordMutation(sql, originOf(ctx), 201, async (tx, entry) => {
        const created = await createAccount(tx, {
          id: newId('usr'),
          username: input.username,
          role: input.role,
          password_hash: passwordHash,
          profile: input.profile ?? {},
        });
        entry.body = { kind: 'user.created', account_id: created.id, role: created.role };
        return created;
      });
      ctx.status = 201;
      ctx.set('Location', `/v1/users/${account.id}`);
      ctx.body = userView(account);
    } catch (err) {
      if (isUniqueViolation(err)) throw conflict(`an account named ${input.username} already exists`, { field: 'username' });
      throw err;
    }
  });

  router.get('/users', async (ctx) => {
    requireRole(ctx, 'admin');
    await answerConfigList(ctx, 'users', (page) => listAccounts(sql, page), userView);
  });

  router.get('/users/:id', async (ctx) => {
    requireRole(ctx, 'admin');
    const account = await getAccountById(sql, ctx.params.id);
    if (!account) throw notFound(`user ${ctx.params.id}`);
    ctx.body = userView(account);
  });

  router.put('/users/:id', async (ctx) => {
    requireRole(ctx, 'admin');
    const input = parseInput(userUpdate, ctx.request.body);
    const passwordHash = input.password ? await hashPassword(input.password) : undefined;
    const updated = await recordMutation(sql, originOf(ctx), 200, async (tx, entry) => {
      const current = await getAccountById(tx, ctx.params.id);
      if (!current) throw notFound(`user ${ctx.params.id}`);
      if (current.role === 'admin' && input.role && input.role !== 'admin') {
        if ((await countAdminsLocked(tx)) <= 1) throw conflict('this is the last admin; make another admin first', { field: 'role' });
      }
      entry.body = { kind: 'user.updated', account_id: current.id, role: input.role ?? current.role, password_changed: passwordHash !== undefined };
      return updateAccount(tx, current.id, {
        role: input.role,
        password_hash: passwordHash,
        // The profile is replaced whole: an omitted field clears.
        profile: input.profile !== undefined ? input.profile : undefined,
      });
    });
    ctx.body = userView(updated!);
  });

  router.delete('/users/:id', async (ctx) => {
    requireRole(ctx, 'admin');
    await recordMutation(sql, originOf(ctx), 204, async (tx, entry) => {
      const current = await getAccountById(tx, ctx.params.id);
      if (!current) throw notFound(`user ${ctx.params.id}`);
      if (current.role === 'admin') {
        if ((await countAdminsLocked(tx)) <= 1) throw conflict('this is the last admin; make another admin first');
      }
      await deleteAccount(tx, current.id);
      entry.body = { kind: 'user.deleted', account_id: current.id };
    });
    ctx.status = 204;
  });

  return router;
}
