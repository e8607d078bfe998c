-- What started a run: a person or agent through the API, a rerun, a schedule, a webhook trigger,
-- a provisioning callback. Runs before this release came through the API.
ALTER TABLE runs ADD COLUMN source_kind text NOT NULL DEFAULT 'api';
ALTER TABLE runs ADD COLUMN source_id text;
-- A schedule's or trigger's runs, newest first (its fires are skipped while one still goes).
CREATE INDEX runs_source ON runs (source_kind, source_id, id) WHERE source_id IS NOT NULL;
