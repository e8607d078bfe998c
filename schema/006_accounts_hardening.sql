-- Usernames unique after Unicode normalization and case folding, and counters for rate limits.

-- The key an account is unique and found by: hex SHA-256 of the folded username (core/username.ts).
-- The fold (NFKC, full case mapping) is Unicode's, which PostgreSQL's lower() applies only under
-- some collations, so the key is computed by Cairn and never in SQL. Accounts made before this
-- migration get theirs when a server next starts (`bootstrapAdmin` in services/bootstrap.ts), before
-- it serves; until then they are still found by their exact username. Where two existing names
-- fold alike, the oldest account gets the key and each later one `<key>:<account id>`, which no
-- name folds to: both keep signing in with their exact spelling, and no new name may join them.
ALTER TABLE accounts ADD COLUMN username_key text;
CREATE UNIQUE INDEX accounts_by_username_key ON accounts (username_key);

-- Fixed-window counters, one row per limit and subject, updated by one atomic upsert per attempt,
-- so every server sharing this database counts alike. `bucket` names the limit (login_account,
-- login_address, stream_ticket); `subject` is a username key, a client address or an account id.
CREATE TABLE rate_limit_windows (
  bucket       text NOT NULL,
  subject      text NOT NULL,
  window_start timestamptz NOT NULL,
  hits         integer NOT NULL,
  PRIMARY KEY (bucket, subject)
);
-- Windows long over are cleared as new ones open.
CREATE INDEX rate_limit_windows_start ON rate_limit_windows (window_start);
