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
