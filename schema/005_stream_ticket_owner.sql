-- A stream ticket is tied to the token that minted it and to that token's account: revoking the
-- token or deleting the account deletes its tickets, so none of them opens a stream afterwards.
-- Tickets minted before this have no token to tie to. An unspent one lives 30 seconds and a spent
-- one is refused either way, so they are all simply dropped.
DELETE FROM stream_tickets;

ALTER TABLE stream_tickets
  ADD COLUMN token_id text NOT NULL REFERENCES tokens (id) ON DELETE CASCADE,
  ADD CONSTRAINT stream_tickets_account_id_fkey FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE;

-- The cascades find a token's and an account's tickets by index.
CREATE INDEX stream_tickets_token ON stream_tickets (token_id);
CREATE INDEX stream_tickets_account ON stream_tickets (account_id);
