-- Imports (spec part A 4.14): which object each imported external object became, so a re-import
-- of the same export finds it and skips it rather than creating it twice. `external_id` is the
-- format's own stable key for the object (AWX's natural key, a Semaphore name).
CREATE TABLE import_bindings (
  format      text NOT NULL,
  kind        text NOT NULL,
  external_id text NOT NULL,
  object_id   text NOT NULL,
  created_by  text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (format, kind, external_id)
);
