-- Exact run counts without scanning `runs` (spec 2.15: a list's `total` stays exact).
--
-- `run_counts` holds how many runs there are per (status, tool, template: '' for none) as of its
-- last compaction, so a reader's total is a sum over the templates it may read;
-- `run_count_deltas` holds the changes since, one row per insert statement group or per run that
-- changed status or tool. Triggers write the deltas in the same transaction as the change to
-- `runs`, whichever statement makes it, so the sum of both tables is always exactly
-- `SELECT status, tool, template_id, count(*) FROM runs GROUP BY 1, 2, 3` as the reader's snapshot sees it.
-- Writers only ever INSERT deltas: no two run writes wait on one counter row, and none can
-- deadlock on them. The sweeper folds the deltas into `run_counts` (store/run-counts.ts
-- compactRunCounts), one server at a time.

CREATE TABLE run_counts (
  status   text NOT NULL,
  tool     text NOT NULL,
  template text NOT NULL,
  n        bigint NOT NULL,
  PRIMARY KEY (status, tool, template)
);
CREATE INDEX run_counts_template ON run_counts (template);

CREATE TABLE run_count_deltas (
  id       bigserial PRIMARY KEY,
  status   text NOT NULL,
  tool     text NOT NULL,
  template text NOT NULL,
  delta    bigint NOT NULL
);

-- One delta row per (status, tool, template) an INSERT statement touched, however many rows it inserted.
CREATE FUNCTION run_counts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO run_count_deltas (status, tool, template, delta)
  SELECT status, tool, coalesce(template_id, ''), count(*) FROM inserted_runs GROUP BY 1, 2, 3;
  RETURN NULL;
END $$;

CREATE FUNCTION run_counts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO run_count_deltas (status, tool, template, delta)
  SELECT status, tool, coalesce(template_id, ''), -count(*) FROM deleted_runs GROUP BY 1, 2, 3;
  RETURN NULL;
END $$;

-- Row level, and only when status, tool or template changed: the many updates of a run's log size
-- or event sequence do not fire it.
CREATE FUNCTION run_counts_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO run_count_deltas (status, tool, template, delta)
  VALUES (OLD.status, OLD.tool, coalesce(OLD.template_id, ''), -1), (NEW.status, NEW.tool, coalesce(NEW.template_id, ''), 1);
  RETURN NULL;
END $$;

CREATE FUNCTION run_counts_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM run_count_deltas;
  DELETE FROM run_counts;
  RETURN NULL;
END $$;

CREATE TRIGGER run_counts_inserted AFTER INSERT ON runs
  REFERENCING NEW TABLE AS inserted_runs FOR EACH STATEMENT EXECUTE FUNCTION run_counts_inserted();
CREATE TRIGGER run_counts_deleted AFTER DELETE ON runs
  REFERENCING OLD TABLE AS deleted_runs FOR EACH STATEMENT EXECUTE FUNCTION run_counts_deleted();
CREATE TRIGGER run_counts_moved AFTER UPDATE OF status, tool, template_id ON runs
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.tool IS DISTINCT FROM NEW.tool
                     OR OLD.template_id IS DISTINCT FROM NEW.template_id)
  EXECUTE FUNCTION run_counts_moved();
CREATE TRIGGER run_counts_truncated AFTER TRUNCATE ON runs
  FOR EACH STATEMENT EXECUTE FUNCTION run_counts_truncated();

-- The back-fill. CREATE TRIGGER above locks `runs` against writes until this migration commits,
-- so no run is counted twice or missed.
INSERT INTO run_counts (status, tool, template, n) SELECT status, tool, coalesce(template_id, ''), count(*) FROM runs GROUP BY 1, 2, 3;

-- The audit chain, verified without re-canonicalizing every entry (core/audit-chain.ts).
--
-- `canonical` is the exact text each entry's hash covers, kept from now on (older entries have
-- none and are checked by recomputing their canonical JSON, as before). A verifier hashes it and
-- checks it parses back to the row's columns (core/audit-chain.ts ChainVerifier.push).
ALTER TABLE audit_entries ADD COLUMN canonical text;

-- How far the stored chain is known to verify, so `GET /v1/audit/verify`, bundles and receipts
-- check only what was appended since (services/audit-verify.ts). Any UPDATE, DELETE or TRUNCATE of
-- audit entries, which Cairn never makes, raises `generation` and drops the prefix: the next check
-- reads the whole chain again, and a check that was under way when it happened cannot save a
-- prefix over it (it saves only while the generation it started with stands).
CREATE TABLE audit_verified (
  id          boolean PRIMARY KEY DEFAULT true CHECK (id),
  generation  bigint NOT NULL DEFAULT 0,
  size        bigint NOT NULL DEFAULT 0,
  head_hash   text,
  frontier    jsonb,
  verified_at timestamptz
);
INSERT INTO audit_verified (id) VALUES (true);

CREATE FUNCTION audit_entries_rewritten() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE audit_verified SET generation = generation + 1, size = 0, head_hash = NULL, frontier = NULL, verified_at = NULL;
  RETURN NULL;
END $$;

CREATE TRIGGER audit_entries_rewritten AFTER UPDATE OR DELETE ON audit_entries
  FOR EACH STATEMENT EXECUTE FUNCTION audit_entries_rewritten();
CREATE TRIGGER audit_entries_truncated AFTER TRUNCATE ON audit_entries
  FOR EACH STATEMENT EXECUTE FUNCTION audit_entries_rewritten();
