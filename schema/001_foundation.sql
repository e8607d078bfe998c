-- Accounts, tokens, runs with their events and logs, stream tickets and install settings.

CREATE TABLE accounts (
  id            text PRIMARY KEY,
  username      text NOT NULL UNIQUE,
  role          text NOT NULL CHECK (role IN ('admin', 'operator', 'viewer')),
  password_hash text,
  profile       jsonb NOT NULL DEFAULT '{}',
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tokens (
  id              text PRIMARY KEY,
  account_id      text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  name            text NOT NULL,
  kind            text NOT NULL CHECK (kind IN ('user', 'agent', 'session')),
  secret_hash     bytea NOT NULL UNIQUE,
  created_by      text NOT NULL,
  created_by_type text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  expires_at      timestamptz,
  last_used_at    timestamptz
);
CREATE INDEX tokens_account ON tokens (account_id);

CREATE TABLE runs (
  id                  text PRIMARY KEY,
  tool                text NOT NULL,
  status              text NOT NULL,
  spec                jsonb NOT NULL,
  queue               text NOT NULL DEFAULT '',
  timeout_seconds     integer NOT NULL,
  error               text,
  exit_code           integer,
  requested_by        text NOT NULL,
  account_id          text,
  token_id            text,
  actor_kind          text NOT NULL,
  rerun_of            text,
  idempotency_key     text,
  attempts            integer NOT NULL DEFAULT 0,
  exec_host           text,
  log_bytes           bigint NOT NULL DEFAULT 0,
  next_event_seq      integer NOT NULL DEFAULT 1,
  created_at          timestamptz NOT NULL DEFAULT now(),
  started_at          timestamptz,
  finished_at         timestamptz,
  workflow_started_at timestamptz,
  cancel_requested_at timestamptz,
  cancel_requested_by text
);
CREATE UNIQUE INDEX runs_idempotency ON runs (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX runs_status ON runs (status, id);
CREATE INDEX runs_tool ON runs (tool, id);
CREATE INDEX runs_created_at ON runs (created_at);
-- What the sweeper looks for: submissions whose workflow was never started, cancels not yet settled.
CREATE INDEX runs_unstarted ON runs (created_at) WHERE workflow_started_at IS NULL;
CREATE INDEX runs_cancel_owed ON runs (cancel_requested_at)
  WHERE cancel_requested_at IS NOT NULL AND finished_at IS NULL;

CREATE TABLE run_events (
  run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  seq    integer NOT NULL,
  kind   text NOT NULL,
  body   jsonb NOT NULL,
  at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, seq)
);

CREATE TABLE run_log_chunks (
  run_id       text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  start_offset bigint NOT NULL,
  data         bytea NOT NULL,
  at           timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, start_offset)
);

CREATE TABLE stream_tickets (
  ticket_hash bytea PRIMARY KEY,
  run_id      text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  account_id  text NOT NULL,
  expires_at  timestamptz NOT NULL,
  used_at     timestamptz
);

CREATE TABLE settings (
  key   text PRIMARY KEY,
  value jsonb NOT NULL
);
