import type { Push } from '../core/schedules/webhooks';
import { type Db, type Page, type PageRequest, readPage, type Sql } from './db';
import { oweEffects } from './outbox';

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
 * transaction. A delivery id already recorded is not recorded again, unless its delivery started
 * no run (refused or skipped): a redelivery then is tried afresh, as a sender redelivers after
 * fixing what refused it. Answers `recorded` with the effect ids when a launch is owed; otherwise
 * the record as it stands, whose launch is pending or done.
 */
export async function recordHookDelivery(
  sql: Sql,
  delivery: NewHookDelivery,
): Promise<{ recorded: true; effects: string[] } | { recorded: false; record: HookDeliveryRecord }> {
  return (await sql.begin(async (tx) => {
    const push = JSON.stringify(delivery.push);
    const request = JSON.stringify(delivery.request);
    const rows = await tx<{ delivery_id: string }[]>`
      INSERT INTO hook_deliveries (trigger_id, delivery_id, named_by_sender, push, request, received_at)
      VALUES (${delivery.trigger_id}, ${delivery.delivery_id}, ${delivery.named_by_sender}, ${push}::text::json, ${request}::text::json, ${delivery.received_at})
      ON CONFLICT (trigger_id, delivery_id) DO UPDATE SET
        push = EXCLUDED.push, request = EXCLUDED.request, received_at = EXCLUDED.received_at, state = 'pending',
        run_id = NULL, reason = NULL, refusal_code = NULL, refusal_details = NULL, settled_at = NULL
      WHERE hook_deliveries.state IN ('refused', 'skipped')
      RETURNING delivery_id`;
    if (rows.length === 0) {
      const record = await getHookDelivery(tx, delivery.trigger_id, delivery.delivery_id);
      return { recorded: false, record: record! };
    }
    const effects = await oweEffects(tx, [{ effect: 'hook.launch', subject: delivery.trigger_id, payload: { delivery_id: delivery.delivery_id } }], true);
    return { recorded: true, effects };
  })) as { recorded: true; effects: string[] } | { recorded: false; record: HookDeliveryRecord };
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

/** A page of a trigger's recorded deliveries, newest first, with the total. */
export async function listHookDeliveryPage(db: Db, triggerId: string, page: PageRequest): Promise<Page<HookDeliveryRecord>> {
  return readPage(
    db,
    { columns: db(COLUMNS), from: db`hook_deliveries`, order: db`received_at DESC, delivery_id`, idColumn: 'delivery_id', where: [db`trigger_id = ${triggerId}`] },
    page,
  );
}
