import { createGraphActivities } from '../activities/graphs';
import { workflowBundle } from './bundle';
import { startExecutionWorker, type ExecutionWorkerOptions, type RunningWorker } from './execution';

/**
 * The worker for the default pool (`serve`'s own, or `cairn worker` without --queue): it runs the
 * workflows of every run, with the graph's store writes as local activities, and executes the
 * tools of runs on the default queue.
 */
export async function startPoolWorker(options: ExecutionWorkerOptions): Promise<RunningWorker> {
  const bundle = await workflowBundle({
    info: (line) => options.logger.info(line),
    warn: (line) => options.logger.warn(line),
  });
  return startExecutionWorker(options, {
    queue: '',
    taskQueue: options.poolQueue,
    workflows: { workflowBundle: bundle, activities: createGraphActivities({ sql: options.sql }) },
  });
}
