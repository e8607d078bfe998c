import { DomainError, type ErrorCode, statusOf } from '../../core/errors';
import { newId } from '../../core/ids';
import { deliveryIdOf, deliveryKey, type DeliveryHeaders, type Push } from '../../core/schedules/webhooks';
import { deleteSettledHookDeliveries, getHookDelivery, recordHookDelivery, settleHookDelivery, type HookDeliveryRecord, type HookDeliverySettlement } from '../../store/hook-deliveries';
import { getRun } from '../../store/runs';
import { getTrigger, type Trigger } from '../../store/triggers';
import type { ServerContext } from '../context';
import { completeEffects, holdOwnEffects, retryEffectLater } from '../../store/outbox';
import { GiveWay, Slots } from '../../core/slots';
import { deliveryOrigin, fireTrigger, noteOutcome, within, type FireOutcome, type HookAnswer } from './trigger-fire';

/**
 * A push delivery that would launch its trigger's template is recorded before it is answered
 * (schema/044_hook_deliveries.sql): the record and its `hook.launch` outbox effect are written in
 * one statement, then the launch is carried out by this server just after the commit, or, when
 * that fails or the server dies first, by the outbox dispatcher (services/outbox.ts), which tries
 * again until it is done. The launch's Idempotency-Key comes from the trigger and the delivery id,
 * so a launch carried out twice still makes one run.
 *
 * The answer waits for the launch at most the server's answer wait (`--hook-answer-wait`, 0 by
 * default): the launch's outcome when it came in time (201, 200 naming a run, 200 skipped, 409 or
 * 502), else 202 `{"accepted": true}` with a Location to the delivery's read.
 */

/** How often a redelivery of a pending delivery looks at its record while it may wait. */
const SETTLED_POLL_MS = 50;

/**
 * Launches one server carries out at once, its own just after their records and the outbox
 * dispatcher's alike. Answers do not wait on launches, so a burst of pushes would otherwise start
 * as many launches side by side, and the answers would queue behind them for database connections.
 */
const LAUNCHES_AT_ONCE = 12;
/**
 * How long a launch waits while this server is answering deliveries: answers first, so a burst of
 * pushes is answered at the pace of their records alone, and launched after it (within the
 * server's own grace on its effects, store/outbox.ts OWN_GRACE_SECONDS).
 */
const LAUNCH_GIVES_WAY_MS = 2000;
const launchSlots = new WeakMap<ServerContext, { slots: Slots; answers: GiveWay }>();
const launchesOf = (ctx: ServerContext) =>
  launchSlots.get(ctx) ?? launchSlots.set(ctx, { slots: new Slots(LAUNCHES_AT_ONCE), answers: new GiveWay() }).get(ctx)!;

/** Answers a delivery as one the server's launches give way to. */
export function answering<T>(ctx: ServerContext, answer: () => Promise<T>): Promise<T> {
  return launchesOf(ctx).answers.during(answer);
}

/** A launch in its turn: after the deliveries being answered (at most LAUNCH_GIVES_WAY_MS), then in one of the server's slots. */
async function inLaunchTurn<T>(ctx: ServerContext, launch: () => Promise<T>): Promise<T> {
  const { slots, answers } = launchesOf(ctx);
  await answers.yielded(LAUNCH_GIVES_WAY_MS);
  return slots.run(launch);
}

/** How long this server holds its own `hook.launch` from the dispatchers once it starts it (as a dispatcher's lease). */
const HOLD_SECONDS = 60;

/** Where a recorded delivery is read: `GET /v1/triggers/{id}/deliveries/{delivery_id}`. */
export const hookDeliveryPath = (triggerId: string, deliveryId: string) => `/v1/triggers/${triggerId}/deliveries/${encodeURIComponent(deliveryId)}`;

/** A recorded delivery as `GET /v1/triggers/{id}/deliveries/{delivery_id}` shows it: never the body or the headers. */
export function hookDeliveryView(record: HookDeliveryRecord) {
  const { forge, ref, branch, tag, commit, repository, pusher } = record.push;
  return {
    trigger_id: record.trigger_id,
    delivery_id: record.delivery_id,
    named_by_sender: record.named_by_sender,
    state: record.state,
    run_id: record.run_id,
    reason: record.reason,
    refusal_status: record.refusal_code ? statusOf(record.refusal_code as ErrorCode) : null,
    push: { forge, ref, branch, tag, commit, repository, pusher },
    received_at: record.received_at.toISOString(),
    settled_at: record.settled_at?.toISOString() ?? null,
  };
}

