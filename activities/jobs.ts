import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { InventoryError, type InventoryFormat } from '../core/ansible/inventory';
import { checkoutDir } from '../core/project-paths';
import type { Sql } from '../store/db';
import { getInventory } from '../store/inventories';
import { getInventorySource } from '../store/inventory-sources';
import { putPayload, readPayload } from '../store/job-payloads';
import { GitError } from '../core/project-paths';
import { archiveCommit, readTree } from '../runtime/git';

/** The largest project tree sent to a relay worker, as a tar archive. */
export const MAX_PROJECT_ARCHIVE_BYTES = 32 * 1024 * 1024;
import { inventoryHostNames, resolveComposed, resolveInventory, runInventoryScript, yamlLayoutAnswer, type ComposedJob } from '../runtime/inventory-jobs';
import { JobFailed, type JobSandbox } from '../runtime/sandboxed-job';

/**
 * Jobs the API asks of a worker through Temporal (workflows/job.ts; services/jobs.ts): reading an
 * inventory with Ansible's parts, a dynamic source's script, a project's tree. Each runs here, on
 * the worker that takes it, in its sandbox (runtime/sandboxed-job.ts), heartbeating, and stops
 * when cancelled. What is large travels through job payloads in PostgreSQL (store/job-payloads.ts):
 * an input names a payload or a record, and an answer is a payload's id. A failure the caller
 * reads (the content's fault, the tool's refusal) is non-retryable, typed by its kind.
 */
export interface JobActivityDeps {
  sql: Sql;
  site: JobSandbox;
  /** Fetches a project's commit into this worker's cache when it has not got it (activities/projects.ts). */
  ensureCommit: (projectId: string, commit: string) => Promise<void>;
}

/** The kinds of failure a job's caller reads; anything else is retried. */
export const JOB_FAILURE_TYPES = ['InventoryError', 'JobFailed', 'GitError', 'JobInputGone'] as const;

function failureOf(err: unknown): unknown {
  if (err instanceof JobFailed) return ApplicationFailure.nonRetryable(err.message, 'JobFailed', { printed: err.printed, exitCode: err.exitCode });
  if (err instanceof InventoryError) return ApplicationFailure.nonRetryable(err.message, 'InventoryError');
  if (err instanceof GitError) return ApplicationFailure.nonRetryable(err.message, 'GitError');
  return err;
}

/** Runs `work` heartbeating every few seconds, its cancellation handed on as an abort; failures typed for the caller. */
async function asJob<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const ctx = Context.current();
  const timer = setInterval(() => ctx.heartbeat(), 5000);
  try {
    return await work(ctx.cancellationSignal);
  } catch (err) {
    throw failureOf(err);
  } finally {
    clearInterval(timer);
  }
}

export function createJobActivities(deps: JobActivityDeps) {
  const { sql, site } = deps;
  const input = async (payloadId: string): Promise<string> => {
    const body = await readPayload(sql, payloadId);
    if (body === undefined) throw ApplicationFailure.nonRetryable(`job payload ${payloadId} is gone`, 'JobInputGone');
    return body;
  };
  const answer = (value: unknown) => putPayload(sql, typeof value === 'string' ? value : JSON.stringify(value));

  return {
    /** A YAML inventory's host names (or, with `layout`, what PyYAML reads of its groups and hosts); the answer's payload id. */
    async inventoryHostsJob(job: { payload: string; format: InventoryFormat; layout: boolean }): Promise<string> {
      const content = await input(job.payload);
      return asJob(async () => answer(job.layout ? await yamlLayoutAnswer(site, content) : await inventoryHostNames(site, job.format, content)));
    },

    /** An inventory resolved as a launch would see it, with a limit; the answer's payload id. */
    async resolveInventoryJob(job: { payload: string; format: InventoryFormat; limit?: string }): Promise<string> {
      const content = await input(job.payload);
      return asJob(async () => answer(await resolveInventory(site, job.format, content, job.limit)));
    },

    /** A smart or constructed inventory over its input inventories as they are now; the answer's payload id. */
    async composedInventoryJob(job: Omit<ComposedJob, 'inputs'> & { inputs: string[] }): Promise<string> {
      const inputs: ComposedJob['inputs'] = [];
      for (const id of job.inputs) {
        const inventory = await getInventory(sql, id);
        if (!inventory) throw ApplicationFailure.nonRetryable(`inventory ${id} no longer exists`, 'JobInputGone');
        inputs.push({ format: inventory.format, content: inventory.content });
      }
      return asJob(async () => answer(await resolveComposed(site, { ...job, inputs })));
    },

    /** A dynamic inventory source's script run with `--list`; its standard output's payload id. */
    async inventoryScriptJob(job: { sourceId: string }): Promise<string> {
      const source = await getInventorySource(sql, job.sourceId);
      if (!source) throw ApplicationFailure.nonRetryable(`inventory source ${job.sourceId} no longer exists`, 'JobInputGone');
      return asJob(async (signal) => answer(await runInventoryScript(site, { name: source.id, script: source.script ?? '', timeoutSeconds: source.timeout_seconds }, signal)));
    },

    /** A path of a project's tree at a commit, fetched onto this worker first when it has not got it; the answer's payload id. */
    async projectTreeJob(job: { projectId: string; commit: string; path: string; maxEntries: number; maxFileBytes: number }): Promise<string> {
      return asJob(async () => {
        await deps.ensureCommit(job.projectId, job.commit);
        const read = await readTree(site, checkoutDir(site.projectsDir, job.projectId), job.commit, job.path, { maxEntries: job.maxEntries, maxFileBytes: job.maxFileBytes, timeoutMs: 60_000 });
        return answer(read.kind === 'file' && read.bytes ? { ...read, bytes: read.bytes.toString('base64') } : read);
      });
    },

    /** A project's tree at a commit as a tar archive, for a relay worker's run (services/relay/relay.ts); the answer's payload id holds it in base64. */
    async projectArchiveJob(job: { projectId: string; commit: string }): Promise<string> {
      return asJob(async () => {
        await deps.ensureCommit(job.projectId, job.commit);
        const archive = await archiveCommit(site, checkoutDir(site.projectsDir, job.projectId), job.commit, MAX_PROJECT_ARCHIVE_BYTES, 120_000);
        return answer(archive.toString('base64'));
      });
    },
  };
}

export type JobActivities = ReturnType<typeof createJobActivities>;
export type JobName = keyof JobActivities;
