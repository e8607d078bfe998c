-- The ansible tool: stored inventories, and each ansible run's per-host and per-task results as
-- Cairn's callback plugin reported them (spec part A 2.1, 2.2, 4.1, 4.4, 4.12; part B 8).

-- A stored inventory (INI or YAML). `hosts` holds the host names it names (for counting and for
-- matching a caller to a host); `content` is never shown in a list.
CREATE TABLE inventories (
  id          text PRIMARY KEY,
  name        text NOT NULL UNIQUE,
  kind        text NOT NULL DEFAULT 'static' CHECK (kind IN ('static')),
  format      text NOT NULL CHECK (format IN ('ini', 'yaml')),
  content     text NOT NULL,
  size_bytes  integer NOT NULL,
  hosts       jsonb NOT NULL DEFAULT '[]',
  host_count  integer NOT NULL DEFAULT 0,
  owner_id    text REFERENCES accounts (id) ON DELETE SET NULL,
  org_id      text REFERENCES orgs (id) ON DELETE SET NULL,
  created_by  text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inventories_owner ON inventories (owner_id) WHERE owner_id IS NOT NULL;
CREATE INDEX inventories_org ON inventories (org_id) WHERE org_id IS NOT NULL;

-- One host's outcome over one run (its play recap). A run's rows are replaced whole by the
-- attempt that ends it. `status` is the host's verdict: ok, changed, failed, unreachable, skipped.
CREATE TABLE run_host_results (
  run_id      text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  host        text NOT NULL,
  status      text NOT NULL,
  counts      jsonb NOT NULL,
  finished_at timestamptz NOT NULL,
  PRIMARY KEY (run_id, host)
);
-- A host's recent runs (GET /v1/hosts/{host}/runs, the fleet's window).
CREATE INDEX run_host_results_host ON run_host_results (host, finished_at DESC, run_id);

-- One task's outcome across hosts in one run, in run order (`seq`).
CREATE TABLE run_task_results (
  run_id      text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  seq         integer NOT NULL,
  play        text,
  task        text NOT NULL,
  counts      jsonb NOT NULL,
  hosts       jsonb NOT NULL,
  started_at  timestamptz,
  finished_at timestamptz,
  duration_ms integer,
  PRIMARY KEY (run_id, seq)
);
-- A task's recent durations (GET /v1/tasks).
CREATE INDEX run_task_results_task ON run_task_results (task, finished_at DESC);

-- A job template's ansible playbook and controls (spec part A 2.2, 2.3), as a run spec carries
-- them (core/ansible-spec.ts); its stored inventory is the existing `inventory_id`.
ALTER TABLE templates ADD COLUMN ansible jsonb NOT NULL DEFAULT '{}';
