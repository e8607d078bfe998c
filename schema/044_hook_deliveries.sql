-- Webhook push deliveries, recorded before they are answered (spec part A 4.7; part B 8;
-- services/schedules/hook-deliveries.ts). A push that would launch its trigger's template is written
-- here together with a `hook.launch` outbox effect, in one transaction, and only then answered: a
-- server that dies before the launch leaves the push owed, not lost, and the outbox dispatcher
-- launches it. The launch's Idempotency-Key is derived from (trigger_id, delivery_id), so however
-- often it is carried out there is one run per delivery.
CREATE TABLE hook_deliveries (
  -- A deleted trigger's hook is revoked: its deliveries, launched or not, go with it.
  trigger_id      text NOT NULL REFERENCES triggers (id) ON DELETE CASCADE,
  -- The forge's delivery id (X-GitHub-Delivery and its kin), its SHA-256 (`sha256:<hex>`) when over
  -- 128 bytes; Cairn names a delivery that carries none (`named_by_sender` false).
  delivery_id     text NOT NULL,
  named_by_sender boolean NOT NULL,
  -- The push as read (core/schedules/webhooks.ts Push), and the request the launch's chain entry is
  -- fingerprinted over ({query, body}); `request` is dropped once the delivery is settled. Both are
  -- `json`, not `jsonb`: a body may carry \u0000, which jsonb refuses.
  push            json NOT NULL,
  request         json,
  received_at     timestamptz NOT NULL,
  state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'launched', 'refused', 'skipped')),
  run_id          text,
  -- Why it started no run (skipped or refused); a refusal's error code and details (a survey's questions).
  reason          text,
  refusal_code    text,
  refusal_details jsonb,
  settled_at      timestamptz,
  PRIMARY KEY (trigger_id, delivery_id)
);
CREATE INDEX hook_deliveries_received ON hook_deliveries (trigger_id, received_at DESC);
