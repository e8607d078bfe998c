import type { Push } from '../core/schedules/webhooks';
import { type Db, type Page, type PageRequest, readPage } from './db';
import { oweEffectsStep } from './outbox';

/**
 * Recorded webhook push deliveries (schema/044_hook_deliveries.sql): written with the `hook.launch`
 * effect that launches them, settled with the launch's outcome.
 */

export type HookDeliveryState = 'pending' | 'launched' | 'refused' | 'skipped';

export interface HookDeliveryRecord {
  trigger_id: string;
  delivery_id: string;
  named_by_sender: boolean;
  push: Push;
  /** The request the launch's chain entry is fingerprinted over; null once settled. */
  request: { query: Record<string, unknown>; body: unknown } | null;
  received_at: Date;
  state: HookDeliveryState;
  run_id: string | null;
  reason: string | null;
  refusal_code: string | null;
  refusal_details: Record<string, unknown> | null;
  settled_at: Date | null;
}

const COLUMNS = ['trigger_id', 'delivery_id', 'named_by_sender', 'push', 'request', 'received_at', 'state', 'run_id', 'reason', 'refusal_code', 'refusal_details', 'settled_at'];

export type NewHookDelivery = Pick<HookDeliveryRecord, 'trigger_id' | 'delivery_id' | 'named_by_sender' | 'push' | 'request' | 'received_at'>;

/**
 * Records a push and owes its launch (`hook.launch`, kept by this server for itself: `own`), in one
 * statement, so both land or neither. A delivery id already recorded is not recorded again, unless
 * its delivery started no run (refused or skipped): a redelivery then is tried afresh, as a sender
 * redelivers after fixing what refused it. Answers `recorded` with the effect ids when a launch is
 * owed; otherwise the record as it stands, whose launch is pending or done.
 */
export async function recordHookDelivery(
  db: Db,
  delivery: NewHookDelivery,
): Promise<{ recorded: true; effects: string[] } | { recorded: false; record: HookDeliveryRecord }> {
  const owed = oweEffectsStep(db, [{ effect: 'hook.launch', subject: delivery.trigger_id, payload: { delivery_id: delivery.delivery_id } }], true, db`EXISTS (SELECT 1 FROM recorded)`);
  const [row] = await db<{ effects: string[] | null }[]>`
    WITH recorded AS (
      INSERT INTO hook_deliveries (trigger_id, delivery_id, named_by_sender, push, request, received_at)
      VALUES (${delivery.trigger_id}, ${delivery.delivery_id}, ${delivery.named_by_sender},
              ${JSON.stringify(delivery.push)}::text::json, ${JSON.stringify(delivery.request)}::text::json, ${delivery.received_at})
      ON CONFLICT (trigger_id, delivery_id) DO UPDATE SET
        push = EXCLUDED.push, request = EXCLUDED.request, received_at = EXCLUDED.received_at, state = 'pending',
        run_id = NULL, reason = NULL, refusal_code = NULL, refusal_details = NULL, settled_at = NULL
      WHERE hook_deliveries.state IN ('refused', 'skipped')
      RETURNING delivery_id
    ), ${owed}
    SELECT (SELECT array_agg(id::text) FROM owed_effects) AS effects`;
  if (row.effects?.length) return { recorded: true, effects: row.effects };
  return { recorded: false, record: (await getHookDelivery(db, delivery.trigger_id, delivery.delivery_id))! };
}

export async function getHookDelivery(db: Db, triggerId: string, deliveryId: string): Promise<HookDeliveryRecord | undefined> {
  const [row] = await db<HookDeliveryRecord[]>`SELECT ${db(COLUMNS)} FROM hook_deliveries WHERE trigger_id = ${triggerId} AND delivery_id = ${deliveryId}`;
  return row;
}

/** The outcome of a recorded delivery's launch. */
export type HookDeliverySettlement =
  | { state: 'launched'; run_id: string }
  | { state: 'skipped'; reason: string }
  | { state: 'refused'; reason: string; refusal_code: string; refusal_details: Record<string, unknown> };

/**
 * Settles a pending delivery with its launch's outcome and drops the request it no longer needs.
 * A delivery already settled (a repeated effect) is left as it is; answers whether this settled it.
 */
export async function settleHookDelivery(db: Db, triggerId: string, deliveryId: string, outcome: HookDeliverySettlement): Promise<boolean> {
  const rows = await db`
    UPDATE hook_deliveries SET state = ${outcome.state}, request = NULL, settled_at = now(),
      run_id = ${outcome.state === 'launched' ? outcome.run_id : null},
      reason = ${outcome.state === 'launched' ? null : outcome.reason},
      refusal_code = ${outcome.state === 'refused' ? outcome.refusal_code : null},
      refusal_details = ${outcome.state === 'refused' ? db.json(outcome.refusal_details as never) : null}
    WHERE trigger_id = ${triggerId} AND delivery_id = ${deliveryId} AND state = 'pending'
    RETURNING delivery_id`;
  return rows.length > 0;
}

/**
 * Deletes up to `limit` deliveries settled before `before` (--hook-delivery-retention); a pending
 * one is an owed launch and stays. Answers how many went.
 */
export async function deleteSettledHookDeliveries(db: Db, before: Date, limit: number): Promise<number> {
  const rows = await db`
    DELETE FROM hook_deliveries WHERE ctid IN (
      SELECT ctid FROM hook_deliveries WHERE state <> 'pending' AND settled_at < ${before} LIMIT ${limit}
    ) RETURNING 1`;
  return rows.length;
}

/** A page of a trigger's recorded deliveries, newest first, with the total. */
export async function listHookDeliveryPage(db: Db, triggerId: string, page: PageRequest): Promise<Page<HookDeliveryRecord>> {
  return readPage(
    db,
    { columns: db(COLUMNS), from: db`hook_deliveries`, order: db`received_at DESC, delivery_id`, idColumn: 'delivery_id', where: [db`trigger_id = ${triggerId}`] },
    page,
  );
}
