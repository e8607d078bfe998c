-- Attention alerts (spec part B 6.6): one row per condition that has alerted, so a condition is
-- told to its targets once, whatever restarts or how many servers sweep. The row, the run's
-- `run.needs_attention` event and the event's owed mark are written in one transaction; the
-- primary key makes a second server's insert of the same condition do nothing.
CREATE TABLE attention_alerts (
  -- The item's run (a plain run, or the workflow, pipeline or split).
  run_id            text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  -- The condition's identity within the item (core/attention.ts Condition.identity).
  condition         text NOT NULL,
  -- The alert's id: the incident dedup key and what the event names.
  id                text NOT NULL UNIQUE,
  blocker           text NOT NULL,
  -- The run the condition is about (the item's run, or its step or shard).
  subject_id        text NOT NULL,
  since             timestamptz NOT NULL,
  threshold_seconds integer NOT NULL,
  -- The sequence number of the run event that carries the alert.
  seq               integer NOT NULL,
  alerted_at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, condition)
);
-- Unfinished runs are what attention reads.
CREATE INDEX IF NOT EXISTS runs_unfinished ON runs (parent_run_id, id) WHERE finished_at IS NULL;
