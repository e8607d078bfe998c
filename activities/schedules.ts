import type { ServerContext } from '../services/context';
import type { StartLater } from '../services/runs/runs';
import { fireAndPlan, planNextFire, type FireOutcome, type FirePlan } from '../services/schedules/schedules';

/**
 * What a schedule's workflow does to the world, as local activities of the `cairn serve` that runs
 * it (services/schedules.ts): plan the next fire from the stored schedule, and make one fire and
 * plan the one after it, in one activity so a fire costs the workflow one task. Both are safe to
 * run again: a fire is identified by its schedule and time. `startLater`: how fires' runs are
 * started after the fire (workers/fires-first.ts).
 */
export function createScheduleActivities(ctx: ServerContext, startLater?: StartLater) {
  return {
    planFire: (scheduleId: string, after: number | null): Promise<FirePlan | null> => planNextFire(ctx, scheduleId, after),
    fireSchedule: (scheduleId: string, fireAt: number, revision: number, after: number | null): Promise<{ outcome: FireOutcome; next: FirePlan | null }> =>
      fireAndPlan(ctx, scheduleId, fireAt, revision, after, startLater),
  };
}

export type ScheduleActivities = ReturnType<typeof createScheduleActivities>;
