import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import type { ExecutionOutcome } from '../core/runs/run-outcome';
import type { Sql } from '../store/db';
import { appendLog } from '../store/logs';
import { getRun } from '../store/runs';
import { recordRunEnd } from '../services/runs/run-lifecycle';
import { RunInputError } from '../core/runs/run-outcome';
import type { IacInputs, ToolInputs } from '../tools/types';
import type { SandboxBind } from '../runtime/sandbox';
import { IAC_APPLY_ARGV, isPlanTool } from '../tools/iac';
import { IAC_BINARIES, IacBinaryUnavailable } from '../embedded/iac-binaries';
import { goSite, iacSite, IacSiteError } from '../runtime/iac';
import { markPlanApplied, tryStateLock, type StateLock } from '../store/iac';
import { approvedPlan, gatePlan, holdAtPlanGate, readSavedPlan, SavedPlanError } from './iac';
import { prepareExecution } from '../services/runs/run-preparation';
import { recordToolResults } from './run-results';
import { revokeRunLeases, type MintedLease } from '../services/credentials';
import type { ExtensionRegistry } from '../core/extensions';
import { getTool } from '../tools/registry';
import type { Sealer } from '../core/credentials/seal';
import type { ToolLauncher } from '../runtime/launcher';
import { killLeftoverProcess } from '../runtime/process';
import type { Run } from '../core/runs/run';
import { GitError } from '../core/project-paths';
import { executeTool, projectFromCache, type AttemptTail } from '../runtime/tool-execution';
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
  /** Extension secret sources credentials may read from; a dynamic one's leases are revoked when the run's execution ends. */
  secretSources?: ExtensionRegistry['secretSources'];
  onFinished?: (run: Run) => void;
  onExecutionChange?: (delta: 1 | -1) => void;
}

const HOST = os.hostname();

