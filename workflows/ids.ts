/** Workflow ids are the record's id, so a repeated start is harmless and Temporal's UI shows API names. */
export const runWorkflowId = (runId: string) => runId;

/**
 * The Temporal task queue on which a run's tool is executed: the install's pool queue for the
 * default queue (""), `<pool queue>/<name>` for a named queue. Named queues live under the pool
 * queue so that installs sharing one Temporal namespace (each with its own --pool-queue) never
 * serve each other's queues. Workflows always run on the pool queue; only the executing activity
 * goes to this one. The one place the name mapping lives: the API routes runs with it and
 * `cairn worker --queue` polls with it.
 */
export function executionTaskQueue(poolQueue: string, queue: string): string {
  return queue === '' ? poolQueue : `${poolQueue}/${queue}`;
}

/**
 * The task queue notification delivery workflows (and their attempts, as local activities) run
 * on: apart from the pool's, so a slow receiver never takes a slot a run or a graph needs. `:`
 * keeps it clear of named queues (`<pool>/<name>`).
 */
export const notifyTaskQueue = (poolQueue: string) => `${poolQueue}:notify`;

/**
 * The task queue schedule workflows run on, polled only by `cairn serve` (its worker can launch
 * runs; a `cairn worker` cannot). `:` keeps it clear of named queues (`<pool>/<name>`).
 */
export const scheduleTaskQueue = (poolQueue: string) => `${poolQueue}:schedules`;
