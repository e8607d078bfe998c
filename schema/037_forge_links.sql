-- Forge links (spec part A 2.8, 4.11; services/access/forge-links.ts): a person's account at a
-- forge (GitHub, GitLab, Gitea/Forgejo), by the forge's own numeric user id, so that a pull request
-- comment can be tied to a Cairn account. Only the id and login are kept: no forge access token.
CREATE TABLE forge_links (
  id            text PRIMARY KEY,
  account_id    text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  forge         text NOT NULL CHECK (forge IN ('github', 'gitlab', 'gitea')),
  forge_url     text NOT NULL,
  forge_user_id text NOT NULL,
  login         text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  -- A forge account is linked to at most one Cairn account.
  UNIQUE (forge, forge_url, forge_user_id)
);
CREATE INDEX forge_links_account ON forge_links (account_id);

-- A link under way: started by POST /v1/me/forge-links, taken (deleted) by the one callback that
-- completes or fails it. Found by the hash of the random value in the browser's cookie; the state
-- sent to the forge must match too.
CREATE TABLE forge_link_starts (
  binding_hash  bytea PRIMARY KEY,
  state         text NOT NULL,
  code_verifier text NOT NULL,
  account_id    text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  forge         text NOT NULL,
  expires_at    timestamptz NOT NULL
);
CREATE INDEX forge_link_starts_expiry ON forge_link_starts (expires_at);
