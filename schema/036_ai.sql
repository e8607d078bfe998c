-- Advisory AI (docs/ai.md): a run's explanation, asked of the provider once and shown again from
-- here. Only the answer is kept, masked; the prompt is never stored.
CREATE TABLE run_explanations (
  run_id        text PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  provider      text NOT NULL,
  model         text NOT NULL,
  answer        text NOT NULL,
  explained_by  text NOT NULL,
  explained_at  timestamptz NOT NULL DEFAULT now()
);
