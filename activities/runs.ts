import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import type { ExecutionOutcome } from '../core/runs/run-outcome';
import { runView } from '../core/runs/run-view';
import type { Sql } from '../store/db';
import { appendLog } from '../store/logs';
import { getRun } from '../store/runs';
import { moveRun, recordRunEnd, unexplainedRelease } from '../services/runs/run-lifecycle';
import { getTool } from '../tools/registry';
import type { ToolInputs } from '../tools/types';
import type { Injection } from '../core/credentials/credential-kinds';
import { ansibleToolCredentials, scriptToolInjection } from '../tools/credential-injection';
import { CredentialOpenError, openRunCredentials } from '../services/credentials';
import { recordToolResults } from './run-results';
import { RunInputError } from '../core/runs/run-outcome';
import { runToolInputs } from '../services/runs/run-inputs';
import { LogSink } from '../runtime/log-sink';
import { MaskedOutput } from '../runtime/masked-output';
import { createMasker } from '../core/masker';
import { knownSecretValues, openRunSecrets, RunSecretsError } from '../core/runs/run-secrets';
import type { Sealer } from '../core/credentials/seal';
import { LauncherStopped, type ToolLauncher } from '../runtime/launcher';
import { exitOutcome, killLeftoverProcess, type SpawnedTool } from '../runtime/process';
import { toolPath } from '../tools/registry';
import type { Run } from '../core/runs/run';
import { checkoutDir, GitError } from '../core/project-paths';
import { extractCommit } from '../runtime/git';
import { createWorkDir, handOverWorkDir, removeWorkDir, WorkDirError, writeWorkFiles } from '../runtime/work-dir';
import type { JobSandbox } from '../runtime/sandboxed-job';
import type { SandboxBind } from '../runtime/sandbox';
import type { ProcessExit } from '../runtime/process';
import type { RunSpec } from '../core/runs/run';
import type { Hold } from '../core/runs/policy-gate';
import type { IacInputs } from '../tools/types';
import { DomainError } from '../core/errors';
import { newId } from '../core/ids';
import { isPlanTool } from '../tools/iac';
import { IAC_BINARIES, IacBinaryUnavailable } from '../embedded/iac-binaries';
import { goSite, IacSiteError, providerMirror, stageIacBinary, stateKeyOf, stateSite } from '../runtime/iac';
import { markPlanApplied, tryStateLock, type StateLock } from '../store/iac';
import { entryFields, serviceOrigin } from '../services/audit/audit';
import { approvedPlan, judgeRunPlan, planSummary, readSavedPlan, recordPlan, SavedPlanError } from './iac';

/** How long unpacking a project's commit into a run's work dir may take. */
const PROJECT_COPY_TIMEOUT_MS = 300_000;

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

/** The environment a tool sees: none of the server's own (it holds database and key material). */
function toolEnvironment(run: Run, workDir: string, extra: Record<string, string>): Record<string, string> {
  return {
    ...extra,
    PATH: toolPath(),
    HOME: workDir,
    LANG: 'C.UTF-8',
    TMPDIR: workDir,
    CAIRN_RUN_ID: run.id,
    // A requeued run starts again from the top: a tool may use this to pick up where it was.
    CAIRN_RUN_ATTEMPT: String(run.attempts),
  };
}

/** A shard learns which slice of the work is its own. */
function shardEnvironment(run: Run): Record<string, string> {
  const shard = run.spec.shard;
  return shard ? { CAIRN_SHARD_INDEX: String(shard.index), CAIRN_SHARD_COUNT: String(shard.count) } : {};
}

