-- Who may read, use or manage which object: teams, organizations with member roles, grants, and
-- the owner and organization of each stored object (spec part A 2.8, part B 5.2 rules 3 to 5).

CREATE TABLE teams (
  id         text PRIMARY KEY,
  name       text NOT NULL UNIQUE,
  created_by text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE team_members (
  team_id    text NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
  account_id text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  added_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (team_id, account_id)
);
-- Every access check starts from the caller's teams.
CREATE INDEX team_members_account ON team_members (account_id, team_id);

CREATE TABLE orgs (
  id         text PRIMARY KEY,
  name       text NOT NULL UNIQUE,
  created_by text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE org_members (
  org_id     text NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
  account_id text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  -- `admin` manages the organization's objects (a viewer account: uses them); `member` reads them.
  role       text NOT NULL CHECK (role IN ('admin', 'member')),
  added_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, account_id)
);
CREATE INDEX org_members_account ON org_members (account_id, org_id);

-- A grant gives one account or one team a permission on one object, named by its id (`tpl_…`) or,
-- for objects that are not rows, by a name (`queue:<name>`). Each permission includes the ones
-- below it; `level` orders them.
CREATE TABLE grants (
  id         text PRIMARY KEY,
  object     text NOT NULL,
  permission text NOT NULL CHECK (permission IN ('read', 'use', 'manage')),
  level      smallint GENERATED ALWAYS AS (CASE permission WHEN 'read' THEN 1 WHEN 'use' THEN 2 ELSE 3 END) STORED,
  account_id text REFERENCES accounts (id) ON DELETE CASCADE,
  team_id    text REFERENCES teams (id) ON DELETE CASCADE,
  created_by text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((account_id IS NULL) <> (team_id IS NULL))
);
CREATE UNIQUE INDEX grants_to_account ON grants (account_id, object, permission) WHERE account_id IS NOT NULL;
CREATE UNIQUE INDEX grants_to_team ON grants (team_id, object, permission) WHERE team_id IS NOT NULL;
CREATE INDEX grants_object ON grants (object);

-- The account that made a template manages it; the organization that owns it lets its admins
-- manage it. Templates saved before owners existed are owned by the account that created them.
ALTER TABLE templates ADD COLUMN owner_id text REFERENCES accounts (id) ON DELETE SET NULL;
ALTER TABLE templates ADD COLUMN org_id text REFERENCES orgs (id) ON DELETE SET NULL;
UPDATE templates t SET owner_id = a.id FROM accounts a WHERE a.username = t.created_by;
CREATE INDEX templates_owner ON templates (owner_id) WHERE owner_id IS NOT NULL;
CREATE INDEX templates_org ON templates (org_id) WHERE org_id IS NOT NULL;

-- A caller below admin lists its own runs and the runs of templates it may read, and its total is
-- counted from these (one key each, so the many runs of a template share one deduplicated entry).
CREATE INDEX runs_account ON runs (account_id);
CREATE INDEX runs_template ON runs (template_id) WHERE template_id IS NOT NULL;
