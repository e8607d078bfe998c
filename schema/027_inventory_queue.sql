-- A stored inventory may name a worker queue (spec part A 1.2, Team tier): a run over it that names
-- no queue of its own, directly or through its template, runs there (services/runs.ts). Empty is
-- the default queue, the servers' own pool.
ALTER TABLE inventories ADD COLUMN queue text NOT NULL DEFAULT '';
