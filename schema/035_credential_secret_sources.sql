-- A credential's secret field may come from an extension's secret source at run time (spec part
-- A 1.3): field id -> {"source": name, "ref": reference}. Only the reference is stored, never the
-- secret; the field has no sealed value then.
ALTER TABLE credentials ADD COLUMN secret_sources jsonb NOT NULL DEFAULT '{}'::jsonb;
