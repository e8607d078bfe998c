import {
  ActivityCancellationType,
  ActivityFailure,
  CancellationScope,
  isCancellation,
  condition,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
  TimeoutFailure,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { ExecutionOutcome } from '../core/runs/run-outcome';
import type { RunActivities } from '../activities/runs';
import { planDecided, SEARCH_ATTRIBUTES, SEARCH_ATTRIBUTES_PATCH, type RunWorkflowInput } from './definitions';

const TEN_YEARS_MS = 10 * 365 * 24 * 3600 * 1000;
const TIMER_FIRED = Symbol('timer fired');
/** Runs held at the plan gate whose cancel came as the hold was made still record their end. */
const HELD_CANCEL_PATCH = 'cairn-held-run-cancel';
/** The run's end status is taken from the execution that recorded it, not read back. */
const STATUS_FROM_EXECUTION_PATCH = 'cairn-status-from-execution';
/**
 * Workflows started from this release on record this one marker and take, without checking them:
 * - the new side of the earlier changes: the status tracking (SEARCH_ATTRIBUTES_PATCH), the held
 *   run's cancel (HELD_CANCEL_PATCH), the end status from the execution (STATUS_FROM_EXECUTION_PATCH);
 * - the run's timeout as the execution activity's schedule-to-close timeout, kept by Temporal,
 *   rather than a workflow timer raced against it.
 * One marker instead of three, and no timer: a billable action and three history events fewer per
 * run. Workflows recorded before find no such marker and replay the paths they took, each behind
 * its own check.
 */
const CURRENT_PATCH = 'cairn-run-2026-11';

/**
 * Whether an execution ended because the run's timeout ran out: Temporal timed the activity out,
 * mid-attempt or with its next retry due past the timeout.
 */
const timedOut = (err: unknown) =>
  err instanceof ActivityFailure && (err.retryState === 'TIMEOUT' || (err.cause instanceof TimeoutFailure && err.cause.timeoutType === 'SCHEDULE_TO_CLOSE'));

/**
 * One run: execute the tool on the run's queue, within its timeout, then record the end once.
 * Every run and step started from release 2026-12 on: the current path, with no `patched()` check
 * and so no marker (a new workflow type per release on the hot path, docs/architecture.md,
 * "Changing workflow code"): two history events fewer per run than `runWorkflow`'s marker and its
 * `TemporalChangeVersion` upsert.
 */
export async function runWorkflowV2(input: RunWorkflowInput): Promise<void> {
  return runToItsEnd(input, () => true);
}

/**
 * The run workflow as releases before 2026-12 started it, for those still in flight: each change
 * since is taken behind its own `patched()` check, so every recorded history replays its own path.
 */
export async function runWorkflow(input: RunWorkflowInput): Promise<void> {
  return runToItsEnd(input, patched);
}

/** The run workflow's body; `hasPatch` answers whether a change's new path is taken (patched(), or always). */
async function runToItsEnd(input: RunWorkflowInput, hasPatch: (patchId: string) => boolean): Promise<void> {
  const current = hasPatch(CURRENT_PATCH);
  const timeoutOnActivity = current && input.timeoutSeconds > 0;
  const { executeRun } = proxyActivities<RunActivities>({
    // The run's queue: a worker serving it executes the tool; until one polls, the run stays pending.
    taskQueue: input.executionQueue,
    startToCloseTimeout: input.timeoutSeconds > 0 ? (input.timeoutSeconds + 300) * 1000 : TEN_YEARS_MS,
    heartbeatTimeout: input.leaseSeconds * 1000,
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    // Each retry is a requeue (spec part A 3.1: the only way a lost worker's run moves): the next
    // worker polling the queue runs it again from the top. No attempt count bounds it; the run's
    // timeout below does, and a cancel. A retry policy is not part of what a replay compares, so
    // workflows in flight keep the policy they were scheduled with and replay unchanged.
    retry: { initialInterval: '1s', maximumInterval: '10s', nonRetryableErrorTypes: ['RunNotFound'] },
    // Counted from the execution's scheduling, across its requeues, as the timer was. A tool still
    // running then is stopped by its worker at its next heartbeat, which Temporal answers "not found".
    ...(timeoutOnActivity && { scheduleToCloseTimeout: input.timeoutSeconds * 1000 }),
  });
  const { finishRun, runStatus } = proxyLocalActivities<RunActivities>({
    startToCloseTimeout: '30s',
    // Recording the end must outlast a database outage: retry until it lands.
    retry: { initialInterval: '500ms', maximumInterval: '10s' },
  });

  // A terraform or opentofu run held at its plan gate waits for a decision, then executes again.
  let decided = false;
  setHandler(planDecided, () => void (decided = true));

  // The activity records every end it sees (exit, failure to start); the workflow records the
  // ends only it knows of: the timeout, a cancel, and an execution that could not complete.
  // Each execution is raced against the run's timeout on its own; the wait for a decision is not.
  const execute = async (): Promise<{ outcome?: ExecutionOutcome; held?: true; ended?: string }> => {
    const execution = new CancellationScope();
    try {
      const running = execution.run(() => executeRun(input.runId));
      if (input.timeoutSeconds > 0 && !timeoutOnActivity) {
        const timer = sleep(input.timeoutSeconds * 1000).then(
          () => TIMER_FIRED,
          // Cancelled along with the workflow: the execution's own cancellation reports that.
          () => new Promise<never>(() => {}),
        );
        const first = await Promise.race([running, timer]);
        if (first === TIMER_FIRED) {
          execution.cancel();
          await running.catch(() => undefined);
          return { outcome: { kind: 'timed_out', seconds: input.timeoutSeconds } };
        }
        return answered(first as Exclude<typeof first, symbol>);
      }
      return answered(await running);
    } catch (err) {
      if (timeoutOnActivity && timedOut(err)) return { outcome: { kind: 'timed_out', seconds: input.timeoutSeconds } };
      if (isCancellation(err)) return { outcome: { kind: 'canceled' } };
      const cause = err instanceof ActivityFailure && err.cause ? err.cause.message : (err as Error).message;
      return { outcome: { kind: 'lost', message: `execution could not complete: ${cause}` } };
    }
  };

  const answered = (answer: Awaited<ReturnType<typeof executeRun>>) => (answer === 'held' ? { held: true as const } : answer ? { ended: answer.ended } : {});

  // The ops window (the Temporal UI and CLI for execution insight): `CairnRunStatus`, set at the
  // workflow's start, follows the run's recorded status when the workflow sees it change (held at
  // the plan gate, ended), read from the store, which alone decides it. Workflows recorded before the attribute existed replay without these steps.
  // Input first: a workflow started with tracking off checks no patch for it.
  const tracksStatus = input.tracksRunStatus !== false && (current || hasPatch(SEARCH_ATTRIBUTES_PATCH));
  const publishStatus = async (known?: string) => {
    if (!tracksStatus) return;
    const status = known ?? (await runStatus(input.runId));
    if (status) upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.runStatus, value: status }]);
  };

  let result = await execute();
  if (result.held) {
    // A cancel can arrive while the execution that held the run is still finishing: the execution
    // returns `held` in an already canceled workflow. Publishing the status must not throw then,
    // or the workflow would end canceled with the run still recorded held.
    const cancelAfterHold = current || hasPatch(HELD_CANCEL_PATCH);
    if (!cancelAfterHold) await publishStatus();
    try {
      if (cancelAfterHold) await CancellationScope.nonCancellable(() => publishStatus());
      await condition(() => decided);
      result = await execute();
    } catch (err) {
      if (!isCancellation(err)) throw err;
      result = { outcome: { kind: 'canceled' } };
    }
  }
  const final = result.outcome;
  if (final) await CancellationScope.nonCancellable(() => finishRun(input.runId, final));
  // The execution that recorded the end says what it recorded: no read of the store (a local
  // activity, a billable action on Temporal Cloud) is needed for it.
  const known = result.ended && (current || hasPatch(STATUS_FROM_EXECUTION_PATCH)) ? result.ended : undefined;
  await CancellationScope.nonCancellable(() => publishStatus(known));
}
