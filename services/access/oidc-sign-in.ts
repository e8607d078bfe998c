import { randomBytes, timingSafeEqual } from 'node:crypto';
import { DomainError, badRequest } from '../../core/errors';
import { sha256 } from '../../core/sha256';
import { claimAt } from '../../core/access/sign-in-mapping';
import type { Config } from '../../core/config';
import type { OidcSettings } from '../../core/access/oidc-settings';
import { insertPendingSignIn, takePendingSignIn } from '../../store/oidc';
import type { AuditOrigin } from '../audit/audit';
import type { ServerContext } from '../context';
import { signInIdentity, type IdentitySignIn, type SignInMode } from './identity-sign-in';
import { oauthErrorCode, relyingPartyFor } from './oidc-relying-party';
import { admitOidcStart } from './throttle';

/**
 * OpenID Connect sign-in (spec part A 4.11; docs/api.md, OpenID Connect sign-in): the login route
 * starts an authorization code flow with PKCE (S256), `state` and `nonce`; the callback finishes it
 * and signs the person in (services/access/identity-sign-in.ts) by their (issuer, subject) pair.
 *
 * The flow is bound to the browser that started it by a random value in a short-lived HttpOnly
 * cookie; the server keeps the state, nonce and PKCE verifier in PostgreSQL under the value's hash
 * (so any server sharing the database can finish it), and the first callback takes them away.
 */

/** How long a started sign-in may take to come back. */
export const SIGN_IN_SECONDS = 600;

export type { SignInMode } from './identity-sign-in';

export const OIDC_CALLBACK_PATH = '/auth/oidc/callback';

/** The sign-in settings; a 404 naming the flag while sign-in is not configured. */
export function oidcSettingsOf(config: Pick<Config, 'oidc'>): OidcSettings {
  if (!config.oidc) throw new DomainError('not_found', 'OpenID Connect sign-in is not configured on this server: --oidc-issuer (CAIRN_OIDC_ISSUER) is not set');
  return config.oidc;
}

const random = () => randomBytes(32).toString('base64url');

/** Starts a sign-in: where to send the browser, and the value its cookie must carry back. */
export async function beginOidcSignIn(
  server: Pick<ServerContext, 'config' | 'sql'>,
  mode: SignInMode,
  address: string,
): Promise<{ location: string; binding: string; expiresAt: Date }> {
  const settings = oidcSettingsOf(server.config);
  await admitOidcStart(server.sql, address);
  const binding = random();
  const state = random();
  const nonce = random();
  const codeVerifier = random();
  const location = await relyingPartyFor(settings).authorizationUrl({ state, nonce, codeChallenge: sha256(codeVerifier).toString('base64url') });
  const expiresAt = new Date(Date.now() + SIGN_IN_SECONDS * 1000);
  await insertPendingSignIn(server.sql, sha256(binding), { state, nonce, code_verifier: codeVerifier, mode, expires_at: expiresAt });
  return { location, binding, expiresAt };
}

/** What the provider sent the browser back with (OAuth 2.0 authorization response, RFC 9207 `iss`). */
export interface CallbackQuery {
  code?: string;
  state?: string;
  iss?: string;
  error?: string;
}

export interface OidcSignIn extends IdentitySignIn {
  mode: SignInMode;
}

const sameText = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

const refused = (reason: string) => new DomainError('unauthorized', `the OpenID Connect sign-in was refused: ${reason}; start again at /auth/oidc/login`);

/**
 * Finishes the sign-in this browser's cookie started, once: checks the state, redeems the code with
 * the PKCE verifier, validates the ID token, maps its claims, and signs the person in. `outcome`
 * gives the status the callback will answer in a mode, for the chain entries.
 */
export async function completeOidcSignIn(
  server: Pick<ServerContext, 'config' | 'sql' | 'logger'>,
  binding: string | undefined,
  query: CallbackQuery,
  outcome: (mode: SignInMode) => number,
): Promise<OidcSignIn> {
  const settings = oidcSettingsOf(server.config);
  const pending = binding ? await takePendingSignIn(server.sql, sha256(binding)) : undefined;
  if (!pending || pending.expires_at.getTime() <= Date.now()) {
    throw badRequest(
      `no OpenID Connect sign-in is under way in this browser (its cookie is missing, already used, or older than ${SIGN_IN_SECONDS / 60} minutes): start again at /auth/oidc/login`,
    );
  }
  if (!query.state || !sameText(query.state, pending.state)) {
    throw badRequest('state: the answer does not belong to the sign-in this browser started; start again at /auth/oidc/login', { field: 'state' });
  }
  if (query.error !== undefined) throw refused(`the provider answered ${oauthErrorCode(query.error) ?? 'with an error'}`);
  // RFC 9207: an answer naming another issuer came from another provider (a mix-up attack).
  if (query.iss !== undefined && query.iss !== settings.issuer) throw refused('the answer names another issuer (iss)');
  if (!query.code) throw badRequest('code: the provider sent no authorization code', { field: 'code' });

  const party = relyingPartyFor(settings);
  const idToken = await party.redeemCode(query.code, pending.code_verifier);
  const claims = await party.verifyIdToken(idToken, pending.nonce);
  const origin: AuditOrigin = { actor: 'anonymous', method: 'GET', path: OIDC_CALLBACK_PATH, withheld: new Set() };
  const given = [settings.usernameClaim, 'email'].map((name) => claimAt(claims, name)).find((v): v is string => typeof v === 'string' && v !== '');
  const person = { protocol: 'oidc' as const, issuer: settings.issuer, subject: claims.sub, claims, names: given ? [given] : [] };
  const signedIn = await signInIdentity(server, settings, person, origin, outcome(pending.mode));
  return { ...signedIn, mode: pending.mode };
}
