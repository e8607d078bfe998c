-- Templates with surveys, and runs made of other runs: pipelines, saved workflows and splits.

CREATE TABLE templates (
  id              text PRIMARY KEY,
  name            text NOT NULL UNIQUE,
  -- `job` launches one run (or a split); `workflow` runs its steps as a graph.
  kind            text NOT NULL CHECK (kind IN ('job', 'workflow')),
  tool            text,
  command         text,
  extra_vars      jsonb NOT NULL DEFAULT '{}',
  inventory_id    text,
  queue           text NOT NULL DEFAULT '',
  timeout_seconds integer NOT NULL DEFAULT 0,
  shards          integer,
  -- Survey fields; a secret field's default is kept sealed (`default_sealed`), never in clear.
  survey          jsonb NOT NULL DEFAULT '[]',
  steps           jsonb,
  notifications   jsonb NOT NULL DEFAULT '[]',
  created_by      text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);

-- `run` is a plain run; `pipeline`, `workflow` and `split` are parents whose children carry
-- `parent_run_id`: `step` and `approval` (a workflow's approval step) under the first two,
-- `shard` under a split.
ALTER TABLE runs ADD COLUMN kind text NOT NULL DEFAULT 'run';
ALTER TABLE runs ADD COLUMN parent_run_id text REFERENCES runs (id) ON DELETE CASCADE;
ALTER TABLE runs ADD COLUMN step_name text;
ALTER TABLE runs ADD COLUMN step_index integer;
ALTER TABLE runs ADD COLUMN template_id text;
-- A parent's graph (steps with their dependencies) or a split's shard plan, as it was submitted.
ALTER TABLE runs ADD COLUMN graph jsonb;
-- Secret survey answers sealed to this run (var -> sealed text), opened only at execution.
ALTER TABLE runs ADD COLUMN sealed_vars jsonb;
-- An approval step's decision reached the workflow (the signal was delivered).
ALTER TABLE runs ADD COLUMN signal_delivered_at timestamptz;
CREATE INDEX runs_parent ON runs (parent_run_id, step_index) WHERE parent_run_id IS NOT NULL;
-- What the sweeper looks for every pass: steps left unended, decisions a workflow was not told of.
CREATE INDEX runs_unended_children ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL AND finished_at IS NULL;
CREATE INDEX runs_undelivered_decisions ON runs (finished_at) WHERE kind = 'approval' AND signal_delivered_at IS NULL;
