-- Dynamic inventory sources (spec part A 4.12): a source belongs to one stored inventory and,
-- refreshed, writes its result into that inventory's content, hosts and host count. Access is the
-- inventory's (services/inventory-sources.ts); deleting the inventory deletes its sources.
--
-- kind `script`: `script` is a program printing Ansible's `--list` JSON, run in the run sandbox
--   with a scrubbed environment and `timeout_seconds`.
-- kind `project_file`: `path` is an inventory file (INI or YAML) in project `project_id`'s checkout.
CREATE TABLE inventory_sources (
  id                text PRIMARY KEY,
  inventory_id      text NOT NULL REFERENCES inventories (id) ON DELETE CASCADE,
  name              text NOT NULL,
  kind              text NOT NULL CHECK (kind IN ('script', 'project_file')),
  script            text,
  project_id        text REFERENCES projects (id) ON DELETE SET NULL,
  path              text,
  timeout_seconds   integer NOT NULL DEFAULT 60,
  -- never (not refreshed yet), successful, failed (`last_error` says why).
  status            text NOT NULL DEFAULT 'never' CHECK (status IN ('never', 'successful', 'failed')),
  last_error        text,
  last_refreshed_at timestamptz,
  host_count        integer,
  created_by        text NOT NULL,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  UNIQUE (inventory_id, name),
  CHECK (kind <> 'script' OR script IS NOT NULL),
  CHECK (kind <> 'project_file' OR path IS NOT NULL)
);
CREATE INDEX inventory_sources_inventory ON inventory_sources (inventory_id, created_at, id);
CREATE INDEX inventory_sources_project ON inventory_sources (project_id) WHERE project_id IS NOT NULL;
