import Router from '@koa/router';
import type { Context } from 'koa';
import type { ServerContext } from '../../services/context';
import { SAML_ACS_PATH } from '../../core/access/saml-settings';
import { beginSamlSignIn, completeSamlSignIn, samlMetadata, samlSettingsOf } from '../../services/access/saml-sign-in';
import { answerSignIn, signInStatus } from '../sign-in-answer';
import { samlAcsForm, signInLoginQuery } from '../schemas/sign-in';
import { parseInput, queryObject } from '../validate';
import { describeRoute } from '../openapi/registry';

/** SAML 2.0 sign-in (spec part A 1.1, 4.11): public routes under /auth/saml. */
export function samlRoutes(server: ServerContext): Router {
  const router = new Router();
  /** The browser comes back over https when the ACS address is https (a TLS proxy in front of Cairn included). */
  const secure = (ctx: Context) => ctx.secure || server.config.saml?.acsUrl.startsWith('https://') === true;

  // Whether this server offers the sign-in, for the console's sign-in page.
  describeRoute({ method: 'get', path: '/auth/saml', summary: 'Whether SAML sign-in is enabled (public)' });
  router.get('/auth/saml', (ctx) => {
    ctx.body = server.config.saml ? { enabled: true, login_url: '/auth/saml/login' } : { enabled: false };
  });

  describeRoute({ method: 'get', path: '/auth/saml/metadata', summary: 'SAML service provider metadata (public)' });
  router.get('/auth/saml/metadata', (ctx) => {
    ctx.type = 'application/samlmetadata+xml';
    ctx.body = samlMetadata(server);
  });

  describeRoute({ method: 'get', path: '/auth/saml/login', summary: 'Start sign-in (redirect to the identity provider; public)', query: signInLoginQuery });
  router.get('/auth/saml/login', async (ctx) => {
    samlSettingsOf(server.config);
    const { mode } = parseInput(signInLoginQuery, queryObject(ctx.query));
    // The socket's address (app.proxy is off): behind a proxy, the proxy's address is what counts.
    const location = await beginSamlSignIn(server, mode ?? 'console', ctx.request.ip);
    ctx.set('Cache-Control', 'no-store');
    ctx.redirect(location);
  });

  describeRoute({ method: 'post', path: SAML_ACS_PATH, summary: 'SAML assertion consumer (the signed assertion is the credential)', body: samlAcsForm, bodyType: 'application/x-www-form-urlencoded', ok: 302, okDescription: 'Signed in; redirected to the console with a session cookie.' });
  router.post(SAML_ACS_PATH, async (ctx) => {
    const settings = samlSettingsOf(server.config);
    ctx.set('Cache-Control', 'no-store');
    // The identity provider's form: its bytes are kept raw by the body middleware, not read as JSON.
    const form = Object.fromEntries(new URLSearchParams((ctx.request.rawBody ?? Buffer.alloc(0)).toString('utf8')));
    const { SAMLResponse } = parseInput(samlAcsForm, form);
    const signIn = await completeSamlSignIn(server, SAMLResponse, signInStatus);
    answerSignIn(ctx, signIn, settings.acsUrl.slice(0, -SAML_ACS_PATH.length), secure(ctx));
  });

  return router;
}
