import { entrySecretContext } from '../../core/credentials/seal-contexts';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import {
  attachmentEventOf,
  deafnessOf,
  hearsHolds,
  isAlertEvent,
  isFailureStatus,
  type AnnouncedEvent,
  type AttachmentEvent,
  type StoredEntry,
} from '../../core/notifications/notification-kinds';
import { announcementOf } from '../../core/notifications/notification-messages';
import type { Run } from '../../core/runs/run';
import { getTargets, readOwedEventsUpTo, recordUnheardOwedEvents, settleOwedEvents, type EventSettlement, type NewDelivery, type OwedEvents, type RunEventRecord } from '../../store/notifications';
import { oweEffects, type Effect, type OwedEffect } from '../../store/outbox';
import type { Db } from '../../store/db';
import { getRun } from '../../store/runs';
import { getTemplate } from '../../store/templates';
import { notifyTaskQueue } from '../../workflows/ids';
import { deliveryQueued, NOTIFY_WORKFLOW, notifyWorkflowId, type NotifyWorkflowInput } from '../../workflows/definitions';
import type { ServerContext } from '../context';
import { carryOut } from '../effects';
import { sendAnnouncement, type Destination } from './notification-senders';
import { notSentBecause } from './notifications';
import { notifyExtensions } from './extension-notifiers';

/**
 * Records the events runs owe their notification targets (spec part B 6.1-6.3) and hands their
 * deliveries to Temporal. A run's start, hold and end are marked owed by the write that makes them
 * (store/runs.ts updateRunIf, store/notifications.ts markOwed), with an `event.record` effect in
 * the outbox (services/outbox.ts): at commit a dispatcher records the event and every one of the
 * run's events still owed before it, in event order, in one statement: one delivery per target
 * that hears each, and each marked recorded. An event recorded late (its first dispatcher lost) is
 * recorded skipped with why when the run had moved past it. Deliveries then go out through one
 * `notifyWorkflow` per target, handed to it by a `delivery.hand_off` effect; the run's own entries
 * and the server-wide channels are sent directly, best effort, by the server that recorded the event.
 */

/** A write the database refuses for a moment is asked again for this long (spec part B 6.3 rule 2). */
const RECORD_RETRY_MS = 5000;
/** An owed event recorded later than this after it was owed is checked for having been overtaken (spec part B 6.3 rule 5). */
const OWED_GRACE_SECONDS = 2;

/** Why an owed event is no longer worth sending when the sweep finds it (spec part B 6.3 rule 5). */
async function movedPast(ctx: ServerContext, run: Run, event: AnnouncedEvent, body: Record<string, unknown>): Promise<string | undefined> {
  switch (event) {
    case 'run.started':
      return run.finished_at ? `not sent: the run had already ended, ${run.status}, before its start could be announced` : undefined;
    case 'run.held':
      return run.status !== 'held' ? `not sent: the run was no longer held (${run.status}) when its hold could be announced` : undefined;
    case 'workflow.step_awaiting_approval': {
      const step = body.awaiting_step as { id: string; name: string } | undefined;
      const stepRun = step ? await getRun(ctx.sql, step.id) : undefined;
      return stepRun?.status !== 'held' ? `not sent: approval step ${step?.name ?? '?'} had already been decided before it could be announced` : undefined;
    }
    case 'run.finished':
    case 'run.needs_attention':
    case 'schedule.skipped':
      return undefined;
  }
}

