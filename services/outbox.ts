import { claimDueEffects, completeEffects, OUTBOX_CHANNEL, retryEffectLater, type EffectKind, type OwedEffect } from '../store/outbox';
import { getRun } from '../store/runs';
import type { ServerContext } from './context';
import { deliverPlanDecision, deliverStepDecision } from './runs/decisions';
import { handOffDelivery, recordOwedEventEffects } from './notifications/notification-recorder';
import { startProjectUpdateWorkflow } from './projects';
import { startKeyRotationWorkflow } from './federation/keys';
import type { KeyRotationWorkflowInput, PullRequestWorkflowInput } from '../workflows/definitions';
import { startReport } from './schedules/review';
import { endUnrunChildren } from './runs/run-lifecycle';
import { deliverCancel, startOwedRun } from './runs/runs';
import { deliverSchedule } from './schedules/schedules';
import { launchOwedDelivery } from './schedules/hook-deliveries';

/**
 * The outbox dispatcher (schema/023_outbox.sql, store/outbox.ts): every server runs one. It is
 * woken at the commit of every write that owes an effect now (NOTIFY), and looks every
 * `pollMs` for effects whose writer's grace, lease or backoff has run out. Each effect is taken
 * under a lease (no other dispatcher takes it meanwhile), carried out, and then removed.
 *
 * One error policy for every kind: an effect that fails is tried again after a backoff (1 s,
 * doubling to a minute) for as long as it takes, with its last error kept on its row and logged;
 * the diagnostics check reports effects owed for long. Every effect is safe to repeat, so a
 * dispatcher lost mid-effect (its lease runs out) only makes it late.
 */

/**
 * Carries out a batch of one kind's effects; answers those that failed, with their errors, and any
 * it completed itself (its last write removed them from the outbox, sparing the dispatcher's).
 */
type Handler = (ctx: ServerContext, effects: OwedEffect[]) => Promise<{ failed: Map<string, Error>; completed?: ReadonlySet<string> }>;

/** A handler carrying out each effect on its own. */
const eachOf =
  (work: (ctx: ServerContext, effect: OwedEffect) => Promise<void>): Handler =>
  async (ctx, effects) => {
    const failed = new Map<string, Error>();
    await Promise.all(
      effects.map((effect) =>
        work(ctx, effect).catch((err: Error) => {
          failed.set(effect.id, err);
        }),
      ),
    );
    return { failed };
  };

const HANDLERS: Record<EffectKind, Handler> = {
  'run.start': eachOf(async (ctx, { subject }) => {
    await startOwedRun(ctx, subject);
  }),
  'run.cancel': eachOf((ctx, { subject }) => deliverCancel(ctx, subject)),
  'run.end_children': eachOf((ctx, { subject, payload }) => endUnrunChildren(ctx.sql, subject, String(payload.message))),
  'step.decided': eachOf(async (ctx, { subject }) => {
    const step = await getRun(ctx.sql, subject);
    if (step?.parent_run_id) await deliverStepDecision(ctx, step);
  }),
  'plan.decided': eachOf((ctx, { subject }) => deliverPlanDecision(ctx, subject)),
  'schedule.hand_off': eachOf((ctx, { subject }) => deliverSchedule(ctx, subject)),
  'event.record': recordOwedEventEffects,
  // One signal per target for every subject (run, skipped fire) owed to it in the batch.
  'delivery.hand_off': async (ctx, effects) => {
    const failed = new Map<string, Error>();
    const byTarget = new Map<string, OwedEffect[]>();
    for (const effect of effects) byTarget.set(effect.subject, [...(byTarget.get(effect.subject) ?? []), effect]);
    await Promise.all(
      [...byTarget].map(([targetId, owed]) =>
        handOffDelivery(ctx, targetId, owed.map((e) => String(e.payload.subject_id))).catch((err: Error) => {
          for (const effect of owed) failed.set(effect.id, err);
        }),
      ),
    );
    return { failed };
  },
  'project.update': eachOf((ctx, { subject }) => startProjectUpdateWorkflow(ctx, subject)),
  'federation.rotate': eachOf((ctx, { payload }) => startKeyRotationWorkflow(ctx, payload as unknown as KeyRotationWorkflowInput)),
  'hook.launch': eachOf((ctx, { subject, payload }) => launchOwedDelivery(ctx, subject, String(payload.delivery_id))),
  'pull_request.report': eachOf((ctx, { subject, payload }) => startReport(ctx, payload as unknown as PullRequestWorkflowInput, subject)),
};

