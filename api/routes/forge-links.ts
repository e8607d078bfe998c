import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import type { ServerContext } from '../../services/context';
import { beginForgeLink, completeForgeLink, FORGE_CALLBACK_PATH, forgeLinkView, LINK_SECONDS, listLinks, removeForgeLink } from '../../services/access/forge-links';
import { originOf } from '../middleware/audit-origin';
import { callerOf } from '../middleware/auth';
import { parseInput, queryObject } from '../validate';
import { describeRoute } from '../openapi/registry';

/**
 * The cookie binding a forge link to the browser that started it: a random value, HttpOnly, sent
 * only to /auth/forge, SameSite=Lax so it comes back on the forge's top-level redirect.
 */
const BINDING_COOKIE = 'cairn_forge';

function bindingCookie(value: string, maxAgeSeconds: number, secure: boolean): string {
  return [`${BINDING_COOKIE}=${value}`, 'Path=/auth/forge', 'HttpOnly', 'SameSite=Lax', `Max-Age=${maxAgeSeconds}`, ...(secure ? ['Secure'] : [])].join('; ');
}

function bindingOf(ctx: Context): string | undefined {
  for (const part of (ctx.get('cookie') || '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === BINDING_COOKIE) return part.slice(eq + 1).trim() || undefined;
  }
  return undefined;
}

const startInput = z.object({ forge: z.string({ message: 'required: github, gitlab or gitea' }) }).strict();
const callbackQuery = z.object({
  code: z.string().max(4096).optional(),
  state: z.string().max(512).optional(),
  error: z.string().max(256).optional(),
  error_description: z.string().optional(),
  error_uri: z.string().optional(),
}).passthrough();

/** Forge links (spec part A 4.11; part B 5.1, 5.2 rule 12). */
export function forgeLinkRoutes(server: ServerContext): Router {
  const router = new Router();
  const secure = (ctx: Context) => ctx.secure || server.config.forge?.redirectUrl.startsWith('https://') === true;

  describeRoute({ method: 'get', path: '/v1/me/forge-links', summary: "The caller's forge links and the forges it may link", role: 'viewer' });
  router.get('/v1/me/forge-links', async (ctx) => {
    ctx.body = await listLinks(server, callerOf(ctx));
  });

  describeRoute({ method: 'post', path: '/v1/me/forge-links', summary: 'Start linking a forge account (persons only): the authorization URL, and a cookie', role: 'viewer', body: startInput, ok: 201, errors: [409] });
  router.post('/v1/me/forge-links', async (ctx) => {
    const input = parseInput(startInput, ctx.request.body ?? {});
    const start = await beginForgeLink(server, callerOf(ctx), input.forge);
    ctx.append('Set-Cookie', bindingCookie(start.binding, LINK_SECONDS, secure(ctx)));
    ctx.set('Cache-Control', 'no-store');
    ctx.status = 201;
    ctx.body = { forge: input.forge, authorize_url: start.authorize_url, expires_at: start.expires_at };
  });

  describeRoute({ method: 'delete', path: '/v1/me/forge-links/:id', summary: "Unlink one of the caller's forge accounts", role: 'viewer', ok: 204 });
  router.delete('/v1/me/forge-links/:id', async (ctx) => {
    await removeForgeLink(server, callerOf(ctx), originOf(ctx), ctx.params.id);
    ctx.status = 204;
  });

  describeRoute({ method: 'get', path: FORGE_CALLBACK_PATH, summary: "The forge's OAuth callback: checked by state and the browser's cookie", query: callbackQuery, errors: [409, 502] });
  router.get(FORGE_CALLBACK_PATH, async (ctx) => {
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.set('Cache-Control', 'no-store');
    ctx.append('Set-Cookie', bindingCookie('', 0, secure(ctx)));
    const query = parseInput(callbackQuery, queryObject(ctx.query));
    const link = await completeForgeLink(server, bindingOf(ctx), query);
    ctx.status = 201;
    ctx.body = forgeLinkView(link);
  });

  return router;
}
