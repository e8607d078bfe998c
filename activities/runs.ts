import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import type { ExecutionOutcome } from '../core/runs/run-outcome';
import type { Sql } from '../store/db';
import { appendLog } from '../store/logs';
import { recordRunEnd } from '../services/runs/run-lifecycle';
import { prepareExecution } from '../services/runs/run-preparation';
import { recordToolResults } from './run-results';
import type { Sealer } from '../core/credentials/seal';
import type { ToolLauncher } from '../runtime/launcher';
import { killLeftoverProcess } from '../runtime/process';
import type { Run } from '../core/runs/run';
import { GitError } from '../core/project-paths';
import { executeTool, projectFromCache } from '../runtime/tool-execution';
import type { JobSandbox } from '../runtime/sandboxed-job';

export interface RunActivityDeps {
  sql: Sql;
  logger: Logger;
  /** Where runs get their work dirs and project trees, and the sandbox they run in (undefined only with --run-isolation none). */
  site: JobSandbox;
  /** Fetches a project's commit into this worker's cache when it has not got it yet (activities/projects.ts). */
  ensureCommit: (projectId: string, commit: string) => Promise<void>;
  launcher: ToolLauncher;
  /** Opens the secrets sealed to a run (core/run-secrets.ts); undefined without the install's key. */
  sealer?: Sealer;
  /**
   * The server's own secrets (the install key and salt, the database password): no tool is given
   * them, and the output masker hides them should one ever find its way into a log.
   */
  serverSecrets: string[];
  /** --federation-issuer: the `iss` of the identity tokens federated credentials give runs; undefined issues none. */
  federationIssuer?: string;
  onFinished?: (run: Run) => void;
  onExecutionChange?: (delta: 1 | -1) => void;
}

const HOST = os.hostname();

/** What an attempt's heartbeats carry, so the attempt after a lost one can find its tool. */
interface LeaseDetails {
  host: string;
  pid?: number;
}
/**
 * The lease (`--lease-seconds`) is three renewal periods: a worker that misses three renewals in a
 * row has lost its run (spec part B 8). Within each renewal period the activity renews the lease
 * by heartbeat every second at most, since a heartbeat is also how a cancel or a timeout reaches
 * the tool: a cancel lands within a second.
 */
export const renewalPeriodMs = (leaseSeconds: number) => (leaseSeconds * 1000) / 3;
const heartbeatEveryMs = (leaseSeconds: number) => Math.min(1000, renewalPeriodMs(leaseSeconds));

export function createRunActivities(deps: RunActivityDeps) {
  const { sql, logger } = deps;

  /**
   * Executes the run's tool for this attempt and records how it ended. A cancel (by a person or the
   * timeout) surfaces as the activity's cancellation; the workflow records that end itself.
   */
  async function executeRun(runId: string): Promise<void> {
    const outcome = await runTool(runId);
    if (outcome !== 'skipped') await recordEndUntilItLands(runId, outcome);
  }

  /**
   * The tool has run: its end is recorded however long the store refuses, heartbeating meanwhile,
   * because failing the attempt would run the tool again (a requeue). Only a cancel (a person's
   * or the timeout's) stops it, and the workflow then records that end.
   */
  async function recordEndUntilItLands(runId: string, outcome: ExecutionOutcome): Promise<void> {
    const ctx = Context.current();
    for (let wait = 250; ; wait = Math.min(wait * 2, 5000)) {
      try {
        return await finishRun(runId, outcome);
      } catch (err) {
        if (ctx.cancellationSignal.aborted) throw err;
        logger.warn({ runId, err: (err as Error).message }, "recording the run's end failed; trying again");
        ctx.heartbeat({ host: HOST } satisfies LeaseDetails);
        await ctx.sleep(wait);
      }
    }
  }

  async function runTool(runId: string): Promise<ExecutionOutcome | 'skipped'> {
    const ctx = Context.current();
    const prepared = await prepareExecution(sql, deps, runId, HOST, (run) => path.join(deps.site.workRoot, `${runId}-${run.attempts}`));
    if (prepared.kind === 'missing') throw ApplicationFailure.nonRetryable(`run ${runId} does not exist`, 'RunNotFound');
    if (prepared.kind === 'skipped') return 'skipped';
    if (prepared.kind === 'ended') {
      if (prepared.outcome.kind === 'refused') logger.error({ runId }, `${prepared.outcome.message}; the run is ended without executing`);
      return prepared.outcome;
    }
    const { run, previous } = prepared;
    let preface: string | undefined;
    if (previous.status === 'running') {
      // The lost attempt's heartbeats named its host and tool pid: end that tool if it is here and alive.
      const lost = ctx.info.heartbeatDetails as LeaseDetails | undefined;
      if (lost?.host === HOST && lost.pid) await killLeftoverProcess(lost.pid, runId);
      preface = `\n[cairn] the worker running this run was lost; running it again (attempt ${run.attempts})\n`;
    }
    try {
      if (run.spec.project) await deps.ensureCommit(run.spec.project.id, run.spec.project.commit);
    } catch (err) {
      if (err instanceof GitError) return { kind: 'spawn_failed', message: `the project's tree could not be placed in the run's work dir: ${err.message}` };
      throw err;
    }

    let lease: LeaseDetails = { host: HOST };
    const heartbeat = setInterval(() => ctx.heartbeat(lease), heartbeatEveryMs(ctx.info.heartbeatTimeoutMs! / 1000));
    try {
      return await executeTool(
        deps.site,
        deps.launcher,
        {
          runId,
          attempt: run.attempts,
          workDir: path.join(deps.site.workRoot, `${runId}-${run.attempts}`),
          binary: prepared.binary,
          argv: prepared.argv,
          env: prepared.env,
          files: prepared.files,
          // Everything the tool writes passes the secret masker, which knows this run's secret
          // values and the server's own, before it is stored.
          maskValues: [...prepared.maskValues, ...deps.serverSecrets],
          preface,
        },
        {
          placeProject: run.spec.project && projectFromCache(deps.site, run.spec.project),
          storeLog: (data) => appendLog(sql, runId, data),
          onLogError: (err) => logger.warn({ runId, err: (err as Error).message }, 'storing run output failed; will retry'),
          // Carried from the next heartbeat on; a run that ends within the second sends none at all.
          onStarted: (pid) => (lease = { host: HOST, pid }),
          cancelSignal: ctx.cancellationSignal,
          onExecutionChange: deps.onExecutionChange,
          afterExit: async (workDir, outcome) => {
            // Cancelled (by a cancel or the timeout): report it as such, now that the process is gone.
            if (ctx.cancellationSignal.aborted) await ctx.cancelled;
            // An ansible run's per-host and per-task results are stored now, before its work dir goes.
            return recordToolResults(sql, run, workDir, outcome);
          },
        },
      );
    } finally {
      clearInterval(heartbeat);
    }
  }

  /** Records the run's end and its event once, however often it is called. */
  async function finishRun(runId: string, outcome: ExecutionOutcome): Promise<void> {
    const finished = await recordRunEnd(sql, runId, outcome);
    if (finished) deps.onFinished?.(finished);
  }

  return { executeRun, finishRun };
}

export type RunActivities = ReturnType<typeof createRunActivities>;

