import type { ServerContext } from './context';
import { findCancelOwedRuns, findParentsWithUnendedChildren, findUndeliveredStepDecisions, findUnstartedRuns } from '../store/runs';
import { endUnrunChildren } from './run-lifecycle';
import { compactRunCounts } from '../store/run-counts';
import { deliverStepDecision } from './decisions';
import { deliverCancel, startRunWorkflow } from './runs';
import { deliverSchedule } from './schedules';
import { findUndeliveredSchedules, writeUtcOnZonelessSchedules } from '../store/schedules';
import { sweepNotifications } from './notification-recorder';
import { sweepAttention } from './attention';
import { sweepProjectUpdates } from './projects';
import { sweepResultHistory } from './host-results';

/** Seconds a fresh submission or cancel is left to its own server before the sweeper steps in. */
const GRACE_SECONDS = 3;
const BATCH = 100;

/**
 * Finishes what a dead or failing server left owed: starts workflows for committed submissions
 * that never reached Temporal, tells workflows of approval-step decisions they never heard of,
 * ends the unrun steps of parents that ended without them, re-delivers cancels that have not
 * ended their run, records notification events still owed and hands on their deliveries
 * (services/notification-recorder.ts), records attention alerts once per condition
 * (services/attention.ts), and hands schedules to their workflows. Every
 * server runs one; all the work is idempotent, so two sweepers racing do no harm.
 */
export function startSweeper(ctx: ServerContext, intervalMs = 2000): { stop(): Promise<void>; sweepOnce(): Promise<void> } {
  let stopped = false;
  let running: Promise<void> = Promise.resolve();

  async function sweepOnce(): Promise<void> {
    // The run count deltas since the last sweep, folded into run_counts (store/run-counts.ts).
    await compactRunCounts(ctx.sql);
    await sweepSchedules();
    for (const run of await findUnstartedRuns(ctx.sql, GRACE_SECONDS, BATCH)) {
      if (stopped) return;
      try {
        if (run.cancel_requested_at) await deliverCancel(ctx, run);
        else await startRunWorkflow(ctx, run);
        ctx.logger.info({ runId: run.id }, 'sweeper started a run whose workflow was never started');
      } catch (err) {
        ctx.logger.warn({ runId: run.id, err: (err as Error).message }, 'sweeper could not start a run');
      }
    }
    for (const step of await findUndeliveredStepDecisions(ctx.sql, GRACE_SECONDS, BATCH)) {
      if (stopped) return;
      await deliverStepDecision(ctx, step);
    }
    for (const parent of await findParentsWithUnendedChildren(ctx.sql, GRACE_SECONDS, BATCH)) {
      if (stopped) return;
      await endUnrunChildren(ctx.sql, parent.id, 'not run: its parent ended first');
    }
    for (const run of await findCancelOwedRuns(ctx.sql, GRACE_SECONDS * 3, BATCH)) {
      if (stopped) return;
      try {
        await deliverCancel(ctx, run);
      } catch (err) {
        ctx.logger.warn({ runId: run.id, err: (err as Error).message }, 'sweeper could not deliver a cancel');
      }
    }
    await sweepNotifications(ctx, () => stopped);
    // Attention alerts past their threshold, once per condition (services/attention.ts).
    await sweepAttention(ctx, () => stopped).catch((err) => ctx.logger.warn({ err: (err as Error).message }, 'attention sweep failed'));
    // Git project updates a stopped server left owed (services/projects.ts).
    await sweepProjectUpdates(ctx, () => stopped);
    // --retain-history: ansible summaries past the newest N per host and per task (services/host-results.ts).
    await sweepResultHistory(ctx.sql, ctx.config.retainHistory).catch((err) => ctx.logger.warn({ err: (err as Error).message }, 'pruning result history failed'));
  }

  /**
   * Schedules: on the first sweep, writes UTC onto any stored without a zone by an earlier
   * release (spec part A 9.4), which are read in UTC until then; on every sweep, hands each
   * schedule whose workflow missed its latest save (never started, or not signalled) to it.
   */
  let zonesWritten = false;
  async function sweepSchedules(): Promise<void> {
    if (!zonesWritten) {
      const zoned = await writeUtcOnZonelessSchedules(ctx.sql);
      if (zoned.length) ctx.logger.info({ scheduleIds: zoned }, 'schedules stored without a time zone are read in UTC, now written on them');
      zonesWritten = true;
    }
    for (const schedule of await findUndeliveredSchedules(ctx.sql, GRACE_SECONDS, BATCH)) {
      if (stopped) return;
      try {
        await deliverSchedule(ctx, schedule);
        ctx.logger.info({ scheduleId: schedule.id }, 'sweeper handed a schedule to its workflow');
      } catch (err) {
        ctx.logger.warn({ scheduleId: schedule.id, err: (err as Error).message }, 'sweeper could not hand a schedule to its workflow');
      }
    }
  }

  const timer = setInterval(() => {
    running = running.then(sweepOnce).catch((err) => ctx.logger.warn({ err: (err as Error).message }, 'sweep failed'));
  }, intervalMs);

  return {
    sweepOnce,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
