-- Pull request review triggers (spec part A 4.7; services/schedules/review.ts): a trigger of kind
-- `review` plans a pull request's head commit with its template and reports on the forge; a
-- comment `/service apply` applies the saved plan as the commenter's linked account.
ALTER TABLE triggers DROP CONSTRAINT IF EXISTS triggers_kind_check;
ALTER TABLE triggers ADD CONSTRAINT triggers_kind_check CHECK (kind IN ('push', 'review'));
-- The review settings: {forge, api_url}; the forge API token apart, sealed (context `trigger:<id>:forge-token`).
ALTER TABLE triggers ADD COLUMN review jsonb;
ALTER TABLE triggers ADD COLUMN forge_token_sealed text;

-- A run a review trigger started for a pull request: a plan (a dry run) or an apply, and what was
-- last reported to the forge for it (`report`: phase, state, when, a failure being retried).
CREATE TABLE pull_request_runs (
  run_id      text PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
  trigger_id  text NOT NULL,
  forge       text NOT NULL,
  repository  text NOT NULL,
  number      integer NOT NULL,
  head_sha    text NOT NULL,
  purpose     text NOT NULL CHECK (purpose IN ('plan', 'apply')),
  report      jsonb NOT NULL DEFAULT '{}',
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pull_request_runs_pr ON pull_request_runs (trigger_id, repository, number, created_at DESC);

-- A decision made from a pull request comment (spec part A 2.7 rule 4): forge, comment id, author,
-- the SHA-256 of its body and the plan it approved.
ALTER TABLE decision_records ADD COLUMN comment jsonb;
