-- The worker relay (spec part A 4.18): a run on a queue served by relay workers has its execution
-- activity taken by a server, which records the attempt's task token here and leaves the activity
-- to be completed asynchronously. A relay worker claims the row (a long poll of POST
-- /relay/v1/claim), holding it with a per-claim capability whose SHA-256 is kept here and nowhere
-- else; its heartbeats become the activity's heartbeats, and its end report completes it. A new
-- attempt (Temporal's retry after a lost lease) replaces the row, so the lost holder's capability
-- opens nothing any more. The row goes when the attempt ends.
CREATE TABLE relay_leases (
  run_id          text PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
  queue           text NOT NULL,
  -- The Temporal activity attempt this row is for.
  attempt         integer NOT NULL,
  task_token      bytea NOT NULL,
  dispatched_at   timestamptz NOT NULL DEFAULT now(),
  -- Unset while the attempt waits for a relay worker to claim it.
  worker_id       text,
  capability_hash bytea UNIQUE,
  claimed_at      timestamptz,
  renewed_at      timestamptz
);
CREATE INDEX relay_leases_waiting ON relay_leases (queue, dispatched_at) WHERE worker_id IS NULL;

-- Relay workers are listed beside the direct ones (GET /v1/workers): a relay worker has no
-- database session, so the server records its row on each of its calls.
ALTER TABLE workers
  ADD COLUMN kind text NOT NULL DEFAULT 'direct' CHECK (kind IN ('direct', 'relay')),
  ADD COLUMN version text;

-- What a relay worker reports of an ansible run before its end (host-summary, task-summary,
-- host-facts, in bounded batches): kept per attempt until the end report stores them as the
-- pool's worker would, in one go; a new attempt starts with none.
CREATE TABLE relay_reports (
  id      bigserial PRIMARY KEY,
  run_id  text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  attempt integer NOT NULL,
  -- host, task, facts, supplied, ended
  kind    text NOT NULL,
  item    jsonb NOT NULL
);
CREATE INDEX relay_reports_run ON relay_reports (run_id, attempt, kind);
