import type { Context } from 'koa';
import type { IdentitySignIn, SignInMode } from '../services/access/identity-sign-in';
import { setSessionCookie } from './middleware/console-session';

/** The status a finished sign-in answers with in its mode, also the status its chain entries record. */
export const signInStatus = (mode: SignInMode) => (mode === 'console' ? 303 : 200);

/**
 * Answers a finished OpenID Connect or SAML sign-in: in token mode the session token as JSON; in
 * console mode the console's own session cookie, exactly as a password login with "cookie": true
 * sets it, and a redirect to the console at `origin` (this server as the provider knows it).
 */
export function answerSignIn(ctx: Context, signIn: IdentitySignIn & { mode: SignInMode }, origin: string, secure: boolean): void {
  const { token, secret, account } = signIn;
  const session = { token_id: token.id, expires_at: token.expires_at?.toISOString(), username: account.username, role: account.role };
  ctx.set('Cache-Control', 'no-store');
  if (signIn.mode === 'token') {
    ctx.body = { token: secret, ...session };
    return;
  }
  setSessionCookie(ctx, secret, token.expires_at!, secure);
  ctx.status = 303;
  ctx.redirect(`${origin}/ui/`);
}
