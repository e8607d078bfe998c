-- Notification targets, what they are attached to, the events runs owe them and each delivery.

-- A named target (spec part A 2.11, 4.8). `url` and `key` are kept sealed only (context
-- `notification:<id>:url` / `:key`); `url_hint` is the scheme and host a read shows.
CREATE TABLE notification_targets (
  id           text PRIMARY KEY,
  name         text NOT NULL,
  description  text NOT NULL DEFAULT '',
  org_id       text,
  kind         text NOT NULL,
  url_sealed   text,
  url_hint     text,
  key_sealed   text,
  -- sms and email recipients: not secret, shown on read.
  recipients   text,
  -- Created (by an import) without the secret its kind needs: waits for it and skips deliveries.
  needs_secret boolean NOT NULL DEFAULT false,
  created_by   text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now()
);

-- A target attached to an object for an event. A workflow is stored as its template.
CREATE TABLE notification_attachments (
  id          text PRIMARY KEY,
  target_id   text NOT NULL REFERENCES notification_targets (id) ON DELETE CASCADE,
  object_kind text NOT NULL CHECK (object_kind IN ('template', 'schedule', 'project', 'org')),
  object_id   text NOT NULL,
  event       text NOT NULL CHECK (event IN ('started', 'success', 'failure', 'approval', 'skipped', 'attention')),
  created_by  text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (target_id, object_kind, object_id, event)
);
CREATE INDEX notification_attachments_object ON notification_attachments (object_kind, object_id);

-- An event a run owes its targets (spec part B 6.3): marked `owed` by the write that makes it, with
-- the sequence number of the run event that reports it; then `recorded` with one delivery per
-- target, or `skipped` with why when the run had moved past it before it could be announced.
CREATE TABLE notification_events (
  run_id      text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  seq         integer NOT NULL,
  event       text NOT NULL,
  state       text NOT NULL DEFAULT 'owed' CHECK (state IN ('owed', 'recorded', 'skipped')),
  reason      text,
  owed_at     timestamptz NOT NULL DEFAULT now(),
  recorded_at timestamptz,
  PRIMARY KEY (run_id, seq)
);
CREATE INDEX notification_events_owed ON notification_events (owed_at) WHERE state = 'owed';

-- One delivery of one event to one target: idempotent on target, run and sequence.
CREATE TABLE notification_deliveries (
  target_id       text NOT NULL REFERENCES notification_targets (id) ON DELETE CASCADE,
  run_id          text NOT NULL,
  seq             integer NOT NULL,
  event           text NOT NULL,
  status          text NOT NULL CHECK (status IN ('pending', 'retrying', 'arrived', 'failed', 'skipped')),
  attempts        integer NOT NULL DEFAULT 0,
  reason          text,
  queued_at       timestamptz NOT NULL DEFAULT now(),
  -- When its delivery workflow was last started or woken for it.
  handed_off_at   timestamptz,
  last_attempt_at timestamptz,
  next_attempt_at timestamptz,
  finished_at     timestamptz,
  PRIMARY KEY (target_id, run_id, seq),
  FOREIGN KEY (run_id, seq) REFERENCES notification_events (run_id, seq) ON DELETE CASCADE
);
CREATE INDEX notification_deliveries_run ON notification_deliveries (run_id, seq);
CREATE INDEX notification_deliveries_target ON notification_deliveries (target_id, finished_at DESC);
CREATE INDEX notification_deliveries_open ON notification_deliveries (handed_off_at) WHERE status IN ('pending', 'retrying');

-- A run's own notification entries (spec part A 2.1, 2.11 rules 1-3), secrets sealed.
ALTER TABLE runs ADD COLUMN notifications jsonb NOT NULL DEFAULT '[]';
