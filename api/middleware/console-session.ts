import type { Context } from 'koa';

/**
 * The web console's session: the login's token in an HttpOnly cookie, honoured only on requests
 * that also carry the console's own header. A cross-site page can make a browser send the cookie,
 * but it cannot add a custom header without a CORS preflight, which Cairn never grants, so a
 * forged request arrives without the header and is refused (CSRF). Bearer tokens are unaffected.
 */
export const SESSION_COOKIE = 'cairn_session';
export const CONSOLE_HEADER = 'X-Cairn-Console';

/** Whether the request carries the console's header (`X-Cairn-Console: 1`). */
export function fromConsole(ctx: Context): boolean {
  return ctx.get(CONSOLE_HEADER) === '1';
}

/** The session token the request's cookie carries, if any. */
export function sessionCookieOf(ctx: Context): string | undefined {
  for (const part of (ctx.get('cookie') || '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === SESSION_COOKIE) return part.slice(eq + 1).trim() || undefined;
  }
  return undefined;
}

/**
 * Secure when the browser reached Cairn over https: directly, or through a TLS proxy, as the
 * login's own Origin says (a browser always sends Origin on a POST; it cannot be set by script).
 */
function servedOverHttps(ctx: Context): boolean {
  return ctx.secure || ctx.get('origin').startsWith('https://');
}

function cookieLine(value: string, maxAgeSeconds: number, secure: boolean): string {
  const attributes = [`${SESSION_COOKIE}=${value}`, 'Path=/', 'HttpOnly', 'SameSite=Strict', `Max-Age=${maxAgeSeconds}`];
  if (secure) attributes.push('Secure');
  return attributes.join('; ');
}

/**
 * Sets the session cookie to last exactly as long as the session token. `secure` is for a sign-in
 * that knows better than the request (an OpenID Connect callback, by its https redirect address).
 */
export function setSessionCookie(ctx: Context, secret: string, expiresAt: Date, secure = servedOverHttps(ctx)): void {
  const seconds = Math.max(0, Math.floor((expiresAt.getTime() - Date.now()) / 1000));
  ctx.append('Set-Cookie', cookieLine(secret, seconds, secure));
  ctx.set('Cache-Control', 'no-store');
}

/** Tells the browser to drop the session cookie. */
export function clearSessionCookie(ctx: Context): void {
  ctx.append('Set-Cookie', cookieLine('', 0, servedOverHttps(ctx)));
}
