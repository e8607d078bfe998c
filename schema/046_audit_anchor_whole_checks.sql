-- Whether an anchor was taken after checking the whole chain (rather than resuming from the last
-- anchor's frontier). The anchorer checks the whole chain when no such anchor is younger than its
-- whole-check period, so the period holds for the install, not for each server process: restarts,
-- graceful stops and extra servers add no whole-chain scans (services/audit/audit-anchors.ts).
-- Anchors from before this column count as resumed, so the first round after an upgrade is whole.
ALTER TABLE audit_anchors ADD COLUMN whole_check boolean NOT NULL DEFAULT false;
CREATE INDEX audit_anchors_whole_checks ON audit_anchors (at) WHERE whole_check;
