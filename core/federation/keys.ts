/**
 * Federation signing keys as pure rules (spec part A 2.14, 3.4; part B 8): the states a key
 * passes through, which keys are published, and the overlap a normal rotation keeps.
 *
 * - `next`: published by a normal rotation, signing nothing yet;
 * - `signing`: the one key run identity tokens are signed with;
 * - `retired`: signs no more, still published so tokens it signed keep verifying;
 * - `removed`: out of the published set, its private half erased.
 *
 * A normal rotation: a new `next` key now; `FEDERATION_KEY_OVERLAP_SECONDS` later it signs and the
 * old key retires; as long again later the old key is removed. An emergency rotation: a new key
 * signs at once and every other key is removed.
 */

export const FEDERATION_KEY_STATES = ['next', 'signing', 'retired', 'removed'] as const;
export type FederationKeyState = (typeof FEDERATION_KEY_STATES)[number];

/** Keys in the published key set (`/.well-known/jwks.json`). */
export const PUBLISHED_STATES: readonly FederationKeyState[] = ['next', 'signing', 'retired'];

/** 24 hours: a rotated key starts signing this long after it is published, and a retired key stays published this long. */
export const FEDERATION_KEY_OVERLAP_SECONDS = 24 * 60 * 60;

/** The only signing algorithm: RS256, the one AWS, Google Cloud and Azure all accept for web identity federation. */
export const FEDERATION_ALGORITHM = 'RS256';

/** An RSA public key as a JWK (RFC 7517), as published. */
export interface PublicJwk {
  kty: 'RSA';
  n: string;
  e: string;
  kid: string;
  alg: typeof FEDERATION_ALGORITHM;
  use: 'sig';
}

export interface FederationKey {
  id: string;
  public_jwk: PublicJwk;
  state: FederationKeyState;
  created_at: Date;
  activated_at: Date | null;
  retired_at: Date | null;
  removed_at: Date | null;
}

/** A key as `GET /v1/federation/keys` shows it: no key material beyond what the key set publishes. */
export function federationKeyView(key: FederationKey) {
  return {
    id: key.id,
    state: key.state,
    published: PUBLISHED_STATES.includes(key.state),
    created: key.created_at,
    activated: key.activated_at,
    retired: key.retired_at,
    removed: key.removed_at,
  };
}

/**
 * A normal rotation is under way from its start until its old key is removed: while a key waits
 * to sign or a retired key is still published. A second rotation then answers 409.
 */
export function rotationUnderWay(keys: readonly Pick<FederationKey, 'state'>[]): boolean {
  return keys.some((k) => k.state === 'next' || k.state === 'retired');
}
