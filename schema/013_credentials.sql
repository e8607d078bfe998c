-- Credentials and custom credential types (spec part A 2.9, 4.9; part B 5.2, 5.3, 7.2).

-- A custom credential type: the fields a credential of it holds (each secret or not) and how those
-- values reach a run (environment variables, extra vars, files), as templates over field values.
CREATE TABLE credential_types (
  id          text PRIMARY KEY,
  name        text NOT NULL UNIQUE,
  description text NOT NULL DEFAULT '',
  fields      jsonb NOT NULL,
  injectors   jsonb NOT NULL,
  created_by  text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);

-- A credential: a built-in kind (`type_id` null) or a custom type (`kind` = 'custom'). `inputs`
-- holds the non-secret field values, returned by reads; `sealed` holds each secret field's value
-- sealed with the install key (context `credential:<id>:<field>`), never returned. Owned like a
-- template: the owner manages it, its organization's admins manage it, grants give the rest.
CREATE TABLE credentials (
  id          text PRIMARY KEY,
  name        text NOT NULL,
  description text NOT NULL DEFAULT '',
  kind        text NOT NULL,
  type_id     text REFERENCES credential_types (id) ON DELETE RESTRICT,
  inputs      jsonb NOT NULL DEFAULT '{}',
  sealed      jsonb NOT NULL DEFAULT '{}',
  owner_id    text REFERENCES accounts (id) ON DELETE SET NULL,
  org_id      text REFERENCES orgs (id) ON DELETE SET NULL,
  created_by  text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  CHECK ((kind = 'custom') = (type_id IS NOT NULL))
);
CREATE INDEX credentials_owner ON credentials (owner_id) WHERE owner_id IS NOT NULL;
CREATE INDEX credentials_org ON credentials (org_id) WHERE org_id IS NOT NULL;
CREATE INDEX credentials_type ON credentials (type_id) WHERE type_id IS NOT NULL;

-- A template's credentials: every launch uses `credentials`; a launch may add any of
-- `selectable_credentials` (spec part A 4.6). Deleting a credential a template names is refused.
ALTER TABLE templates ADD COLUMN credentials text[] NOT NULL DEFAULT '{}';
ALTER TABLE templates ADD COLUMN selectable_credentials text[] NOT NULL DEFAULT '{}';
CREATE INDEX templates_credentials ON templates USING gin (credentials);
CREATE INDEX templates_selectable_credentials ON templates USING gin (selectable_credentials);

-- The credentials a run (and each step or shard of it that runs a tool) is given, in order. No
-- foreign key to credentials: a finished run keeps naming a credential deleted since.
CREATE TABLE run_credentials (
  run_id        text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  position      smallint NOT NULL,
  credential_id text NOT NULL,
  PRIMARY KEY (run_id, position)
);
CREATE INDEX run_credentials_credential ON run_credentials (credential_id);
