import Router from '@koa/router';
import type { Context } from 'koa';
import type { ServerContext } from '../../services/context';
import { beginOidcSignIn, completeOidcSignIn, OIDC_CALLBACK_PATH, oidcSettingsOf, SIGN_IN_SECONDS } from '../../services/access/oidc-sign-in';
import { answerSignIn, signInStatus } from '../sign-in-answer';
import { oidcCallbackQuery } from '../schemas/oidc';
import { signInLoginQuery } from '../schemas/sign-in';
import { parseInput, queryObject } from '../validate';
import { describeRoute } from '../openapi/registry';

/**
 * The cookie binding a sign-in to the browser that started it: a random value, HttpOnly, sent only
 * to /auth/oidc, and SameSite=Lax so that it comes back on the provider's top-level redirect to
 * the callback (Strict would leave it behind on that cross-site navigation).
 */
const BINDING_COOKIE = 'cairn_oidc';

function bindingCookie(value: string, maxAgeSeconds: number, secure: boolean): string {
  return [`${BINDING_COOKIE}=${value}`, 'Path=/auth/oidc', 'HttpOnly', 'SameSite=Lax', `Max-Age=${maxAgeSeconds}`, ...(secure ? ['Secure'] : [])].join('; ');
}

function bindingOf(ctx: Context): string | undefined {
  for (const part of (ctx.get('cookie') || '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === BINDING_COOKIE) return part.slice(eq + 1).trim() || undefined;
  }
  return undefined;
}

/** OpenID Connect sign-in (spec part A 1.1, 4.11): public routes under /auth/oidc. */
export function oidcRoutes(server: ServerContext): Router {
  const router = new Router();
  /** The browser comes back over https when the redirect address is https (a TLS proxy in front of Cairn included). */
  const secure = (ctx: Context) => ctx.secure || server.config.oidc?.redirectUrl.startsWith('https://') === true;

  // Whether this server offers the sign-in, for the console's sign-in page.
  describeRoute({ method: 'get', path: '/auth/oidc', summary: 'Whether OpenID Connect sign-in is enabled (public)' });
  router.get('/auth/oidc', (ctx) => {
    ctx.body = server.config.oidc ? { enabled: true, login_url: '/auth/oidc/login' } : { enabled: false };
  });

  describeRoute({ method: 'get', path: '/auth/oidc/login', summary: 'Start sign-in (redirect to the identity provider; public)', query: signInLoginQuery });
  router.get('/auth/oidc/login', async (ctx) => {
    oidcSettingsOf(server.config);
    const { mode } = parseInput(signInLoginQuery, queryObject(ctx.query));
    // The socket's address (app.proxy is off): behind a proxy, the proxy's address is what counts.
    const { location, binding } = await beginOidcSignIn(server, mode ?? 'console', ctx.request.ip);
    ctx.append('Set-Cookie', bindingCookie(binding, SIGN_IN_SECONDS, secure(ctx)));
    ctx.set('Cache-Control', 'no-store');
    ctx.redirect(location);
  });

  describeRoute({ method: 'get', path: OIDC_CALLBACK_PATH, summary: 'OpenID Connect sign-in callback (checked by state and the browser cookie)', ok: 302, okDescription: 'Signed in; redirected to the console.', errors: [404], query: oidcCallbackQuery });
  router.get(OIDC_CALLBACK_PATH, async (ctx) => {
    const settings = oidcSettingsOf(server.config);
    // The query holds a single-use code: no page this leads to may pass it on as a referrer.
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.set('Cache-Control', 'no-store');
    // Used or not, the binding is spent: cleared whatever the outcome.
    ctx.append('Set-Cookie', bindingCookie('', 0, secure(ctx)));
    const query = parseInput(oidcCallbackQuery, queryObject(ctx.query));
    const signIn = await completeOidcSignIn(server, bindingOf(ctx), query, signInStatus);
    answerSignIn(ctx, signIn, settings.redirectUrl.slice(0, -OIDC_CALLBACK_PATH.length), secure(ctx));
  });

  return router;
}
