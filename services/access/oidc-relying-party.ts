import type { JWTPayload, createRemoteJWKSet } from 'jose' with { 'resolution-mode': 'import' };
import { DomainError } from '../../core/errors';
import { loadJose, type Jose } from '../../core/jose';
import type { OidcSettings } from '../../core/access/oidc-settings';
import { providerUrlFault } from '../../core/access/sign-in-flags';

/**
 * Cairn as an OpenID Connect relying party (OpenID Connect Core 1.0, authorization code flow):
 * discovery from the issuer, the authorization request, redeeming the code at the token endpoint,
 * and validating the ID token with jose against the provider's published keys.
 *
 * These requests go straight to the provider, not through the delivery egress rule
 * (services/notifications/notification-egress.ts): that rule guards addresses users type in,
 * while the issuer is admin-set configuration, and the addresses its discovery document names are
 * the provider's own. A provider on a private network (Keycloak beside Cairn) is the usual case.
 */


/** Discovery is fetched once an hour at most; keys as jose's remote key set decides (below). */
const DISCOVERY_TTL_MS = 60 * 60 * 1000;
const HTTP_TIMEOUT_MS = 10_000;
/** Clock difference tolerated on `exp`, `iat` and `nbf`. */
const CLOCK_TOLERANCE_SECONDS = 60;
/** Asymmetric signatures only: never `none`, never a MAC keyed by the client secret. */
const SIGNING_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];

interface Discovery {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  jwks_uri: string;
  id_token_signing_alg_values_supported?: string[];
  token_endpoint_auth_methods_supported?: string[];
  code_challenge_methods_supported?: string[];
}

interface Discovered {
  fetchedAt: number;
  document: Discovery;
  algorithms: string[];
  keys: ReturnType<typeof createRemoteJWKSet>;
}

const refused = (reason: string) => new DomainError('unauthorized', `the OpenID Connect sign-in was refused: ${reason}; start again at /auth/oidc/login`);
const unreachable = (what: string) => new DomainError('bad_gateway', `the OpenID provider could not be used: ${what}`);

/** An OAuth error code as the provider sent it, when it keeps to the RFC 6749 character set; never free text. */
export function oauthErrorCode(value: unknown): string | undefined {
  return typeof value === 'string' && /^[\x20-\x21\x23-\x5b\x5d-\x7e]{1,64}$/.test(value) ? value : undefined;
}

async function fetchChecked(url: string, init: RequestInit, what: string): Promise<Response> {
  try {
    return await fetch(url, { ...init, redirect: 'error', signal: AbortSignal.timeout(HTTP_TIMEOUT_MS) });
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name;
    throw unreachable(`${what} at ${new URL(url).host} did not answer (${cause})`);
  }
}

function endpoint(document: Record<string, unknown>, name: string): string {
  const value = document[name];
  let url: URL | undefined;
  try {
    url = typeof value === 'string' ? new URL(value) : undefined;
  } catch {
    url = undefined;
  }
  if (!url) throw unreachable(`its discovery document has no ${name}`);
  const fault = providerUrlFault(url);
  if (fault) throw unreachable(`its discovery document's ${name} ${fault}`);
  return value as string;
}

export class RelyingParty {
  private discovered: Discovered | undefined;

  constructor(readonly settings: OidcSettings) {}

