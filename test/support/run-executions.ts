import type { Client } from '@temporalio/client';

export interface RunExecutions {
  /** The task queue the run's `executeRun` activity was scheduled on ('' when none was). */
  taskQueue: string;
  /** The identity (`<pid>@<host>`) of each worker that started an `executeRun` attempt, in order. */
  startedBy: string[];
}

/**
 * Where a run's tool was executed, from its workflow history. The run's record ends inside the
 * `executeRun` activity, before its completion reaches Temporal, and Temporal writes
 * ActivityTaskStarted only with that completion (or the attempt's failure): a history read just as
 * the run reads ended may not hold it yet, so this reads until every scheduled execution has its start.
 */
export async function runExecutions(temporal: Client, runId: string, timeoutMs = 30_000): Promise<RunExecutions> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const events = (await temporal.workflow.getHandle(runId).fetchHistory()).events ?? [];
    const scheduled = events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'executeRun');
    const ids = new Set(scheduled.map((e) => String(e.eventId)));
    const starts = events.filter((e) => ids.has(String(e.activityTaskStartedEventAttributes?.scheduledEventId)));
    const answer = {
      taskQueue: scheduled[0]?.activityTaskScheduledEventAttributes?.taskQueue?.name ?? '',
      startedBy: starts.map((e) => e.activityTaskStartedEventAttributes!.identity ?? ''),
    };
    if ((scheduled.length > 0 && starts.length >= scheduled.length) || Date.now() > deadline) return answer;
    await new Promise((r) => setTimeout(r, 200));
  }
}
