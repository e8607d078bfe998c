-- Infrastructure as code (terraform, opentofu): the plan gate's record of each plan a run saved,
-- and the policies' plan condition (docs/api.md, "The plan gate").

-- A policy with plan_deletes matches at the plan gate a plan that deletes or replaces a resource of
-- one of these types ('*': any), and is not judged at submission. Null: no plan condition.
ALTER TABLE policies ADD COLUMN plan_deletes text[];

-- One row per run that planned: the saved plan file (sealed with the install's key when it has one:
-- a plan holds the configuration's values, secrets among them), its digest (what an approval binds
-- to and the apply checks), and what the plan does (core/iac/plan.ts PlanClassification).
CREATE TABLE run_plans (
  run_id          text PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  tool            text NOT NULL,
  digest          text NOT NULL,
  classification  jsonb NOT NULL,
  -- The gate's verdict: run (applied at once), hold (waiting for a person), deny, or dry_run (kept, never applied).
  verdict         text NOT NULL,
  plan            text,
  plan_sealed     boolean NOT NULL DEFAULT false,
  plan_bytes      bigint NOT NULL DEFAULT 0,
  planned_at      timestamptz NOT NULL DEFAULT now(),
  applied_at      timestamptz
);