  /** The provider's discovery document and keys, fetched at first use and again after an hour. */
  private async discover(): Promise<Discovered> {
    if (this.discovered && Date.now() - this.discovered.fetchedAt < DISCOVERY_TTL_MS) return this.discovered;
    const url = `${this.settings.issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
    const response = await fetchChecked(url, { headers: { accept: 'application/json' } }, 'its discovery document');
    if (!response.ok) throw unreachable(`its discovery document answered ${response.status}`);
    const document = (await response.json().catch(() => undefined)) as Record<string, unknown> | undefined;
    if (!document || typeof document !== 'object') throw unreachable('its discovery document is not JSON');
    // OpenID Connect Discovery 4.3: the document must name exactly the issuer it was fetched for.
    if (document.issuer !== this.settings.issuer) throw unreachable('its discovery document names another issuer than --oidc-issuer (compare them character by character, trailing slash included)');
    const methods = document.code_challenge_methods_supported;
    if (Array.isArray(methods) && !methods.includes('S256')) throw unreachable('it does not offer PKCE with S256');
    const offered = document.id_token_signing_alg_values_supported;
    const algorithms = Array.isArray(offered) ? SIGNING_ALGORITHMS.filter((alg) => offered.includes(alg)) : ['RS256'];
    if (algorithms.length === 0) throw unreachable('it signs ID tokens with no algorithm Cairn accepts (RSA, ECDSA or EdDSA)');
    const parsed: Discovery = {
      issuer: this.settings.issuer,
      authorization_endpoint: endpoint(document, 'authorization_endpoint'),
      token_endpoint: endpoint(document, 'token_endpoint'),
      jwks_uri: endpoint(document, 'jwks_uri'),
      token_endpoint_auth_methods_supported: Array.isArray(document.token_endpoint_auth_methods_supported)
        ? (document.token_endpoint_auth_methods_supported as string[])
        : undefined,
    };
    // The same key set is kept while the keys address stays: it fetches again on an unknown kid
    // (a rotated key) at most every 30 s, and at least every 10 minutes.
    const keys =
      this.discovered?.document.jwks_uri === parsed.jwks_uri
        ? this.discovered.keys
        : (await loadJose()).createRemoteJWKSet(new URL(parsed.jwks_uri), { timeoutDuration: HTTP_TIMEOUT_MS, cooldownDuration: 30_000, cacheMaxAge: 10 * 60_000 });
    this.discovered = { fetchedAt: Date.now(), document: parsed, algorithms, keys };
    return this.discovered;
  }

  /** Where to send the browser: the provider's authorization endpoint with this sign-in's state, nonce and PKCE challenge. */
  async authorizationUrl(request: { state: string; nonce: string; codeChallenge: string }): Promise<string> {
    const { document } = await this.discover();
    const url = new URL(document.authorization_endpoint);
    const params = {
      response_type: 'code',
      client_id: this.settings.clientId,
      redirect_uri: this.settings.redirectUrl,
      scope: this.settings.scopes.join(' '),
      state: request.state,
      nonce: request.nonce,
      code_challenge: request.codeChallenge,
      code_challenge_method: 'S256',
    };
    for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
    return url.href;
  }

  /** Redeems the authorization code with the PKCE verifier; the ID token the provider answers with. */
  async redeemCode(code: string, codeVerifier: string): Promise<string> {
    const { document } = await this.discover();
    const { clientId, clientSecret, redirectUrl } = this.settings;
    const body = new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: redirectUrl, code_verifier: codeVerifier });
    const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
    const offered = document.token_endpoint_auth_methods_supported;
    if (!clientSecret) {
      body.set('client_id', clientId);
    } else if (offered && !offered.includes('client_secret_basic') && offered.includes('client_secret_post')) {
      body.set('client_id', clientId);
      body.set('client_secret', clientSecret);
    } else {
      // RFC 6749 2.3.1: each part form-encoded before the pair is base64-encoded.
      const form = (value: string) => new URLSearchParams({ v: value }).toString().slice(2);
      headers.authorization = `Basic ${Buffer.from(`${form(clientId)}:${form(clientSecret)}`).toString('base64')}`;
    }
    const response = await fetchChecked(document.token_endpoint, { method: 'POST', headers, body }, 'its token endpoint');
    const answer = (await response.json().catch(() => undefined)) as Record<string, unknown> | undefined;
    if (!response.ok) {
      const error = oauthErrorCode(answer?.error);
      if (error && response.status < 500) throw refused(`the provider did not accept the authorization code (${error})`);
      throw unreachable(`its token endpoint answered ${response.status}`);
    }
    if (typeof answer?.id_token !== 'string') throw unreachable('its token endpoint answered without an id_token (is openid among --oidc-scopes?)');
    return answer.id_token;
  }

  /**
   * The ID token's claims once it passes every check of OpenID Connect Core 3.1.3.7: signed by a
   * key the provider publishes with an accepted algorithm, issued by the issuer, for this client
   * (and, with several audiences, authorized for it), within its lifetime, carrying this sign-in's
   * nonce and a subject.
   */
  async verifyIdToken(idToken: string, nonce: string): Promise<JWTPayload & { sub: string }> {
    const { algorithms, keys } = await this.discover();
    const jose = await loadJose();
    let payload: JWTPayload;
    try {
      ({ payload } = await jose.jwtVerify(idToken, keys, {
        issuer: this.settings.issuer,
        audience: this.settings.clientId,
        algorithms,
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        requiredClaims: ['sub', 'iat', 'exp'],
      }));
    } catch (err) {
      throw idTokenFault(jose.errors, err);
    }
    if (payload.nonce !== nonce) throw refused("the ID token's nonce is not the one this sign-in sent");
    const audiences = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
    if ((audiences.length > 1 || payload.azp !== undefined) && payload.azp !== this.settings.clientId) {
      throw refused('the ID token was issued to another client (azp)');
    }
    if (typeof payload.sub !== 'string' || payload.sub.length === 0 || payload.sub.length > 255) throw refused('the ID token has no usable subject');
    return payload as JWTPayload & { sub: string };
  }
}

/** What was wrong with an ID token, in words; a key set that could not be fetched is the provider's fault (502). */
function idTokenFault(jose: Jose['errors'], err: unknown): DomainError {
  if (err instanceof jose.JWTExpired) return refused('the ID token has expired');
  if (err instanceof jose.JWTClaimValidationFailed) return refused(`the ID token's ${err.claim} claim is not valid (${err.reason})`);
  if (err instanceof jose.JWSSignatureVerificationFailed) return refused("the ID token's signature does not verify against the provider's published keys");
  if (err instanceof jose.JWKSNoMatchingKey) return refused('the ID token is signed by a key the provider does not publish');
  if (err instanceof jose.JOSEAlgNotAllowed) return refused('the ID token is signed with an algorithm the provider does not offer, or Cairn does not accept');
  if (err instanceof jose.JWKSTimeout || err instanceof jose.JWKSInvalid || err instanceof TypeError) {
    return unreachable('its published keys (jwks_uri) could not be read');
  }
  if (err instanceof jose.JOSEError) return refused(`the ID token is not valid (${err.code})`);
  return unreachable('its published keys (jwks_uri) could not be read');
}

const parties = new WeakMap<OidcSettings, RelyingParty>();

/** The relying party for these settings, kept for the server's life so discovery and keys are cached. */
export function relyingPartyFor(settings: OidcSettings): RelyingParty {
  let party = parties.get(settings);
  if (!party) parties.set(settings, (party = new RelyingParty(settings)));
  return party;
}
