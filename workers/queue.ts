import { startExecutionWorker, type ExecutionWorkerOptions, type RunningWorker } from './execution';
import { executionTaskQueue } from '../workflows/ids';

/**
 * A worker for one named queue (`cairn worker --queue NAME`, Team tier): it executes the tools of
 * runs submitted to that queue and nothing else. Their workflows stay on the pool, so it loads no
 * workflow code.
 */
export function startQueueWorker(options: ExecutionWorkerOptions, queue: string): Promise<RunningWorker> {
  return startExecutionWorker(options, { queue, taskQueue: executionTaskQueue(options.poolQueue, queue) });
}
