-- Named notification targets are objects a grant may name (`ntf_<id>`, spec part A 2.8, 4.8; part
-- B 5.2 rule 3): like every stored kind they carry the account that made them (it manages them)
-- beside their organization (its members use them, its admins manage them). `version` counts the
-- target's writes: a read shows it and a PUT may send it back, so an edit made against a target
-- that has changed since is refused rather than lost (docs/api.md, Targets).
ALTER TABLE notification_targets ADD COLUMN owner_id text REFERENCES accounts (id) ON DELETE SET NULL;
ALTER TABLE notification_targets ADD COLUMN version integer NOT NULL DEFAULT 1;
UPDATE notification_targets t SET owner_id = a.id FROM accounts a WHERE a.username = t.created_by;
CREATE INDEX notification_targets_owner ON notification_targets (owner_id) WHERE owner_id IS NOT NULL;
CREATE INDEX notification_targets_org ON notification_targets (org_id) WHERE org_id IS NOT NULL;
