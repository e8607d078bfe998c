import { ActivityFailure, ApplicationFailure, WorkflowFailedError } from '@temporalio/client';
import { newId } from '../core/ids';
import { deletePayloads, putPayload, readPayload } from '../store/job-payloads';
import { executionTaskQueue } from '../workflows/ids';
import { JOB_WORKFLOW, type JobWorkflowInput } from '../workflows/definitions';
import type { ServerContext } from './context';

/**
 * Jobs this server asks of a worker and waits for (workflows/job.ts, activities/jobs.ts): reading
 * an inventory with Ansible's parts, a dynamic source's script, a project's tree. Each is a
 * Temporal workflow whose activity runs on the execution queue the job names, sandboxed, on
 * whichever worker takes it; the API process runs nothing itself. What is large travels through
 * job payloads in PostgreSQL (store/job-payloads.ts).
 */

/** A job's failure its caller reads: its kind (`InventoryError`, `JobFailed`, `GitError`, `JobInputGone`) and message. */
export class JobRefused extends Error {
  constructor(
    readonly type: string,
    message: string,
    /** For `JobFailed`: the last of what the tool printed to standard error, and its exit code. */
    readonly printed: string = '',
  ) {
    super(message);
  }
}

/** How long a caller waits for a job: the longest job (a script's own timeout) and a margin. */
const JOB_WAIT_MS = 15 * 60 * 1000;

/** Runs the job on a worker of `queue` ("" the default pool) and answers its answer's text; a failure it reads is a JobRefused. */
export async function runJob(ctx: Pick<ServerContext, 'temporal' | 'config' | 'sql' | 'pool'>, job: JobWorkflowInput['job'], input: unknown, queue = ''): Promise<string> {
  const db = payloadDb(ctx);
  let answerId: string;
  try {
    answerId = await ctx.temporal.workflow.execute<(input: JobWorkflowInput) => Promise<string>>(JOB_WORKFLOW, {
      workflowId: newId('job'),
      taskQueue: ctx.config.poolQueue,
      args: [{ job, input, taskQueue: executionTaskQueue(ctx.config.poolQueue, queue) }],
      workflowExecutionTimeout: JOB_WAIT_MS,
    });
  } catch (err) {
    const failure = err instanceof WorkflowFailedError && err.cause instanceof ActivityFailure ? err.cause.cause : undefined;
    if (failure instanceof ApplicationFailure && failure.type) {
      const details = failure.details?.[0] as { printed?: string } | undefined;
      throw new JobRefused(failure.type, failure.message, details?.printed ?? '');
    }
    throw err;
  }
  try {
    const answer = await readPayload(db, answerId);
    if (answer === undefined) throw new Error(`the answer of a job (${job}) is gone`);
    return answer;
  } finally {
    await deletePayloads(db, [answerId]);
  }
}

/** Where job payloads are kept: outside any transaction the caller is in, so the worker sees them. */
const payloadDb = (ctx: Pick<ServerContext, 'sql' | 'pool'>) => ctx.pool ?? ctx.sql;

/** Runs `work` with `body` as a job payload, removed after. */
export async function withPayload<T>(ctx: Pick<ServerContext, 'sql' | 'pool'>, body: string, work: (payloadId: string) => Promise<T>): Promise<T> {
  const id = await putPayload(payloadDb(ctx), body);
  try {
    return await work(id);
  } finally {
    await deletePayloads(payloadDb(ctx), [id]);
  }
}
