import { targetSecretContext } from '../core/credentials/seal-contexts';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import { DELIVERY_ATTEMPTS, FAILURE_NOTE, retryDelayMs } from '../core/notifications/notification-kinds';
import { announcementOf } from '../core/notifications/notification-messages';
import type { DeliverySettings } from '../core/notifications/notification-settings';
import { sealedValueFault } from '../core/runs/run-secrets';
import type { Sealer } from '../core/credentials/seal';
import { sendAnnouncement, type Destination } from '../services/notifications/notification-senders';
import { deliveryId, notSentBecause } from '../services/notifications/notifications';
import type { Sql } from '../store/db';
import { nextAttemptState, recordAttempt, subjectsWithOpenDeliveries, type StoredTarget } from '../store/notifications';

export interface NotifyActivityDeps {
  sql: Sql;
  logger: Logger;
  /** Opens a target's sealed url and key at delivery, and only there. */
  sealer?: Sealer;
  delivery: DeliverySettings;
}

/**
 * What a lane of the delivery workflow asks for: the next delivery about this subject to this
 * target. A subject is a run, or a schedule's skipped fire (store/notifications.ts); the workflow
 * calls both runs, and its lanes carry either id alike.
 */
interface DeliverNextInput {
  targetId: string;
  subjectId: string;
  /** The wait before the first retry, doubled for each later one. */
  retryBaseMs: number;
}

/** What came of it: nothing left to deliver, a wait before the next attempt, or an attempt made and finished. */
export type DeliverNextResult = { none: true } | { waitMs: number } | { done: number };

/** Several lanes' next deliveries, one after another, in one activity. */
export interface DeliverBatchInput {
  targetId: string;
  /** The lanes' subjects, runs' ids and skipped fires' alike (the workflow calls every lane a run). */
  runIds: string[];
  retryBaseMs: number;
}

/** After this long a batch starts no further attempt: the runs left are returned untried (`later`). */
const BATCH_BUDGET_MS = 2000;

/** A retry due within this long is made now: timers and clocks of different servers never agree to the millisecond. */
const DUE_SLACK_MS = 1000;

/** What the delivery workflow does outside itself: each is idempotent, safe to run twice. */
export function createNotifyActivities(deps: NotifyActivityDeps) {
  const { sql, logger } = deps;

  /** The subjects (runs, skipped fires) with deliveries to this target still to make, oldest first: what a fresh workflow picks up. */
  async function openDeliveryRuns(targetId: string): Promise<string[]> {
    return subjectsWithOpenDeliveries(sql, targetId);
  }

  /** Opens the target's secrets; why not when one does not open here. */
  function destinationOf(target: StoredTarget): Destination | string {
    const destination: Destination = { kind: target.kind, ...(target.recipients ? { to: target.recipients } : {}) };
    for (const field of ['url', 'key'] as const) {
      const sealed = field === 'url' ? target.url_sealed : target.key_sealed;
      if (!sealed) continue;
      try {
        if (!deps.sealer) throw new Error('no sealer');
        destination[field] = deps.sealer.open(sealed, targetSecretContext(target.id, field));
      } catch (err) {
        return `not sent: ${sealedValueFault(`the target's ${field}`, deps.sealer, err)}`;
      }
    }
    return destination;
  }

  /**
   * The next delivery about this subject to this target, in event order, attempted once and recorded on
   * its row: arrived, failed (a refusal, a channel with no transport, or the fifth attempt),
   * retrying (with when the next attempt is due, returned as the wait), or skipped with why (the
   * target as it stands now does not hear the event, waits for its secret, or is gone). A retry
   * not yet due returns its wait without an attempt. A finished delivery is never touched again,
   * so a repeat is harmless; an attempt cut short by this server stopping records nothing and
   * fails, so Temporal makes it again elsewhere and it is not counted.
   */
  async function deliverNext(input: DeliverNextInput): Promise<DeliverNextResult> {
    const state = await nextAttemptState(sql, input.targetId, input.subjectId);
    if (!state) return { none: true };
    const seq = state.seq;
    const key = { target_id: input.targetId, subject_id: input.subjectId, seq };
    if (state.next_attempt_at) {
      const dueInMs = state.next_attempt_at.getTime() - Date.now();
      if (dueInMs > DUE_SLACK_MS) return { waitMs: dueInMs };
    }
    const { target, event } = state;
    const skip = (reason: string) => recordAttempt(sql, key, { status: 'skipped', attempts: state.attempts, reason }).then(() => ({ done: seq }));
    if (!target) return skip('not sent: the target no longer exists');
    if (!state.subject_status || !event) return skip('not sent: the run or its event no longer exists');
    const why = notSentBecause(target, event.kind, state.subject_status);
    if (why) return skip(why);
    const destination = destinationOf(target);
    if (typeof destination === 'string') return skip(destination);

    const attempt = state.attempts + 1;
    const note = state.earlier_failed ? FAILURE_NOTE : undefined;
    const announcement = announcementOf({ ...event, at: new Date(event.at) }, { id: deliveryId(key), sequence: seq, ...(note ? { note } : {}) });
    const ctx = Context.current();
    const result = await sendAnnouncement(deps.delivery, destination, announcement, ctx.cancellationSignal);
    if (ctx.cancellationSignal.aborted) {
      // This server is stopping: the attempt does not count, and the next server makes it.
      throw ApplicationFailure.retryable('the delivery attempt was cut short by a stopping server', 'AttemptCutShort');
    }
    if (result.ok) {
      await recordAttempt(sql, key, { status: 'arrived', attempts: attempt, reason: null });
      return { done: seq };
    }
    logger.info({ targetId: input.targetId, subjectId: input.subjectId, seq, attempt, reason: result.reason }, 'a notification delivery attempt failed');
    if (!result.retry || attempt >= DELIVERY_ATTEMPTS) {
      await recordAttempt(sql, key, { status: 'failed', attempts: attempt, reason: result.reason });
      return { done: seq };
    }
    const waitMs = retryDelayMs(input.retryBaseMs, attempt);
    await recordAttempt(sql, key, { status: 'retrying', attempts: attempt, reason: result.reason, nextAttemptAt: new Date(Date.now() + waitMs) });
    return { waitMs };
  }

  /**
   * The next delivery about each subject, one after another (so one batch is one attempt at a time to the
   * target), until the batch has taken two seconds; the runs not reached are `later`. Many lanes'
   * deliveries then cost the workflow one activity, not one each.
   */
  async function deliverBatch(input: DeliverBatchInput): Promise<Record<string, DeliverNextResult | { later: true }>> {
    const started = Date.now();
    const results: Record<string, DeliverNextResult | { later: true }> = {};
    for (const subjectId of input.runIds) {
      results[subjectId] = Date.now() - started > BATCH_BUDGET_MS ? { later: true } : await deliverNext({ targetId: input.targetId, subjectId, retryBaseMs: input.retryBaseMs });
    }
    return results;
  }

  return { openDeliveryRuns, deliverBatch };
}

export type NotifyActivities = ReturnType<typeof createNotifyActivities>;
