import { Context } from '@temporalio/activity';
import { promises as fs } from 'node:fs';
import type { Logger } from 'pino';
import type { Sealer } from '../core/credentials/seal';
import { CredentialOpenError } from '../services/credentials';
import { fetchSourceOf, gitCredentialOf, recordUpdateOutcome, type ProjectFetchSettings } from '../services/projects';
import type { Sql } from '../store/db';
import { getProject, startProjectUpdate, type Project } from '../store/projects';
import { checkoutDir, GitError } from '../core/project-paths';
import { fetchProject, hasCommit } from '../runtime/git';
import type { JobSandbox } from '../runtime/sandboxed-job';

/**
 * Projects' git work on a worker (spec part A 4.5): an update fetched into this worker's project
 * cache and recorded, and a commit a run needs fetched into it when this worker has not got it
 * yet, so a worker on another machine needs no shared directory.
 */
export interface ProjectActivityDeps {
  sql: Sql;
  logger: Logger;
  sealer?: Sealer;
  site: JobSandbox;
  settings: ProjectFetchSettings;
}

/** How often a fetch under way tells Temporal it is alive (a lost worker's fetch is retried elsewhere). */
const HEARTBEAT_MS = 5000;

/** Runs `work` with the activity heartbeating, its cancellation handed to the work as an abort. */
async function heartbeating<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const ctx = Context.current();
  const timer = setInterval(() => ctx.heartbeat(), HEARTBEAT_MS);
  try {
    return await work(ctx.cancellationSignal);
  } finally {
    clearInterval(timer);
  }
}

export function createProjectActivities(deps: ProjectActivityDeps) {
  const { sql, logger, site, settings } = deps;

  /** Fetches `ref` (null: the remote's HEAD) of the project into this worker's cache; answers the commit. */
  async function fetchInto(project: Project, ref: string | null, signal?: AbortSignal): Promise<string> {
    const credential = await gitCredentialOf(sql, deps.sealer, project.credential_id);
    const source = await fetchSourceOf(settings, project.url);
    return fetchProject(
      site,
      checkoutDir(site.projectsDir, project.id),
      project.url,
      ref,
      source,
      { timeoutMs: settings.gitTimeout * 1000, credential, proxy: settings.delivery.proxy, signal },
      (detail) => logger.info({ projectId: project.id, detail }, 'a project fetch failed'),
    );
  }

  /**
   * One update of a project: its repository fetched and the commit (or the error: an address the
   * rules refuse, a credential that does not open, git's refusal) recorded with its chain entry.
   * Anything else fails the attempt, which Temporal retries.
   */
  async function updateProject(projectId: string): Promise<void> {
    const started = await startProjectUpdate(sql, projectId);
    // Deleted: its repository leaves this worker's cache.
    if (!started) return fs.rm(checkoutDir(site.projectsDir, projectId), { recursive: true, force: true });
    let outcome: { commit: string } | { error: string };
    try {
      outcome = { commit: await heartbeating((signal) => fetchInto(started, started.branch, signal)) };
    } catch (err) {
      if (!(err instanceof GitError || err instanceof CredentialOpenError)) throw err;
      outcome = { error: err.message };
    }
    await recordUpdateOutcome(sql, projectId, started.answering, outcome);
  }

  /**
   * Makes sure this worker's cache holds the commit a run of the project records: fetched with the
   * project's branch, or by the commit itself when the branch has moved on. A GitError when it
   * cannot be had.
   */
  async function ensureCommit(projectId: string, commit: string): Promise<void> {
    const checkout = checkoutDir(site.projectsDir, projectId);
    if (await hasCommit(site, checkout, commit)) return;
    const project = await getProject(sql, projectId);
    if (!project) throw new GitError(`project ${projectId} no longer exists`);
    try {
      await fetchInto(project, project.branch);
      if (await hasCommit(site, checkout, commit)) return;
      await fetchInto(project, commit);
    } catch (err) {
      if (err instanceof CredentialOpenError) throw new GitError(err.message);
      throw err;
    }
    if (!(await hasCommit(site, checkout, commit))) throw new GitError(`commit ${commit} of project ${projectId} could not be fetched onto this worker`);
  }

  return { updateProject, ensureCommit };
}

export type ProjectActivities = Pick<ReturnType<typeof createProjectActivities>, 'updateProject'>;
