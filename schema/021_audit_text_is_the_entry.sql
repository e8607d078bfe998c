-- An audit entry appended since 017_scale.sql is the text its hash covers (`canonical`): readers
-- take its fields from that text, and verification hashes the text alone. The columns beside it
-- stay for indexes and for rows appended before 017, but a decision that rests on the chain reads
-- the hashed body, so a column edited by hand neither shows nor counts.
CREATE FUNCTION audit_body(canonical text, body jsonb) RETURNS jsonb
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT CASE WHEN canonical IS NULL THEN body ELSE (canonical::jsonb)->'body' END $$;

DROP INDEX audit_entries_held_submissions;
CREATE INDEX audit_entries_held_submissions ON audit_entries (run_id)
  WHERE audit_body(canonical, body)->>'kind' = 'run.submitted' AND audit_body(canonical, body)->>'status' = 'held';
