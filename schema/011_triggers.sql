-- Webhook triggers (spec part A 4.7): a git push delivered to /hooks/<token> launches a template.
-- The path token is kept only as its SHA-256; the signing secret only sealed under the install's
-- encryption key (context `trigger:<id>:signing-secret`). Neither is ever read back.
CREATE TABLE triggers (
  id                 text PRIMARY KEY,
  name               text NOT NULL,
  -- `push` fires on a push; pull request review triggers are not served yet.
  kind               text NOT NULL DEFAULT 'push' CHECK (kind IN ('push')),
  -- No foreign key: a trigger outlives its template's deletion and says so on its next delivery.
  template_id        text NOT NULL,
  -- The account a delivery fires as (the creator), and whether it made the trigger through an agent token.
  owner_account_id   text NOT NULL,
  owner_actor_kind   text NOT NULL CHECK (owner_actor_kind IN ('user', 'agent')),
  created_by         text NOT NULL,
  hook_token_hash    bytea NOT NULL UNIQUE,
  secret_sealed      text NOT NULL,
  enforce_signature  boolean NOT NULL DEFAULT true,
  secret_rotated_at  timestamptz,
  -- Why the latest delivery started no run (null once a delivery starts one), and when.
  last_error         text,
  last_error_at      timestamptz,
  -- When the delivery whose outcome last_error shows arrived: an older delivery's late outcome never overwrites a newer one's.
  last_delivery_at   timestamptz,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now()
);
