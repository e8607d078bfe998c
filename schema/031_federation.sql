-- Cairn as an OpenID issuer for runs (spec part A 1.1, 2.14, 3.4, 4.10; part B 5.4;
-- services/federation/keys.ts). Each row is one RS256 signing key, named by its JWK `kid`.
--
-- state: next (published ahead of signing by a normal rotation), signing (the one key that signs
-- run identity tokens), retired (no longer signs, still published for 24 hours), removed (out of
-- the published set, its private half erased). The private half is sealed under the install key
-- (core/credentials/seal-contexts.ts federationKeyContext) and set to NULL when the key is removed.
CREATE TABLE federation_keys (
  id                 text PRIMARY KEY,
  public_jwk         jsonb NOT NULL,
  private_jwk_sealed text,
  state              text NOT NULL CHECK (state IN ('next', 'signing', 'retired', 'removed')),
  created_at         timestamptz NOT NULL DEFAULT now(),
  activated_at       timestamptz,
  retired_at         timestamptz,
  removed_at         timestamptz,
  CHECK (state <> 'removed' OR private_jwk_sealed IS NULL)
);
-- At most one key signs and at most one waits to sign.
CREATE UNIQUE INDEX federation_keys_one_signing ON federation_keys ((true)) WHERE state = 'signing';
CREATE UNIQUE INDEX federation_keys_one_next ON federation_keys ((true)) WHERE state = 'next';
