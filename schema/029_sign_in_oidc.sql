-- OpenID Connect sign-in (spec part A 4.11; services/access/oidc-sign-in.ts).

-- An admin may disable an account without deleting it: it signs in no way (password or OpenID
-- Connect) and its tokens stop working until it is enabled again.
ALTER TABLE accounts ADD COLUMN disabled boolean NOT NULL DEFAULT false;

-- A person at an OpenID provider, by the provider's (issuer, subject) pair, and the account they
-- sign in to: made at their first sign-in, matched at every later one. Never matched by username
-- or email, which a provider may let a person choose. Deleting the account deletes the link.
CREATE TABLE oidc_identities (
  issuer          text NOT NULL,
  subject         text NOT NULL,
  account_id      text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  created_at      timestamptz NOT NULL DEFAULT now(),
  last_sign_in_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (issuer, subject)
);
CREATE INDEX oidc_identities_account ON oidc_identities (account_id);

-- A sign-in under way: started by GET /auth/oidc/login, taken (deleted) by the one callback that
-- completes or fails it. Found by the hash of the random value in the browser's cookie, so only
-- the browser that started it can finish it; rows past expires_at are refused and swept.
CREATE TABLE oidc_sign_ins (
  binding_hash  bytea PRIMARY KEY,
  state         text NOT NULL,
  nonce         text NOT NULL,
  code_verifier text NOT NULL,
  mode          text NOT NULL CHECK (mode IN ('console', 'token')),
  expires_at    timestamptz NOT NULL
);
CREATE INDEX oidc_sign_ins_expiry ON oidc_sign_ins (expires_at);
