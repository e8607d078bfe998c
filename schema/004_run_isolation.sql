-- Held submissions, for the check that every run released from a hold has its decision recorded.
CREATE INDEX audit_entries_held_submissions ON audit_entries (run_id)
  WHERE body->>'kind' = 'run.submitted' AND body->>'status' = 'held';
