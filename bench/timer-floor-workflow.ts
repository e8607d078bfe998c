// A bare Temporal workflow for the schedule benchmark's floor (bench/schedules.ts): it sleeps on a
// timer to a time, then calls one local activity, as a schedule's workflow does before it fires.
import { proxyLocalActivities, sleep } from '@temporalio/workflow';

const { reached } = proxyLocalActivities<{ reached(at: number): Promise<void> }>({ startToCloseTimeout: '1m' });

export async function timerFloorWorkflow(at: number): Promise<void> {
  await sleep(Math.max(0, at - Date.now()));
  await reached(at);
}
