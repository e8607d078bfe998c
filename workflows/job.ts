import { proxyActivities } from '@temporalio/workflow';
import type { JobActivities } from '../activities/jobs';
import type { JobWorkflowInput } from './definitions';

/**
 * One job the API asks of a worker (activities/jobs.ts): the activity on the execution task
 * queue the job names, heartbeating; a worker lost mid-job is replaced by another attempt, and a
 * failure the caller reads (typed) is not retried. Its answer is the payload id the activity wrote.
 */
export async function jobWorkflow(input: JobWorkflowInput): Promise<string> {
  const jobs = proxyActivities<JobActivities>({
    taskQueue: input.taskQueue,
    startToCloseTimeout: '10m',
    heartbeatTimeout: '30s',
    retry: { initialInterval: '1s', maximumInterval: '10s', maximumAttempts: 3, nonRetryableErrorTypes: ['InventoryError', 'JobFailed', 'GitError', 'JobInputGone'] },
  });
  const run = jobs[input.job] as (job: unknown) => Promise<string>;
  return run(input.input);
}
