import type { ServerContext } from './context';
import { findCancelOwedRuns, findParentsWithUnendedChildren, findUndeliveredStepDecisions, findUnstartedRuns } from '../store/runs';
import { endUnrunChildren } from './run-lifecycle';
import { deliverStepDecision } from './decisions';
import { deliverCancel, startRunWorkflow } from './runs';

/** Seconds a fresh submission or cancel is left to its own server before the sweeper steps in. */
const GRACE_SECONDS = 3;
const BATCH = 100;

/**
 * Finishes what a dead or failing server left owed: starts workflows for committed submissions
 * that never reached Temporal, tells workflows of approval-step decisions they never heard of,
 * ends the unrun steps of parents that ended without them, and re-delivers cancels that have not
 * ended their run. Every
 * server runs one; all the work is idempotent, so two sweepers racing do no harm.
 */
export function startSweeper(ctx: ServerContext, intervalMs = 2000): { stop(): Promise<void>; sweepOnce(): Promise<void> } {
  let stopped = false;
  let running: Promise<void> = Promise.resolve();

  async function sweepOnce(): Promise<void> {
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
