-- The audit chain and its signed anchors, approval policies, held runs and their decision records.

-- One row per mutation, hash-linked (core/audit-chain.ts). `seq` is the one-based chain position.
CREATE TABLE audit_entries (
  seq         bigint PRIMARY KEY,
  id          text NOT NULL UNIQUE,
  at          timestamptz NOT NULL,
  actor       text NOT NULL,
  method      text NOT NULL,
  path        text NOT NULL,
  fingerprint text NOT NULL,
  outcome     jsonb NOT NULL,
  body        jsonb NOT NULL,
  prev_hash   text NOT NULL,
  hash        text NOT NULL,
  -- Not hashed: copied from the body so a run's receipt finds its entries without a scan.
  run_id      text
);
CREATE INDEX audit_entries_run ON audit_entries (run_id, seq) WHERE run_id IS NOT NULL;

-- The chain's head: appends lock this one row, so entries link in commit order on every server.
CREATE TABLE audit_head (
  id   boolean PRIMARY KEY DEFAULT true CHECK (id),
  seq  bigint NOT NULL,
  hash text NOT NULL
);
INSERT INTO audit_head (id, seq, hash) VALUES (true, 0, repeat('0', 64));

-- Signed checkpoints {size, head_hash, merkle_root}: what catches a cut tail or a relinked rewrite.
CREATE TABLE audit_anchors (
  size        bigint PRIMARY KEY,
  head_hash   text NOT NULL,
  merkle_root text NOT NULL,
  signed      text NOT NULL,
  key_id      text NOT NULL,
  at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE policies (
  id                        text PRIMARY KEY,
  name                      text NOT NULL DEFAULT '',
  effect                    text NOT NULL CHECK (effect IN ('require_approval', 'deny', 'exempt')),
  tool                      text,
  command_contains          text,
  inventory_id              text,
  queue                     text,
  actor                     text,
  account                   text,
  actor_kind                text,
  require_reason            boolean NOT NULL DEFAULT false,
  exclude_dry_run           boolean NOT NULL DEFAULT false,
  require_distinct_approver boolean NOT NULL DEFAULT false,
  created_by                text NOT NULL,
  created_at                timestamptz NOT NULL DEFAULT now(),
  updated_at                timestamptz NOT NULL DEFAULT now()
);

-- Why a held run is held (policies, the built-in agent hold) and what its approver must meet.
ALTER TABLE runs ADD COLUMN hold jsonb;
ALTER TABLE runs ADD COLUMN state_digest text;
CREATE INDEX runs_held ON runs (created_at) WHERE status = 'held';

-- Approvals, rejections and corrections of a run, each under its own chain entry (id = entry id).
CREATE TABLE decision_records (
  id                 text PRIMARY KEY,
  run_id             text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  kind               text NOT NULL CHECK (kind IN ('approve', 'reject', 'correction')),
  decision_id        text,
  actor              text NOT NULL,
  actor_kind         text NOT NULL,
  reason             text,
  random             text,
  commitment         text,
  at                 timestamptz NOT NULL DEFAULT now(),
  redacted_at        timestamptz,
  redacted_by        text,
  redaction_category text,
  redaction_entry_id text
);
CREATE INDEX decision_records_run ON decision_records (run_id, at);
-- A held run is decided once: the second decision loses to this even past the row lock.
CREATE UNIQUE INDEX decision_records_one_decision ON decision_records (run_id) WHERE kind IN ('approve', 'reject');
