import { condition, continueAsNew, patched, proxyLocalActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { ScheduleActivities } from '../activities/schedules';
import { SCHEDULE_HISTORY_EVENTS, scheduleChanged, type ScheduleWorkflowInput } from './definitions';

/** Fires one workflow run makes before it continues as new, so its history stays short. */
const FIRES_PER_RUN = 100;

/**
 * Histories recorded before this change continued as new only after FIRES_PER_RUN fires; from it
 * on, a run also continues as new when Temporal suggests it or its history reaches
 * SCHEDULE_HISTORY_EVENTS, checked at each wake (a save is a wake that fires nothing).
 */
const BOUNDED_HISTORY = 'schedule-bounded-history';

/** Whether this run's history is as long as it should grow: Temporal says so, or it reached the bound. */
function historyFull(): boolean {
  const { continueAsNewSuggested, historyLength } = workflowInfo();
  return continueAsNewSuggested || historyLength >= SCHEDULE_HISTORY_EVENTS;
}

/**
 * One schedule, for as long as it is enabled: plan the next fire, sleep on a timer until then,
 * fire (the activity that fires also plans the next one), and continue as new when the history is
 * full (historyFull) or after FIRES_PER_RUN fires, carrying the last fire. A save reaches it as
 * `scheduleChanged` (it plans again); a delete as a cancel (it ends).
 * It ends by itself when the schedule is disabled, gone or its rule has no fire left.
 *
 * The catch-up rule: a timer that comes due while no server runs fires when one is back, so the
 * fire the workflow slept towards is made once, late; the next is planned after the current time,
 * so the times missed meanwhile are never fired in a burst. A fire is identified by the schedule
 * and its time (the run's Idempotency-Key), so replaying this code after a crash never fires twice.
 */
export async function scheduleWorkflow(input: ScheduleWorkflowInput): Promise<void> {
  const { planFire, fireSchedule } = proxyLocalActivities<ScheduleActivities>({
    startToCloseTimeout: '1m',
    // A fire must outlast a database or Temporal outage: retry until it lands.
    retry: { initialInterval: '1s', maximumInterval: '30s' },
  });
  let changed = false;
  setHandler(scheduleChanged, () => {
    changed = true;
  });
  let after = input.after ?? null;
  let fires = 0;
  let plan: Awaited<ReturnType<ScheduleActivities['planFire']>> | undefined;
  for (;;) {
    // Each wake: a fire, a save, or the start. The new run plans again from `after`.
    if (patched(BOUNDED_HISTORY) && historyFull()) await continueAsNew<typeof scheduleWorkflow>({ scheduleId: input.scheduleId, after: after ?? undefined });
    if (plan === undefined || changed) {
      changed = false;
      plan = await planFire(input.scheduleId, after);
      // Saved again while planning: plan once more.
      if (changed) continue;
    }
    if (!plan) return;
    const wait = plan.fireAt - Date.now();
    if (wait > 0 && (await condition(() => changed, wait))) continue;
    // `next` is planned by the same activity, after the fire. A save during the fire sets `changed`.
    const { outcome, next } = await fireSchedule(input.scheduleId, plan.fireAt, plan.revision, after);
    if (outcome !== 'stale') {
      after = plan.fireAt;
      fires++;
    }
    plan = next;
    if (fires >= FIRES_PER_RUN) await continueAsNew<typeof scheduleWorkflow>({ scheduleId: input.scheduleId, after: after ?? undefined });
  }
}