export function createRunActivities(deps: RunActivityDeps) {
  const { sql, logger } = deps;

  /** Claims the run for this attempt: pending or requeued becomes running, with its event, in one write. */
  async function claim(runId: string): Promise<{ run: Run; previous: Run } | 'finished' | 'canceled'> {
    const result = await moveRun<'finished' | 'canceled'>(sql, runId, 'claim it', (previous) => {
      if (!previous) throw ApplicationFailure.nonRetryable(`run ${runId} does not exist`, 'RunNotFound');
      if (previous.finished_at) return { settled: 'finished' as const };
      if (previous.cancel_requested_at) return { settled: 'canceled' as const };
      return {
        changes: { status: 'running' as const, started_at: previous.started_at ?? new Date(), attempts: previous.attempts + 1, exec_host: HOST },
        event:
          previous.status === 'pending' && previous.hold?.plan && previous.started_at
            ? // Approved at the plan gate: it goes on to apply, and was announced as started already.
              { kind: 'run.resumed', body: (next: Run) => ({ attempt: next.attempts, plan_digest: previous.hold!.plan!.digest }) }
            : previous.status === 'pending'
            ? { kind: 'run.started', body: (next: Run) => ({ run: runView(next, 'preview') }) }
            : {
                kind: 'run.requeued',
                body: (next: Run) => ({
                  attempt: next.attempts,
                  previous_host: previous.exec_host,
                  reason: 'the worker executing the run stopped renewing its lease',
                }),
              },
        guard: { notCanceled: true },
      };
    });
    return 'settled' in result ? result.settled : { run: result.moved, previous: result.previous };
  }

  /**
   * Executes the run's tool for this attempt and records how it ended. A cancel (by a person or the
   * timeout) surfaces as the activity's cancellation; the workflow records that end itself.
   */
  async function executeRun(runId: string): Promise<'held' | void> {
    const outcome = await runTool(runId);
    // Held at the plan gate: the workflow waits for the decision, then executes the run again to apply.
    if (outcome === 'held') return 'held';
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

  async function runTool(runId: string): Promise<ExecutionOutcome | 'skipped' | 'held'> {
    const ctx = Context.current();
    const refusal = await unexplainedRelease(sql, runId);
    if (refusal) {
      logger.error({ runId }, `${refusal}; the run is ended without executing`);
      return { kind: 'refused', message: refusal };
    }
    const claimed = await claim(runId);
    if (claimed === 'finished') return 'skipped';
    if (claimed === 'canceled') return { kind: 'canceled' };
    const { run, previous } = claimed;
    const definition = getTool(run.tool);
    if (!definition) return { kind: 'spawn_failed', message: `the ${run.tool} tool is not available on this server` };
    // The run's sealed secrets, opened only here: they join its extra vars and its masker's known values.
    let secrets: Record<string, string>;
    try {
      secrets = openRunSecrets(deps.sealer, run);
    } catch (err) {
      if (err instanceof RunSecretsError) return { kind: 'spawn_failed', message: err.message };
      throw err;
    }
    // Its credentials, opened only here too: injected into the tool, every secret joining the masker.
    const workDir = path.join(deps.site.workRoot, `${runId}-${run.attempts}`);
    let injection: Injection;
    // The ansible tool takes a machine credential its own way (tools/ansible.ts): user and key file
    // as extra vars, the passwords and the key's passphrase through its inputs.
    let machine: ToolInputs['machine'];
    try {
      const opened = await openRunCredentials(sql, deps.sealer, run, deps.federationIssuer);
      if (run.tool === 'ansible') {
        const { sshKeyFile, sshKeyPassphrase, password, becomePassword, ...rest } = ansibleToolCredentials(opened, workDir);
        injection = rest;
        machine = { sshKeyFile, sshKeyPassphrase, password, becomePassword };
      } else {
        injection = scriptToolInjection(opened, workDir);
      }
    } catch (err) {
      if (err instanceof CredentialOpenError) return { kind: 'spawn_failed', message: err.message };
      throw err;
    }

    const sink = new LogSink(
      (data) => appendLog(sql, runId, data),
      (err) => logger.warn({ runId, err: (err as Error).message }, 'storing run output failed; will retry'),
    );
    if (previous.status === 'running') {
      // The lost attempt's heartbeats named its host and tool pid: end that tool if it is here and alive.
      const lost = ctx.info.heartbeatDetails as LeaseDetails | undefined;
      if (lost?.host === HOST && lost.pid) await killLeftoverProcess(lost.pid, runId);
      sink.write(Buffer.from(`\n[cairn] the worker running this run was lost; running it again (attempt ${run.attempts})\n`));
    }

    // Everything the tool writes passes the secret masker, which knows this run's secret values
    // and the server's own, before it is stored.
    const output = new MaskedOutput(createMasker([...knownSecretValues(secrets), ...knownSecretValues(Object.fromEntries(injection.secrets.entries())), ...deps.serverSecrets]), (data) => sink.write(data));

    // What the tool needs resolved now (an ansible run's stored inventory, as it is at this start).
    let inputs: ToolInputs;
    try {
      inputs = { ...(await runToolInputs(sql, run)), ...(machine && { machine }) };
    } catch (err) {
      if (err instanceof RunInputError) return { kind: 'spawn_failed', message: err.message };
      throw err;
    }
    const injectedVars = { ...injection.extraVars, ...secrets };
    const spec: RunSpec = Object.keys(injectedVars).length ? { ...run.spec, extra_vars: { ...run.spec.extra_vars, ...injectedVars } } : run.spec;
    const note = (line: string) => output.write(Buffer.from(`[cairn] ${line}\n`));

    // A terraform or opentofu run's binary (built on first use, its progress in this log), its
    // state and its phase; a go run's caches. Heartbeats go on meanwhile: a first build takes minutes.
    let binds: SandboxBind[] = [];
    let iacInputs: IacInputs | undefined;
    let stateKey: string | undefined;
    const keepAlive = setInterval(() => ctx.heartbeat({ host: HOST } satisfies LeaseDetails), 1000);
    try {
      if (isPlanTool(run.tool)) {
        const staged = await stageIacBinary(deps.site, IAC_BINARIES[run.tool], note);
        stateKey = stateKeyOf(run);
        const state = await stateSite(deps.site, stateKey);
        const mirror = await providerMirror(deps.site);
        binds = [...staged.binds, ...state.binds, ...mirror.binds];
        // A run held at the plan gate and approved applies exactly the plan it saved.
        const savedPlan = !run.spec.dry_run && run.hold?.plan ? await approvedPlan(sql, deps.sealer, run) : undefined;
        if (savedPlan) note(`applying the saved plan ${run.hold!.plan!.digest} that was approved (${run.hold!.plan!.summary})`);
        iacInputs = {
          binary: staged.binary,
          phase: savedPlan ? 'apply' : 'plan',
          savedPlan,
          stateFile: state.stateFile,
          providerMirror: mirror.dir,
          providerDownloads: deps.site.iacProviderDownloads ?? false,
        };
        inputs.iac = iacInputs;
      } else if (run.tool === 'go') {
        const go = await goSite(deps.site);
        binds = go.binds;
        inputs.go = go;
      }
    } catch (err) {
      if (err instanceof IacBinaryUnavailable || err instanceof IacSiteError || err instanceof SavedPlanError) {
        // What the log said of it (a build's progress) is kept with the run.
        note(err.message);
        output.end();
        await sink.close().catch(() => undefined);
        return { kind: 'spawn_failed', message: err.message };
      }
      throw err;
    } finally {
      clearInterval(keepAlive);
    }

    let invocation;
    try {
      invocation = definition.invocation(spec, inputs);
    } catch (err) {
      if (err instanceof DomainError) {
        output.end();
        await sink.close().catch(() => undefined);
        return { kind: 'spawn_failed', message: err.message };
      }
      throw err;
    }
    try {
      if (run.spec.project) await deps.ensureCommit(run.spec.project.id, run.spec.project.commit);
      await prepareWorkDir(deps.site, workDir, { ...invocation.files, ...injection.files }, run.spec.project);
    } catch (err) {
      // Nothing of the run is left behind, its credential files least of all, whatever failed.
      await removeWorkDir(workDir);
      output.end();
      await sink.close().catch(() => undefined);
      if (err instanceof GitError) return { kind: 'spawn_failed', message: `the project's tree could not be placed in the run's work dir: ${err.message}` };
      if (err instanceof WorkDirError) return { kind: 'spawn_failed', message: err.message };
      throw err;
    }

    deps.onExecutionChange?.(1);
    let lease: LeaseDetails = { host: HOST };
    const heartbeat = setInterval(() => ctx.heartbeat(lease), heartbeatEveryMs(ctx.info.heartbeatTimeoutMs! / 1000));
    let outputOpen = true;
    const closeOutput = async () => {
      if (!outputOpen) return;
      outputOpen = false;
      output.end();
      await sink.close();
    };
    let lock: StateLock | undefined;

    /** Starts one process of the run in its work dir and waits for it; a cancel kills it. */
    const launchOnce = async (argv: string[], env: Record<string, string>): Promise<ProcessExit | ExecutionOutcome> => {
      let tool: SpawnedTool;
      try {
        tool = await deps.launcher.launch(argv, {
          cwd: workDir,
          env: toolEnvironment(run, workDir, { ...env, ...injection.env, ...shardEnvironment(run) }),
          onOutput: (chunk) => output.write(chunk),
          binds,
        });
      } catch (err) {
        if (err instanceof LauncherStopped) throw err;
        return { kind: 'spawn_failed', message: `could not start ${definition.binary}: ${(err as Error).message}` };
      }
      // Carried from the next heartbeat on; a run that ends within the second sends none at all.
      lease = { host: HOST, pid: tool.pid };
      const onCancel = () => tool.kill();
      ctx.cancellationSignal.addEventListener('abort', onCancel);
      // A cancel that arrived while the tool was starting has already fired its event.
      if (ctx.cancellationSignal.aborted) onCancel();
      try {
        // A launcher that dies takes the execution with it: the error fails this attempt, which is retried.
        return await tool.exited;
      } finally {
        ctx.cancellationSignal.removeEventListener('abort', onCancel);
      }
    };

    try {
      // Cairn's lock on the state it keeps, besides the tool's own: one run of a template plans or applies at a time.
      if (stateKey) lock = await takeStateLock(stateKey, note);
      let exit: ProcessExit | ExecutionOutcome;
      try {
        exit = await launchOnce(invocation.argv, invocation.env);
      } finally {
        if (!iacInputs) await closeOutput();
      }
      // Cancelled (by a cancel or the timeout): report it as such, now that the process is gone.
      if (ctx.cancellationSignal.aborted) {
        await closeOutput();
        await ctx.cancelled;
      }
      if ('kind' in exit) return exit;
      let outcome = exitOutcome(exit);
      if (iacInputs && outcome.kind === 'exited' && outcome.exitCode === 0) {
        const gated = await planGate(run, iacInputs, workDir, note);
        if (gated === 'apply') {
          try {
            const applied = await launchOnce(['bash', 'cairn-iac.sh', 'apply'], invocation.env);
            if (ctx.cancellationSignal.aborted) {
              await closeOutput();
              await ctx.cancelled;
            }
            if ('kind' in applied) return applied;
            outcome = exitOutcome(applied);
            if (outcome.kind === 'exited' && outcome.exitCode === 0) await markPlanApplied(sql, run.id);
          } finally {
            await closeOutput();
          }
        } else if (gated === 'hold') {
          await closeOutput();
          return (await holdAtPlanGate(run)) ?? { kind: 'canceled' };
        } else if (gated !== 'done') {
          await closeOutput();
          return gated;
        } else if (iacInputs.phase === 'apply') {
          // The approved plan, applied: it is not kept any longer.
          await markPlanApplied(sql, run.id);
        }
      }
      await closeOutput();
      // An ansible run's per-host and per-task results are stored now, before its work dir goes.
      return await recordToolResults(sql, run, workDir, outcome);
    } finally {
      await closeOutput().catch(() => undefined);
      clearInterval(heartbeat);
      deps.onExecutionChange?.(-1);
      await lock?.release().catch((err) => logger.warn({ runId, err: (err as Error).message }, 'releasing a state lock failed; its connection ends it'));
      await removeWorkDir(workDir);
    }
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

  /**
   * After a plan phase that exited 0: the plan read back and classified, recorded with the run, and
   * judged. `apply` goes on to apply it now; `hold` holds the run for a person; `done` is a dry
   * run's plan or an apply that has just run; an outcome ends the run (a plan a deny refuses).
   */
  async function planGate(run: Run, iac: IacInputs, workDir: string, note: (line: string) => void): Promise<'apply' | 'hold' | 'done' | ExecutionOutcome> {
    if (iac.phase === 'apply') return 'done';
    const plan = await readSavedPlan(workDir);
    if (!plan) return { kind: 'exited_failed', exitCode: 0, message: 'the plan phase saved no plan file' };
    note(`${planSummary(plan.classification)}; digest ${plan.digest}`);
    if (run.spec.dry_run) {
      await recordPlan(sql, deps.sealer, run, plan, 'dry_run');
      return 'done';
    }
    const verdict = await judgeRunPlan(sql, run, plan.classification);
    if (verdict.verdict === 'deny') {
      await recordPlan(sql, deps.sealer, run, plan, 'deny');
      return { kind: 'refused', message: `a deny policy refuses this plan (${verdict.policies.join(', ')}); nothing was applied` };
    }
    if (verdict.verdict === 'hold') {
      await recordPlan(sql, deps.sealer, run, plan, 'hold');
      heldPlans.set(run.id, { digest: plan.digest, summary: planSummary(plan.classification), hold: verdict.hold });
      note(`the plan gate holds this run for approval (${verdict.hold.policies.join(', ')}); approving it applies exactly this plan`);
      return 'hold';
    }
    await recordPlan(sql, deps.sealer, run, plan, 'run');
    return 'apply';
  }

  /** What planGate decided to hold, by run, for holdAtPlanGate. */
  const heldPlans = new Map<string, { digest: string; summary: string; hold: Hold }>();

  /** Moves the running run to held, with its plan on the hold, its `run.held` event and a chain entry; undefined when a cancel came first. */
  async function holdAtPlanGate(run: Run): Promise<'held' | undefined> {
    const held = heldPlans.get(run.id)!;
    heldPlans.delete(run.id);
    const hold: Hold = { ...held.hold, plan: { digest: held.digest, summary: held.summary } };
    const moved = await moveRun(sql, run.id, 'hold it at the plan gate', (current) =>
      current && current.status === 'running' && !current.cancel_requested_at
        ? {
            changes: { status: 'held', hold },
            event: { kind: 'run.held', body: (next: Run) => ({ run: runView(next, 'preview'), blocker: 'approval_needed', hold, plan: held.summary }) },
            guard: { notCanceled: true },
            audit: () =>
              entryFields(serviceOrigin('RUN', `/v1/runs/${run.id}`), 202, {
                id: newId('aud'),
                run_id: run.id,
                body: { kind: 'run.plan_held', run_id: run.id, plan_digest: held.digest, policies: hold.policies, summary: held.summary },
              }),
          }
        : { settled: undefined },
    );
    return 'settled' in moved ? undefined : 'held';
  }

  /** Records the run's end and its event once, however often it is called. */
  async function finishRun(runId: string, outcome: ExecutionOutcome): Promise<void> {
    const finished = await recordRunEnd(sql, runId, outcome);
    if (finished) deps.onFinished?.(finished);
  }

  /** The run's status as recorded, for the workflow's `CairnRunStatus` search attribute; null for a run that is gone. */
  async function runStatus(runId: string): Promise<string | null> {
    return (await getRun(sql, runId))?.status ?? null;
  }

  return { executeRun, finishRun, runStatus };
}

export type RunActivities = ReturnType<typeof createRunActivities>;

/**
 * A fresh work dir for the run (runtime/work-dir.ts): the tool's files written first, by the
 * server into a dir nothing else has touched; then the dir handed to the account the tool runs
 * as; then a project's tree at the run's commit unpacked into it in the sandbox, as that account,
 * refusing to replace any of the tool's files (runtime/git.ts).
 */
async function prepareWorkDir(
  where: JobSandbox,
  workDir: string,
  files: Record<string, string | Buffer>,
  project?: { id: string; commit: string },
): Promise<void> {
  await createWorkDir(workDir);
  await writeWorkFiles(workDir, files, where.sandbox?.user);
  await handOverWorkDir(workDir, where.sandbox?.user);
  if (project) await extractCommit(where, checkoutDir(where.projectsDir, project.id), project.commit, workDir, PROJECT_COPY_TIMEOUT_MS);
}
