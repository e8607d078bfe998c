-- Schedules (spec part A 2.6, 4.3): a cron expression or an RFC 5545 rule, read in an IANA zone,
-- that fires a template, a run, a split or a pipeline. Each enabled schedule is kept by its own
-- long-running Temporal workflow (workflow id = schedule id; docs/architecture.md, "Schedules").
CREATE TABLE schedules (
  id                 text PRIMARY KEY,
  name               text NOT NULL,
  cron               text,
  rrule              text,
  -- The zone the rule is read in. Null only on a schedule stored without a zone by an earlier
  -- release (spec part A 9.4): it is read in UTC, and the first server to start writes UTC onto it.
  timezone           text,
  spring_forward     text NOT NULL CHECK (spring_forward IN ('jump', 'later', 'skip')),
  enabled            boolean NOT NULL DEFAULT true,
  -- What it fires: a template (no foreign key: a schedule outlives its template's deletion and
  -- says so on its next fire), or a submission: {kind: run | pipeline, body as sent, request}.
  template_id        text,
  submission         jsonb,
  -- The account its fires run as (whoever saved it last), and whether that was through an agent token.
  owner_account_id   text NOT NULL,
  owner_actor_kind   text NOT NULL CHECK (owner_actor_kind IN ('user', 'agent')),
  created_by         text NOT NULL,
  updated_by         text NOT NULL,
  -- Bumped by every update: a fire planned under an older revision is planned again, not made.
  revision           integer NOT NULL DEFAULT 1,
  -- The revision the schedule's workflow was last handed (started or signalled); the sweeper
  -- hands over any schedule whose workflow is behind.
  delivered_revision integer,
  next_fire_at       timestamptz,
  -- The latest fire handled: its nominal time and what came of it (started, did_not_run, skipped).
  last_fire_at       timestamptz,
  last_outcome       text CHECK (last_outcome IN ('started', 'did_not_run', 'skipped')),
  last_run_id        text,
  -- Why the latest fire started no run, until a fire starts one.
  last_error         text,
  last_error_at      timestamptz,
  -- Fires skipped while a run the schedule started still goes: {at, reason, run_id, since, fires}.
  last_skipped       jsonb,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  CHECK (num_nonnulls(cron, rrule) = 1),
  CHECK (num_nonnulls(template_id, submission) = 1)
);
-- Schedules whose workflow has not been handed their latest revision (the sweeper's scan).
CREATE INDEX schedules_undelivered ON schedules (updated_at) WHERE delivered_revision IS DISTINCT FROM revision;
-- A schedule's runs still going, found at every fire (its fires are skipped while one goes).
CREATE INDEX runs_source_unfinished ON runs (source_kind, source_id)
  WHERE finished_at IS NULL AND source_id IS NOT NULL AND parent_run_id IS NULL;