/** What deliverPush needs of the delivery as received. */
export interface ReceivedPush {
  headers: DeliveryHeaders;
  query: Record<string, unknown>;
  /** When it arrived (ms since the epoch): the answer wait counts from here. */
  receivedAt: number;
  /** The body as parsed: the launch's chain entry is fingerprinted over it. */
  payload: unknown;
  push: Push;
}

/**
 * Records a push and answers it. A delivery id already recorded launches nothing new: it is
 * answered from its record (200 naming the run, or 202 while its launch is pending), unless it
 * started no run (refused or skipped), when it is recorded and launched afresh.
 */
export async function deliverPush(ctx: ServerContext, trigger: Trigger, delivery: ReceivedPush): Promise<HookAnswer> {
  const sent = deliveryIdOf(delivery.headers);
  // A delivery without an id gets one here: its launch is still repeated safely, though a redelivery cannot be told from a new push.
  const deliveryId = sent !== undefined ? deliveryKey(sent) : newId('hkd');
  const recorded = await recordHookDelivery(ctx.sql, {
    trigger_id: trigger.id,
    delivery_id: deliveryId,
    named_by_sender: sent !== undefined,
    push: delivery.push,
    request: { query: delivery.query, body: delivery.payload },
    received_at: new Date(delivery.receivedAt),
  });
  const deadline = delivery.receivedAt + ctx.config.hookAnswerWait;
  if (!recorded.recorded) return answerFromRecord(ctx, await settledBy(ctx, recorded.record, deadline));

  const launch = launchOwn(ctx, trigger.id, deliveryId, recorded.effects);
  // The launch goes on after a 202: it never rejects, and what it leaves undone the outbox does.
  const outcome = ctx.config.hookAnswerWait > 0 ? await within(launch, deadline - Date.now()) : undefined;
  return answerOutcome(trigger.id, deliveryId, outcome);
}

/**
 * Carries out this server's own `hook.launch` just after the record's commit (services/effects.ts
 * carryOut's rule, with a turn to wait for): held from the dispatchers while it runs, completed
 * when done. Left to the dispatchers when one took it while it waited its turn, and handed to them
 * (due in a second) when it fails. Never rejects; undefined when this server did not launch it.
 */
async function launchOwn(ctx: ServerContext, triggerId: string, deliveryId: string, effects: string[]): Promise<FireOutcome | undefined> {
  return inLaunchTurn(ctx, async () => {
    let held: string[] = [];
    try {
      if (ctx.faults.fire('hook-launch-once')) throw new Error('injected fault: a recorded webhook push was not launched');
      held = await holdOwnEffects(ctx.sql, effects, HOLD_SECONDS);
      if (held.length === 0) return undefined;
      const outcome = await launchRecordedDelivery(ctx, triggerId, deliveryId);
      await completeEffects(ctx.sql, held);
      return outcome;
    } catch (err) {
      ctx.logger.warn({ triggerId, effects, err: (err as Error).message }, 'launching a recorded webhook push failed; the outbox dispatcher will retry');
      for (const id of held) await retryEffectLater(ctx.sql, id, 1, (err as Error).message).catch(() => undefined);
      return undefined;
    }
  });
}

/** The dispatcher's `hook.launch` (services/outbox.ts), in this server's turn with its own launches. */
export function launchOwedDelivery(ctx: ServerContext, triggerId: string, deliveryId: string): Promise<void> {
  return inLaunchTurn(ctx, async () => {
    await launchRecordedDelivery(ctx, triggerId, deliveryId);
  });
}

/**
 * The `hook.launch` effect: launches a recorded push as the trigger's owner with the delivery's
 * Idempotency-Key and settles its record with the outcome (the trigger's `last_error` is recorded
 * by the launch). A record settled already, or gone with its trigger, launches nothing. Answers
 * the outcome, or undefined when there was nothing to launch.
 */
