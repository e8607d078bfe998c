-- Git projects (spec part A 4.5) and provisioning callbacks (spec part A 2.3, 4.6; part B 7.5).

-- A git repository Cairn keeps a checkout of (in <data dir>/projects/<id>). Its update is owed
-- while `update_requested_at` is set: the server that records the request starts it at once, and
-- any server's sweeper starts it again when its claim (`update_claimed_at`) has gone stale.
CREATE TABLE projects (
  id                  text PRIMARY KEY,
  name                text NOT NULL UNIQUE,
  url                 text NOT NULL,
  -- The branch, tag or ref to check out; null for the remote's default branch (HEAD).
  branch              text,
  -- A source-control credential to clone with; reserved until credentials are served.
  credential_id       text,
  -- `pending` before the first update, `updating` while one runs, then `successful` or `failed`.
  status              text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'updating', 'successful', 'failed')),
  -- The commit the checkout holds (from the latest successful update).
  commit_sha          text,
  last_error          text,
  update_requested_at timestamptz,
  update_claimed_at   timestamptz,
  last_updated_at     timestamptz,
  owner_id            text REFERENCES accounts (id) ON DELETE SET NULL,
  org_id              text REFERENCES orgs (id) ON DELETE SET NULL,
  created_by          text NOT NULL,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX projects_owner ON projects (owner_id) WHERE owner_id IS NOT NULL;
CREATE INDEX projects_org ON projects (org_id) WHERE org_id IS NOT NULL;
CREATE INDEX projects_update_owed ON projects (update_requested_at) WHERE update_requested_at IS NOT NULL;

-- A template may run in a copy of a project's checkout; a project in use cannot be deleted (409,
-- checked by the service; the foreign key is the backstop).
ALTER TABLE templates ADD COLUMN project_id text REFERENCES projects (id);
CREATE INDEX templates_project ON templates (project_id) WHERE project_id IS NOT NULL;

-- Provisioning callbacks (spec part A 2.3).
ALTER TABLE templates ADD COLUMN allow_callbacks boolean NOT NULL DEFAULT false;
ALTER TABLE templates ADD COLUMN callback_limit text NOT NULL DEFAULT 'intersect' CHECK (callback_limit IN ('intersect', 'replace'));
-- Set by an import that bound the template to another system's job template; the external
-- address answers only while `external_callback` is on.
ALTER TABLE templates ADD COLUMN external_job_template_id text UNIQUE;
ALTER TABLE templates ADD COLUMN external_callback boolean NOT NULL DEFAULT false;
ALTER TABLE templates ADD COLUMN external_callback_called_at timestamptz;

-- A template's host config key, sealed under the install key (context `callback:<template id>`),
-- and the account that minted it: a callback fires as that account, like a trigger as its owner.
CREATE TABLE callback_keys (
  template_id      text PRIMARY KEY REFERENCES templates (id) ON DELETE CASCADE,
  key_sealed       text NOT NULL,
  owner_account_id text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  owner_actor_kind text NOT NULL CHECK (owner_actor_kind IN ('user', 'agent')),
  created_by       text NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now()
);

-- One callback launch per template and host at a time: the claim is taken before the launch and
-- names its run after; a claim whose run has not finished refuses the next callback (409).
CREATE TABLE callback_claims (
  template_id text NOT NULL REFERENCES templates (id) ON DELETE CASCADE,
  host        text NOT NULL,
  run_id      text REFERENCES runs (id) ON DELETE SET NULL,
  claimed_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (template_id, host)
);

-- The external ids of deleted templates, so their address answers 410 rather than 403.
CREATE TABLE deleted_external_templates (
  external_id text PRIMARY KEY,
  template_id text NOT NULL,
  deleted_at  timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION remember_deleted_external_template() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO deleted_external_templates (external_id, template_id) VALUES (OLD.external_job_template_id, OLD.id)
  ON CONFLICT (external_id) DO UPDATE SET template_id = EXCLUDED.template_id, deleted_at = now();
  RETURN OLD;
END $$;

CREATE TRIGGER templates_remember_external_id AFTER DELETE ON templates
  FOR EACH ROW WHEN (OLD.external_job_template_id IS NOT NULL) EXECUTE FUNCTION remember_deleted_external_template();
