-- The fact cache, the estate and changes (spec part A 2.1 `fact_cache`, 2.3, 2.13, 4.4, 4.12;
-- part B 8).

-- One host's facts as one ansible run gathered them (Ansible's jsonfile fact cache, read at the
-- run's end). A document over 1 MiB is not kept: its row records the size and why, with no facts.
-- The newest kept reading per host of an inventory is that inventory's cached facts; every kept
-- reading of a host is its history (the estate). Deleting an inventory deletes its readings;
-- deleting (retention of) a run keeps them, naming no run.
CREATE TABLE fact_readings (
  id            bigserial PRIMARY KEY,
  inventory_id  text NOT NULL REFERENCES inventories (id) ON DELETE CASCADE,
  host          text NOT NULL,
  run_id        text REFERENCES runs (id) ON DELETE SET NULL,
  gathered_at   timestamptz NOT NULL,
  size_bytes    integer NOT NULL,
  -- sha256 hex of the stored document's text, so two readings compare without reading their facts.
  digest        text,
  facts         jsonb,
  skipped       text,
  CHECK ((facts IS NULL) = (skipped IS NOT NULL))
);
-- The estate at an instant and a host's newest facts: kept readings of a host, newest first.
-- Covering its run and digest, so finding each host's reading at an instant reads the index alone.
CREATE INDEX fact_readings_host ON fact_readings (host, gathered_at DESC, id DESC) INCLUDE (run_id, digest) WHERE facts IS NOT NULL;
-- An inventory's cached facts (newest reading per host) and its deletes.
CREATE INDEX fact_readings_inventory ON fact_readings (inventory_id, host, gathered_at DESC, id DESC);
-- The horizon: the oldest kept reading.
CREATE INDEX fact_readings_gathered ON fact_readings (gathered_at) WHERE facts IS NOT NULL;
CREATE INDEX fact_readings_run ON fact_readings (run_id) WHERE run_id IS NOT NULL;

-- Every host ever read, so the estate visits each host once by index rather than scanning readings.
CREATE TABLE fact_hosts (
  host text PRIMARY KEY
);

-- A template's fact cache (spec part A 2.3); on update, omitted means unchanged.
ALTER TABLE templates ADD COLUMN use_fact_cache boolean NOT NULL DEFAULT false;
ALTER TABLE templates ADD COLUMN fact_cache_timeout integer NOT NULL DEFAULT 0 CHECK (fact_cache_timeout >= 0);

-- A run's change label (spec part A 2.1, 2.13): the `change` of its spec, as a column to group and
-- index by. Present only on runs submitted or launched with one.
ALTER TABLE runs ADD COLUMN change_label text GENERATED ALWAYS AS (spec ->> 'change') STORED;
CREATE INDEX runs_change_label ON runs (created_at DESC, id DESC) INCLUDE (change_label) WHERE change_label IS NOT NULL;
CREATE INDEX runs_change_members ON runs (change_label, created_at) WHERE change_label IS NOT NULL;