async function launchRecordedDelivery(ctx: ServerContext, triggerId: string, deliveryId: string): Promise<FireOutcome | undefined> {
  const record = await getHookDelivery(ctx.sql, triggerId, deliveryId);
  if (!record || record.state !== 'pending' || !record.request) return undefined;
  const trigger = await getTrigger(ctx.sql, triggerId);
  if (!trigger) return undefined;
  const origin = deliveryOrigin(trigger, record.request.query, record.request.body);
  const outcome = await fireTrigger(ctx, trigger, origin, record.push, deliveryId, record.received_at);
  const settlement = settlementOf(outcome);
  await settleHookDelivery(ctx.sql, triggerId, deliveryId, settlement);
  // The run existed already (answered 200 naming it): an earlier attempt at this launch made it and
  // was lost before it settled the record. The run is this delivery's, so the trigger's last error goes.
  if ('answer' in outcome && outcome.answer.body.repeated) await noteOutcome(ctx, triggerId, record.received_at, null);
  return outcome;
}

function settlementOf(outcome: FireOutcome): HookDeliverySettlement {
  if ('refusal' in outcome) return { state: 'refused', reason: outcome.refusal.message, refusal_code: outcome.refusal.code, refusal_details: outcome.refusal.details };
  const body = outcome.answer.body;
  if (typeof body.run_id === 'string') return { state: 'launched', run_id: body.run_id };
  return { state: 'skipped', reason: String(body.reason) };
}

/** A launch's outcome as the sender is answered; undefined (not done within the wait) is 202. */
function answerOutcome(triggerId: string, deliveryId: string, outcome: FireOutcome | undefined): HookAnswer {
  if (outcome === undefined) {
    return { status: 202, body: { accepted: true, trigger_id: triggerId, delivery_id: deliveryId }, location: hookDeliveryPath(triggerId, deliveryId) };
  }
  if ('refusal' in outcome) throw outcome.refusal;
  return { ...outcome.answer, body: { ...outcome.answer.body, delivery_id: deliveryId } };
}

/** A redelivery's answer from the record (re-read until settled or the deadline). */
async function answerFromRecord(ctx: ServerContext, record: HookDeliveryRecord): Promise<HookAnswer> {
  const ids = { trigger_id: record.trigger_id, delivery_id: record.delivery_id };
  switch (record.state) {
    case 'pending':
      return answerOutcome(record.trigger_id, record.delivery_id, undefined);
    case 'launched': {
      const run = await getRun(ctx.sql, record.run_id!);
      return { status: 200, body: { run_id: record.run_id, status: run?.status, ...ids, repeated: true }, location: `/v1/runs/${record.run_id}` };
    }
    case 'skipped':
      return { status: 200, body: { skipped: true, reason: record.reason, ...ids } };
    case 'refused':
      throw new DomainError(record.refusal_code as ErrorCode, record.reason ?? 'the delivery started no run', record.refusal_details ?? {});
  }
}

/** The record once its launch has settled, or as it stands at the deadline. */
async function settledBy(ctx: ServerContext, record: HookDeliveryRecord, deadline: number): Promise<HookDeliveryRecord> {
  let current = record;
  while (current.state === 'pending' && Date.now() + SETTLED_POLL_MS < deadline) {
    await new Promise((resolve) => setTimeout(resolve, SETTLED_POLL_MS));
    current = (await getHookDelivery(ctx.sql, record.trigger_id, record.delivery_id)) ?? current;
  }
  return current;
}

/** Deliveries one sweeper pass deletes at most: a backlog goes over several passes, none long. */
const RETENTION_BATCH = 1000;

/**
 * --hook-delivery-retention: deletes deliveries settled longer ago than the retention, a batch a
 * sweeper pass (services/sweeper.ts). A redelivery of a deleted one is recorded afresh, and its
 * launch finds the run its first launch made by the same Idempotency-Key: still one run.
 */
export function sweepHookDeliveries(ctx: ServerContext): Promise<number> {
  return deleteSettledHookDeliveries(ctx.sql, new Date(Date.now() - ctx.config.hookDeliveryRetention * 1000), RETENTION_BATCH);
}
