import { DomainError } from '../../core/errors';
import type { Sql } from '../../store/db';
import { claimHit, clearHits, releaseHit, type RateLimit } from '../../store/rate-limits';

/**
 * Rate limits on what a guesser or a noisy client could repeat without end. The counters are rows
 * in PostgreSQL (store/rate-limits.ts), so every server sharing the database counts together. A
 * refused attempt changes nothing else and leaves no audit entry.
 */

/** Failed sign-ins per username (folded, so every spelling counts together), known or not. */
export const SIGN_IN_PER_ACCOUNT: RateLimit = { bucket: 'login_account', max: 5, windowSeconds: 300 };
/** Failed sign-ins per client address (the socket's: behind a proxy, the proxy's). */
export const SIGN_IN_PER_ADDRESS: RateLimit = { bucket: 'login_address', max: 20, windowSeconds: 300 };
/** OpenID Connect sign-ins started per client address: each is a row kept ten minutes, so this bounds what an anonymous caller can store. */
export const OIDC_STARTS_PER_ADDRESS: RateLimit = { bucket: 'oidc_start_address', max: 30, windowSeconds: 60 };
/** SAML sign-ins started per client address: each is a request kept ten minutes. */
export const SAML_STARTS_PER_ADDRESS: RateLimit = { bucket: 'saml_start_address', max: 30, windowSeconds: 60 };
/** Stream tickets per account: each is an audit entry, so this bounds how fast a viewer grows the chain. */
export const STREAM_TICKETS_PER_ACCOUNT: RateLimit = { bucket: 'stream_ticket', max: 60, windowSeconds: 60 };

/** A 429 naming the limit, with `Retry-After`: the seconds until its window closes. */
export class RateLimited extends DomainError {
  constructor(
    readonly retryAfterSeconds: number,
    limit: RateLimit,
    what: string,
  ) {
    super(
      'rate_limited',
      `too many ${what}: ${limit.max} within ${span(limit.windowSeconds)}; try again in ${retryAfterSeconds} seconds`,
      { limit: limit.bucket, max: limit.max, window_seconds: limit.windowSeconds, retry_after: retryAfterSeconds },
      { 'Retry-After': String(retryAfterSeconds) },
    );
  }
}

function span(seconds: number): string {
  if (seconds === 60) return 'a minute';
  return seconds % 60 === 0 ? `${seconds / 60} minutes` : `${seconds} seconds`;
}

/** A sign-in let through the limits; tell it when the password turned out right. */
export interface SignInAttempt {
  succeeded(): Promise<void>;
}

/**
 * Lets a sign-in attempt through, or refuses it with 429 before the password is looked at, so a
 * right password in a lockout is refused like a wrong one and a guesser learns nothing. The attempt
 * is counted as a failure up front, so guesses sent all at once get no more tries than guesses
 * sent one by one; a success then clears the username's count and gives the address its hit back.
 * An attempt refused for its username is not counted against its address.
 */
export async function admitSignIn(sql: Sql, usernameKey: string, address: string): Promise<SignInAttempt> {
  const byAddress = await claimHit(sql, SIGN_IN_PER_ADDRESS, address);
  if (!byAddress.granted) throw new RateLimited(byAddress.retryAfterSeconds, SIGN_IN_PER_ADDRESS, 'failed sign-ins from this address');
  const byAccount = await claimHit(sql, SIGN_IN_PER_ACCOUNT, usernameKey);
  if (!byAccount.granted) {
    await releaseHit(sql, SIGN_IN_PER_ADDRESS, address, byAddress.windowStart);
    throw new RateLimited(byAccount.retryAfterSeconds, SIGN_IN_PER_ACCOUNT, 'failed sign-ins for this account');
  }
  return {
    async succeeded() {
      await clearHits(sql, SIGN_IN_PER_ACCOUNT, usernameKey);
      await releaseHit(sql, SIGN_IN_PER_ADDRESS, address, byAddress.windowStart);
    },
  };
}

/** Counts a stream ticket for the account, or refuses it with 429 past the limit. */
export async function admitStreamTicket(sql: Sql, accountId: string): Promise<void> {
  const claim = await claimHit(sql, STREAM_TICKETS_PER_ACCOUNT, accountId);
  if (!claim.granted) throw new RateLimited(claim.retryAfterSeconds, STREAM_TICKETS_PER_ACCOUNT, 'stream tickets for this account');
}

/** Counts an OpenID Connect sign-in started from this address, or refuses it with 429 past the limit. */
export async function admitOidcStart(sql: Sql, address: string): Promise<void> {
  const claim = await claimHit(sql, OIDC_STARTS_PER_ADDRESS, address);
  if (!claim.granted) throw new RateLimited(claim.retryAfterSeconds, OIDC_STARTS_PER_ADDRESS, 'OpenID Connect sign-ins started from this address');
}

/** Counts a SAML sign-in started from this address, or refuses it with 429 past the limit. */
export async function admitSamlStart(sql: Sql, address: string): Promise<void> {
  const claim = await claimHit(sql, SAML_STARTS_PER_ADDRESS, address);
  if (!claim.granted) throw new RateLimited(claim.retryAfterSeconds, SAML_STARTS_PER_ADDRESS, 'SAML sign-ins started from this address');
}