/** Effects taken at once by one dispatcher. */
const BATCH = 100;
/** How long a taken effect is leased before another dispatcher may take it again. */
const LEASE_SECONDS = 60;
const backoffSeconds = (attempts: number) => Math.min(60, 2 ** Math.max(0, attempts - 1));

/** Takes what is due and carries it out until nothing is left; answers how many effects were taken. */
async function drain(ctx: ServerContext, stopped: () => boolean): Promise<number> {
  let taken = 0;
  while (!stopped()) {
    const effects = await claimDueEffects(ctx.sql, BATCH, LEASE_SECONDS);
    if (effects.length === 0) break;
    taken += effects.length;
    // A batch short of full took all that was due: no further claim is needed to find the outbox
    // empty (a round trip per wake). What is owed meanwhile wakes the dispatcher again.
    const more = effects.length === BATCH;
    const byKind = new Map<EffectKind, OwedEffect[]>();
    for (const effect of effects) byKind.set(effect.effect, [...(byKind.get(effect.effect) ?? []), effect]);
    const failed = new Map<string, Error>();
    const completed = new Set<string>();
    const failing = (owed: OwedEffect[], err: Error): Awaited<ReturnType<Handler>> => ({ failed: new Map(owed.map((e) => [e.id, err])) });
    // Kinds side by side; a run's start before its cancel is not needed (each reads the run as it is).
    await Promise.all(
      [...byKind].map(async ([kind, owed]) => {
        const handler = HANDLERS[kind];
        const outcome = handler ? await handler(ctx, owed).catch((err: Error) => failing(owed, err)) : failing(owed, new Error(`no handler for ${kind}`));
        for (const [id, err] of outcome.failed) failed.set(id, err);
        for (const id of outcome.completed ?? []) completed.add(id);
      }),
    );
    await completeEffects(
      ctx.sql,
      effects.filter((e) => !failed.has(e.id) && !completed.has(e.id)).map((e) => e.id),
    );
    for (const effect of effects) {
      const err = failed.get(effect.id);
      if (!err) continue;
      const retryIn = backoffSeconds(effect.attempts);
      ctx.logger.warn({ effect: effect.effect, subject: effect.subject, attempts: effect.attempts, retryInSeconds: retryIn, err: err.message }, 'an owed effect failed; it is tried again');
      await retryEffectLater(ctx.sql, effect.id, retryIn, err.message);
    }
    if (!more) break;
  }
  return taken;
}

export interface OutboxDispatcher {
  stop(): Promise<void>;
  /** Carries out everything due now (tests wait on it). */
  drainNow(): Promise<void>;
}

/** Starts this server's dispatcher: woken by NOTIFY at every commit that owes an effect now, and every `pollMs`. */
export async function startOutboxDispatcher(ctx: ServerContext, pollMs = 1000): Promise<OutboxDispatcher> {
  let stopped = false;
  let running: Promise<void> = Promise.resolve();
  let again = false;
  let busy = false;
  const wake = () => {
    if (stopped) return;
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    running = (async () => {
      try {
        do {
          again = false;
          await drain(ctx, () => stopped);
        } while (again && !stopped);
      } catch (err) {
        ctx.logger.warn({ err: (err as Error).message }, 'the outbox could not be read; it is read again shortly');
      } finally {
        busy = false;
      }
    })();
  };
  const { unlisten } = await ctx.sql.listen(OUTBOX_CHANNEL, wake);
  const timer = setInterval(wake, pollMs);
  wake();
  return {
    async drainNow() {
      await running;
      await drain(ctx, () => stopped);
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      await unlisten().catch(() => undefined);
      await running;
    },
  };
}
