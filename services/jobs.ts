import type { JobSandbox } from '../activities/sandboxed-job';
import { jobSandbox } from '../workers/sandbox-setup';
import type { ServerContext } from './context';

/** Where this server runs its sandboxed jobs (activities/sandboxed-job.ts): the run sandbox of its settings, prepared once. */
export function jobsOf(ctx: Pick<ServerContext, 'config' | 'logger'>): Promise<JobSandbox> {
  return jobSandbox(ctx.config, (line) => ctx.logger.info(line));
}
