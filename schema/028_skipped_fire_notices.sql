-- A schedule's fire skipped because its inventory matched no host is announced to notification
-- targets as `schedule.skipped` (spec part B 6.1, 6.2 rule 2). Notification events and their
-- deliveries now have a subject: a run, as before, or such a skipped fire. Both are keyed by
-- `subject_id` (the run's id, or the fire's) and a sequence number, so one delivery workflow per
-- target delivers both, with the same order, retries and idempotency.

-- A skipped fire that was announced. Its id is its identity, the schedule and the time it fired
-- at: `<schedule id>@<fire time>`. `body` is what its event carries (`{"run": …}`, run-shaped),
-- `at` when the skip was recorded. No foreign key to the schedule: like a run's source, it
-- outlives the schedule's deletion.
CREATE TABLE skipped_fires (
  id          text PRIMARY KEY,
  schedule_id text NOT NULL,
  fire_at     timestamptz NOT NULL,
  body        jsonb NOT NULL,
  at          timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE notification_events RENAME COLUMN run_id TO subject_id;
ALTER TABLE notification_deliveries RENAME COLUMN run_id TO subject_id;
ALTER INDEX notification_deliveries_run RENAME TO notification_deliveries_subject;
ALTER TABLE notification_events DROP CONSTRAINT notification_events_run_id_fkey;
ALTER TABLE notification_events ADD COLUMN subject_kind text NOT NULL DEFAULT 'run' CHECK (subject_kind IN ('run', 'skipped_fire'));
-- The subject as the row it is, so that each kind keeps its foreign key: deleting a run, or a
-- skipped fire, deletes its events and, with them, their deliveries.
ALTER TABLE notification_events
  ADD COLUMN run_id text GENERATED ALWAYS AS (CASE WHEN subject_kind = 'run' THEN subject_id END) STORED REFERENCES runs (id) ON DELETE CASCADE;
ALTER TABLE notification_events
  ADD COLUMN fire_id text GENERATED ALWAYS AS (CASE WHEN subject_kind = 'skipped_fire' THEN subject_id END) STORED REFERENCES skipped_fires (id) ON DELETE CASCADE;
-- Not indexed: the service deletes neither runs nor skipped fires; a delete by hand scans for them.

-- Hand-offs owed when this release starts name the subject, as this release writes them.
UPDATE outbox SET payload = jsonb_build_object('subject_id', payload->'run_id')
  WHERE effect = 'delivery.hand_off' AND payload ? 'run_id';