async function withRetries<T>(work: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + RECORD_RETRY_MS;
  for (let wait = 100; ; wait = Math.min(wait * 2, 1000)) {
    try {
      return await work();
    } catch (err) {
      if (Date.now() + wait > deadline) throw err;
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}

/** Reads of the owed events one recording makes at most; each read after the first follows another server's progress. */
const RECORD_READS = 10;

/** Whether an `event.record` effect is carried out late: its first dispatcher was lost (spec part B 6.3 rule 5). */
const isLate = (effect: Pick<OwedEffect, 'created_at'>) => Date.now() - effect.created_at.getTime() > OWED_GRACE_SECONDS * 1000;

/**
 * Carries out a batch of `event.record` effects (services/outbox.ts); answers those that failed,
 * and those completed here already. Most runs are heard by nothing: one statement records the
 * events of all such runs in the batch and completes their effects (store/notifications.ts
 * recordUnheardOwedEvents), with nothing to decide. The rest are recorded one run at a time
 * (recordOwedEvents): a run heard, a late effect (its event may be one the run moved past,
 * recorded skipped with why), and every effect on a server that tells its own channels or
 * extension notifiers of every run, as it records their events.
 */
export async function recordOwedEventEffects(ctx: ServerContext, effects: OwedEffect[]): Promise<{ failed: Map<string, Error>; completed: Set<string> }> {
  const unheardFirst = tellsEveryRun(ctx) ? [] : effects.filter((effect) => !isLate(effect));
  const completed = new Set(
    await recordUnheardOwedEvents(ctx.sql, unheardFirst.map((effect) => ({ effectId: effect.id, runId: effect.subject, seq: Number(effect.payload.seq) }))).catch((err: Error) => {
      // One effect the statement cannot take must not hold up the rest: each goes its own way below.
      ctx.logger.warn({ effects: unheardFirst.length, err: err.message }, 'recording a batch of owed events failed; recording them one run at a time');
      return [];
    }),
  );
  const failed = new Map<string, Error>();
  await Promise.all(
    effects
      .filter((effect) => !completed.has(effect.id))
      .map((effect) => recordOwedEvents(ctx, effect.subject, Number(effect.payload.seq), isLate(effect)).catch((err: Error) => void failed.set(effect.id, err))),
  );
  return { failed, completed };
}

/**
 * Records a run's events owed up to `seq`, in event order, in one statement: each one's
 * deliveries queued (or skipped with why) and the event marked recorded, and the hand-off of the
 * deliveries owed; then the hand-offs made and the direct channels told. The events are read,
 * decided on, and settled only if they are still the ones owed: when another server recorded some
 * of them meanwhile, they are read again (that server's progress; an event, once recorded, is
 * never owed again). With `late`, an event the run has moved past is recorded skipped instead.
 */
async function recordOwedEvents(ctx: ServerContext, runId: string, seq: number, late: boolean): Promise<void> {
  const recorded = await withRetries(async () => {
    for (let read = 1; read <= RECORD_READS; read++) {
      const owed = await readOwedEventsUpTo(ctx.sql, runId, seq);
      if (!owed) return undefined;
      const decided = await decide(ctx, runId, owed, late);
      const handOffs = await settleOwedEvents(ctx.sql, runId, seq, decided.settled, decided.deliveries, deliveryHandOffs(decided.targets, runId));
      if (handOffs) return { run: owed.run!, events: decided.events, targets: decided.targets, handOffs };
    }
    throw new Error(`run ${runId}'s owed events changed under ${RECORD_READS} recordings in a row`);
  });
  if (!recorded) return;
  await carryOut(ctx, recorded.handOffs, 'handing notification deliveries to Temporal', async () => {
    await Promise.all(recorded.targets.map((targetId) => handOffDelivery(ctx, targetId, [runId])));
  });
  for (const { event, runEvent } of recorded.events) {
    announceDirect(ctx, recorded.run, event, runEvent).catch((err) => ctx.logger.warn({ runId, err: (err as Error).message }, 'direct notifications could not be sent'));
    if (event === 'run.finished') void notifyExtensions(ctx, recorded.run);
  }
}

/**
 * Whether this server tells something of runs whatever they are attached to: a server-wide
 * `--notify-<kind>` channel, or an extension's notifier. It tells them as it records their events.
 */
function tellsEveryRun(ctx: ServerContext): boolean {
  return ctx.config.delivery.channels.length > 0 || (ctx.extensions?.notifiers?.names().length ?? 0) > 0;
}

/**
 * What recording the owed events writes: each one settled once, in event order (recorded, or
 * skipped with why), one delivery per target that hears it, and the targets with deliveries
 * pending (their hand-offs); and the events recorded, for the direct channels told after.
 */
async function decide(ctx: ServerContext, runId: string, owed: OwedEvents, late: boolean) {
  const { run, hearing } = owed;
  if (run?.template_id && !owed.template_exists) {
    ctx.logger.warn({ runId, templateId: run.template_id }, 'the template this run came from no longer exists; its notification targets were passed over');
  }
  const settled: EventSettlement[] = [];
  const heard: { seq: number; event: AnnouncedEvent; targetIds: string[] }[] = [];
  const events: { event: AnnouncedEvent; runEvent: RunEventRecord }[] = [];
  for (const one of owed.owed) {
    const runEvent = one.run_event;
    if (!run || !runEvent) {
      settled.push({ seq: one.seq, state: 'skipped', reason: 'not sent: the run or its event no longer exists' });
      continue;
    }
    const event = one.event as AnnouncedEvent;
    const past = late ? await movedPast(ctx, run, event, runEvent.body) : undefined;
    if (past) {
      settled.push({ seq: one.seq, state: 'skipped', reason: past });
      continue;
    }
    const as = attachmentEventOf(event, run.status);
    // Each target once, however many of its attachments hear the event.
    const targetIds = [...new Set(hearing.filter((a) => a.event === as).map((a) => a.target_id))].sort();
    heard.push({ seq: one.seq, event, targetIds });
    settled.push({ seq: one.seq, state: 'recorded', reason: null });
    events.push({ event, runEvent });
  }
  const targets = await getTargets(ctx.sql, [...new Set(heard.flatMap((h) => h.targetIds))]);
  const deliveries: NewDelivery[] = heard.flatMap(({ seq: eventSeq, event, targetIds }) =>
    targetIds.flatMap((id) => {
      const target = targets.get(id);
      if (!target) return [];
      const why = notSentBecause(target, event, run!.status);
      return [{ target_id: id, subject_id: runId, seq: eventSeq, event, status: why ? 'skipped' : 'pending', reason: why ?? null } as NewDelivery];
    }),
  );
  const pending = [...new Set(deliveries.filter((row) => row.status === 'pending').map((row) => row.target_id))];
  return { settled, deliveries, targets: pending, events };
}

/** The hand-offs of a subject's pending deliveries to each target's delivery workflow. */
const deliveryHandOffs = (targetIds: string[], subjectId: string): Effect[] =>
  targetIds.map((target) => ({ effect: 'delivery.hand_off', subject: target, payload: { subject_id: subjectId } }));

/**
 * The hand-off of a subject's pending deliveries (a run's, or a skipped fire's) to each target's
 * delivery workflow, owed from `tx`: carried out by this server just after the commit
 * (handOffDelivery), or by the outbox dispatcher when this server does not.
 */
export function oweDeliveryHandOffs(tx: Db, targetIds: string[], subjectId: string): Promise<string[]> {
  return oweEffects(tx, deliveryHandOffs(targetIds, subjectId), true);
}

/** Hand-offs being sent, by server and target: subjects queued meanwhile go out together in the next signal. */
const handOffs = new WeakMap<ServerContext, Map<string, { subjects: Set<string>; sending: Promise<void> }>>();

/**
 * Starts the target's delivery workflow, or tells the one running of the deliveries about these
 * subjects (runs, skipped fires). While a signal to a target is on its way, later subjects wait and
 * go together in the next one, so a burst of events costs a few signals, not one each. A failure
 * rejects: the `delivery.hand_off` effects stay owed and the outbox dispatcher repeats them.
 */
export function handOffDelivery(ctx: ServerContext, targetId: string, subjectIds: string[]): Promise<void> {
  let byTarget = handOffs.get(ctx);
  if (!byTarget) handOffs.set(ctx, (byTarget = new Map()));
  const queued = byTarget.get(targetId);
  if (queued) {
    for (const subjectId of subjectIds) queued.subjects.add(subjectId);
    return queued.sending;
  }
  const entry = { subjects: new Set(subjectIds), sending: Promise.resolve() };
  byTarget.set(targetId, entry);
  const targets = byTarget;
  entry.sending = (async () => {
    try {
      while (entry.subjects.size > 0) {
        const subjects = [...entry.subjects];
        entry.subjects.clear();
        await signalDeliveries(ctx, targetId, subjects);
      }
    } finally {
      targets.delete(targetId);
    }
  })();
  return entry.sending;
}

async function signalDeliveries(ctx: ServerContext, targetId: string, subjectIds: string[]): Promise<void> {
  const input: NotifyWorkflowInput = { targetId, retryBaseMs: ctx.notificationRetryBaseMs };
  try {
    await ctx.temporal.workflow.signalWithStart(NOTIFY_WORKFLOW, {
      workflowId: notifyWorkflowId(targetId),
      taskQueue: notifyTaskQueue(ctx.config.poolQueue),
      args: [input],
      signal: deliveryQueued,
      signalArgs: [subjectIds],
      // A target's workflow closes when idle; a later delivery starts a new one.
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

/** Which of the run's own entries and the template's hear this event (spec part A 2.11 rule 1, part B 6.2 rules 5 and 8). */
function entryHears(entry: StoredEntry, event: AnnouncedEvent, status: string): boolean {
  if (event === 'run.started') return false;
  // A run's own incident, annotation and sms entries hear neither holds nor alerts (spec part B 6.2 rule 5).
  if (isAlertEvent(event) && !hearsHolds(entry.kind)) return false;
  if (entry.on_failure && !(event === 'run.finished' && isFailureStatus(status))) return false;
  return deafnessOf(entry.kind, event, status) === undefined;
}

/**
 * Direct, best-effort delivery beside targets (spec part B 6.2 rule 8): the run's own
 * `notifications`, its template's, and the server-wide `--notify-<kind>` channels for the events
 * `--notify-on` names. One attempt each, no record; a failure is logged without its destination.
 */
async function announceDirect(ctx: ServerContext, run: Run, event: AnnouncedEvent, runEvent: RunEventRecord): Promise<void> {
  const destinations: Destination[] = [];
  const open = (entries: StoredEntry[], ownerId: string) => {
    for (const entry of entries) {
      if (!entryHears(entry, event, run.status)) continue;
      try {
        const context = entrySecretContext(ownerId);
        destinations.push({
          kind: entry.kind,
          ...(entry.url_sealed ? { url: ctx.sealer!.open(entry.url_sealed, context) } : {}),
          ...(entry.key_sealed ? { key: ctx.sealer!.open(entry.key_sealed, context) } : {}),
          ...(entry.to ? { to: entry.to } : {}),
        });
      } catch {
        ctx.logger.warn({ runId: run.id, ownerId, kind: entry.kind }, 'a notification entry could not be opened with this server\'s encryption key; it was not sent');
      }
    }
  };
  open((run.notifications ?? []) as StoredEntry[], run.id);
  if (run.template_id) {
    const template = await getTemplate(ctx.sql, run.template_id);
    if (template) open(template.notifications as StoredEntry[], template.id);
  }
  const heard: AttachmentEvent = attachmentEventOf(event, run.status);
  // An alert is emailed whatever --notify-on says (spec part B 6.2 rule 8).
  const alertMail = isAlertEvent(event);
  for (const channel of ctx.config.delivery.channels) {
    if (!ctx.config.delivery.notifyOn.includes(heard) && !(alertMail && channel.kind === 'email')) continue;
    if (!deafnessOf(channel.kind, event, run.status)) destinations.push(channel);
  }
  if (destinations.length === 0) return;
  const announcement = announcementOf(runEvent);
  await Promise.all(
    destinations.map(async (destination) => {
      const result = await sendAnnouncement(ctx.config.delivery, destination, announcement);
      if (!result.ok) ctx.logger.warn({ runId: run.id, kind: destination.kind, event, reason: result.reason }, 'a direct notification was not delivered');
    }),
  );
}
