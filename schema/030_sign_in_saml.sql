-- SAML 2.0 sign-in (spec part A 4.11; services/access/saml-sign-in.ts).

-- One table of identities for every sign-in protocol: a person at a provider, by the protocol,
-- the provider (an OpenID issuer, a SAML identity provider's entity id) and the provider's name
-- for them (the ID token's subject, the assertion's NameID). The protocol is part of the key, so a
-- provider serving both protocols under one name (as Keycloak does) never links a SAML NameID to
-- the account of an equal OpenID subject.
ALTER TABLE oidc_identities RENAME TO sign_in_identities;
ALTER INDEX oidc_identities_account RENAME TO sign_in_identities_account;
ALTER TABLE sign_in_identities ADD COLUMN protocol text NOT NULL DEFAULT 'oidc' CHECK (protocol IN ('oidc', 'saml'));
ALTER TABLE sign_in_identities ALTER COLUMN protocol DROP DEFAULT;
ALTER TABLE sign_in_identities DROP CONSTRAINT oidc_identities_pkey;
ALTER TABLE sign_in_identities ADD PRIMARY KEY (protocol, issuer, subject);

-- An AuthnRequest Cairn sent: made by GET /auth/saml/login, taken (deleted) by the one response
-- that answers it, so an assertion is accepted only in answer to a request of this install (any
-- of its servers) and only once. Rows past expires_at are refused and swept.
CREATE TABLE saml_requests (
  request_id text PRIMARY KEY,
  mode       text NOT NULL CHECK (mode IN ('console', 'token')),
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX saml_requests_expiry ON saml_requests (expires_at);

-- The assertions already used, by the identity provider's entity id and the assertion's ID, kept
-- until the assertion would have expired anyway: the same assertion posted again is refused.
CREATE TABLE saml_assertions (
  issuer       text NOT NULL,
  assertion_id text NOT NULL,
  expires_at   timestamptz NOT NULL,
  PRIMARY KEY (issuer, assertion_id)
);
CREATE INDEX saml_assertions_expiry ON saml_assertions (expires_at);