/** An execution that recorded the run's end answers the status it recorded, so the workflow need not read it back. */
export interface ExecutionEnded {
  ended: string;
}

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
  async function executeRun(runId: string): Promise<'held' | ExecutionEnded | void> {
    const leases: MintedLease[] = [];
    let outcome: Awaited<ReturnType<typeof runTool>>;
    try {
      outcome = await runTool(runId, leases);
    } finally {
      // Dynamic secrets minted for this execution end with it, by the process that minted them.
      await revokeRunLeases(leases, (lease, err) => logger.warn({ runId, source: lease.source, leaseId: lease.leaseId, err: err.message }, 'revoking a secret lease failed'));
    }
    // Held at the plan gate: the workflow waits for the decision, then executes the run again to apply.
    if (outcome === 'held') return 'held';
    if (outcome === 'skipped') return;
    const ended = await recordEndUntilItLands(runId, outcome);
    if (ended) return { ended: ended.status };
  }

  /**
   * The tool has run: its end is recorded however long the store refuses, heartbeating meanwhile,
   * because failing the attempt would run the tool again (a requeue). Only a cancel (a person's
   * or the timeout's) stops it, and the workflow then records that end.
   */
  async function recordEndUntilItLands(runId: string, outcome: ExecutionOutcome): Promise<Run | undefined> {
    const ctx = Context.current();
    for (let wait = 250; ; wait = Math.min(wait * 2, 5000)) {
      try {
        return await recordEnd(runId, outcome);
      } catch (err) {
        if (ctx.cancellationSignal.aborted) throw err;
        logger.warn({ runId, err: (err as Error).message }, "recording the run's end failed; trying again");
        ctx.heartbeat({ host: HOST } satisfies LeaseDetails);
        await ctx.sleep(wait);
      }
    }
  }

  async function runTool(runId: string, leases: MintedLease[]): Promise<ExecutionOutcome | 'skipped' | 'held'> {
    const ctx = Context.current();
    const note = (line: string) => appendLog(sql, runId, Buffer.from(`[cairn] ${line}\n`));
    // What a terraform, opentofu or go run needs of this worker, resolved as it is prepared.
    let binds: SandboxBind[] = [];
    let iacInputs: IacInputs | undefined;
    let stateKey: string | undefined;
    // Heartbeats go on meanwhile: a tool's first build takes minutes.
    const keepAlive = setInterval(() => ctx.heartbeat({ host: HOST } satisfies LeaseDetails), 1000);
    let prepared;
    try {
      prepared = await prepareExecution(
        sql,
        {
          ...deps,
          leases,
          executionInputs: async (run) => {
            const resolved = await executionInputs(run, note);
            binds = resolved.binds;
            iacInputs = resolved.inputs.iac;
            stateKey = resolved.stateKey;
            return resolved.inputs;
          },
        },
        runId,
        HOST,
        (run) => path.join(deps.site.workRoot, `${runId}-${run.attempts}`),
      );
    } finally {
      clearInterval(keepAlive);
    }
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
    let lock: StateLock | undefined;
    try {
      // Cairn's lock on the state it keeps, besides the tool's own: one run of a template plans or applies at a time.
      if (stateKey) lock = await takeStateLock(stateKey, note);
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
          binds,
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
          afterExit: async (workDir, outcome, tail): Promise<ExecutionOutcome | 'held'> => {
            // Cancelled (by a cancel or the timeout): report it as such, now that the process is gone.
            if (ctx.cancellationSignal.aborted) await ctx.cancelled;
            if (iacInputs && outcome.kind === 'exited' && outcome.exitCode === 0) {
              const planned = await afterPlan(run, iacInputs, workDir, tail);
              if (planned !== 'go on') return planned;
            }
            // An ansible run's per-host and per-task results are stored now, before its work dir goes.
            return recordToolResults(sql, run, workDir, outcome);
          },
        },
      );
    } finally {
      clearInterval(heartbeat);
      await lock?.release().catch((err) => logger.warn({ runId, err: (err as Error).message }, 'releasing a state lock failed; its connection ends it'));
    }
  }

  /**
   * A terraform or opentofu run's binary (built on first use, its progress in the run's log), its
   * state and its phase; a go run's caches. What cannot be had ends the run naming why.
   */
  async function executionInputs(run: Run, note: (line: string) => Promise<void>): Promise<{ inputs: Partial<ToolInputs>; binds: SandboxBind[]; stateKey?: string }> {
    try {
      if (isPlanTool(run.tool)) {
        const { binds, stateKey, ...where } = await iacSite(deps.site, IAC_BINARIES[run.tool], run, (line) => void note(line));
        // A run held at the plan gate and approved applies exactly the plan it saved.
        const savedPlan = !run.spec.dry_run && run.hold?.plan ? await approvedPlan(sql, deps.sealer, run) : undefined;
        if (savedPlan) await note(`applying the saved plan ${run.hold!.plan!.digest} that was approved (${run.hold!.plan!.summary})`);
        const iac: IacInputs = { ...where, phase: savedPlan ? 'apply' : 'plan', savedPlan };
        return { inputs: { iac }, binds, stateKey };
      }
      if (run.tool === 'go') {
        const go = await goSite(deps.site);
        return { inputs: { go }, binds: go.binds };
      }
      // A plugin tool: its executable, read-only, is what runs in the sandbox (in tool mode).
      const executable = getTool(run.tool)?.pluginExecutable;
      return { inputs: {}, binds: executable ? [{ path: executable }] : [] };
    } catch (err) {
      if (err instanceof IacBinaryUnavailable || err instanceof IacSiteError || err instanceof SavedPlanError) {
        // What the log said of it (a build's progress) is kept with the run.
        await note(err.message);
        throw new RunInputError(err.message);
      }
      throw err;
    }
  }

  /**
   * After a terraform or opentofu phase that exited 0: a plan is judged at the plan gate and
   * applied, held or refused; an approved plan's apply is marked applied. `go on` records the
   * outcome as for any tool.
   */
  async function afterPlan(run: Run, iac: IacInputs, workDir: string, tail: AttemptTail): Promise<ExecutionOutcome | 'held' | 'go on'> {
    const ctx = Context.current();
    if (iac.phase === 'apply') {
      // The approved plan, applied: it is not kept any longer.
      await markPlanApplied(sql, run.id);
      return 'go on';
    }
    const plan = await readSavedPlan(workDir);
    if (!plan) return { kind: 'exited_failed', exitCode: 0, message: 'the plan phase saved no plan file' };
    const gated = await gatePlan(sql, deps.sealer, run, plan, tail.note);
    if (gated.decision === 'apply') {
      const applied = await tail.launchAgain(IAC_APPLY_ARGV);
      if (ctx.cancellationSignal.aborted) await ctx.cancelled;
      if (applied.kind === 'exited' && applied.exitCode === 0) await markPlanApplied(sql, run.id);
      return recordToolResults(sql, run, workDir, applied);
    }
    if (gated.decision === 'hold') return (await holdAtPlanGate(sql, run, gated.held)) ?? { kind: 'canceled' };
    if (gated.decision === 'end') return gated.outcome;
    return 'go on';
  }

  /** Waits (heartbeating, cancellable) for Cairn's lock on one state, saying so once in the run's log. */
  async function takeStateLock(key: string, note: (line: string) => void): Promise<StateLock> {
    const ctx = Context.current();
    let said = false;
    for (;;) {
      const lock = await tryStateLock(sql, key);
      if (lock) {
        if (said) note('state lock taken');
        return lock;
      }
      if (!said) {
        note(`waiting for the state lock of ${key}: another run of it is planning or applying`);
        said = true;
      }
      await ctx.sleep(250);
    }
  }

  /** Records the run's end and its event once, however often it is called; the run as ended, or undefined when it had ended before. */
  async function recordEnd(runId: string, outcome: ExecutionOutcome): Promise<Run | undefined> {
    const finished = await recordRunEnd(sql, runId, outcome);
    if (finished) deps.onFinished?.(finished);
    return finished;
  }

  /** The workflow's own record of an end (a timeout, a cancel, a lost execution). */
  async function finishRun(runId: string, outcome: ExecutionOutcome): Promise<void> {
    await recordEnd(runId, outcome);
  }

  /** The run's status as recorded, for the workflow's `CairnRunStatus` search attribute; null for a run that is gone. */
  async function runStatus(runId: string): Promise<string | null> {
    return (await getRun(sql, runId))?.status ?? null;
  }

  return { executeRun, finishRun, runStatus };
}

export type RunActivities = ReturnType<typeof createRunActivities>;

