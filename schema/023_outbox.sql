-- One outbox of after-commit effects (docs/architecture.md, "Durable work"). A write that owes
-- Temporal a start, a signal or a cancel, or owes a notification event its recording, adds a row
-- here in its own transaction; one dispatcher on every server drains it (services/outbox.ts). It
-- replaces a mark and a sweep per kind of owed work.
CREATE TABLE outbox (
  id         bigserial PRIMARY KEY,
  -- What is owed: run.start, run.cancel, run.end_children, step.decided, schedule.hand_off,
  -- event.record, delivery.hand_off, project.update.
  effect     text NOT NULL,
  -- The record it is owed for: a run, schedule, target or project id.
  subject    text NOT NULL,
  payload    jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  -- When a dispatcher may take it: now, after the writing server's own grace, after a claim's
  -- lease, or after a failed attempt's backoff.
  due_at     timestamptz NOT NULL DEFAULT now(),
  attempts   integer NOT NULL DEFAULT 0,
  last_error text
);
CREATE INDEX outbox_due ON outbox (due_at);

-- Work the old marks held owed moves into the outbox once.
INSERT INTO outbox (effect, subject)
  SELECT 'run.start', id FROM runs
  WHERE workflow_started_at IS NULL AND finished_at IS NULL AND status <> 'held' AND parent_run_id IS NULL AND cancel_requested_at IS NULL;
INSERT INTO outbox (effect, subject)
  SELECT 'run.cancel', id FROM runs WHERE cancel_requested_at IS NOT NULL AND finished_at IS NULL AND parent_run_id IS NULL;
INSERT INTO outbox (effect, subject)
  SELECT 'step.decided', id FROM runs WHERE kind = 'approval' AND finished_at IS NOT NULL AND signal_delivered_at IS NULL;
INSERT INTO outbox (effect, subject, payload)
  SELECT DISTINCT 'run.end_children', p.id, '{"message": "not run: its parent ended first"}'::jsonb
  FROM runs p JOIN runs c ON c.parent_run_id = p.id WHERE p.finished_at IS NOT NULL AND c.finished_at IS NULL;
INSERT INTO outbox (effect, subject)
  SELECT 'schedule.hand_off', id FROM schedules WHERE delivered_revision IS DISTINCT FROM revision;
INSERT INTO outbox (effect, subject, payload)
  SELECT 'event.record', run_id, jsonb_build_object('seq', seq) FROM notification_events WHERE state = 'owed';
INSERT INTO outbox (effect, subject, payload)
  SELECT DISTINCT 'delivery.hand_off', target_id, jsonb_build_object('run_id', run_id)
  FROM notification_deliveries WHERE status IN ('pending', 'retrying');
INSERT INTO outbox (effect, subject)
  SELECT 'project.update', id FROM projects WHERE update_requested_at IS NOT NULL;

-- The marks and their scans go. `runs.workflow_started_at` stays: attention reads it as whether a
-- run's workflow exists. A notification event's `owed` state stays: it is the event not yet recorded.
DROP INDEX runs_unstarted;
DROP INDEX runs_cancel_owed;
DROP INDEX runs_undelivered_decisions;
ALTER TABLE runs DROP COLUMN signal_delivered_at;
DROP INDEX schedules_undelivered;
ALTER TABLE schedules DROP COLUMN delivered_revision;
DROP INDEX notification_events_owed;
DROP INDEX notification_deliveries_open;
ALTER TABLE notification_deliveries DROP COLUMN handed_off_at;
DROP INDEX projects_update_owed;
ALTER TABLE projects DROP COLUMN update_claimed_at;

-- A schedule an earlier release stored without a zone is read in UTC (spec part A 9.4); the first
-- server of this release writes UTC onto it, here, once.
UPDATE schedules SET timezone = 'UTC' WHERE timezone IS NULL;
