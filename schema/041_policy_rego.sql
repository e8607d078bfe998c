-- Policy-language policies (spec part A 2.10, 4.13): a policy from `cairn serve --policy-file` is a
-- row like any approval policy, so the one gate and GET /v1/policies read it, with its read-only
-- `rego` description (package, syntax, bundle sha256, modules, warn, timeout). Null: a policy written
-- through the API. Each start replaces the file's rows by name (services/runs/policy-file.ts).
ALTER TABLE policies ADD COLUMN rego jsonb;
CREATE UNIQUE INDEX policies_rego_name ON policies (name) WHERE rego IS NOT NULL;
