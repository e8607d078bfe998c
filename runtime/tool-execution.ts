import type { ExecutionOutcome } from '../core/runs/run-outcome';
import { createMasker } from '../core/masker';
import { checkoutDir, GitError } from '../core/project-paths';
import { toolPath } from '../tools/registry';
import { extractCommit } from './git';
import { LauncherStopped, type ToolLauncher } from './launcher';
import { LogSink } from './log-sink';
import { MaskedOutput } from './masked-output';
import { exitOutcome, type SpawnedTool } from './process';
import type { SandboxBind } from './sandbox';
import type { JobSandbox } from './sandboxed-job';
import { createWorkDir, handOverWorkDir, removeWorkDir, WorkDirError, writeWorkFiles } from './work-dir';

/** How long unpacking a project's commit into a run's work dir may take. */
export const PROJECT_COPY_TIMEOUT_MS = 300_000;

/** One attempt of a run's tool, as resolved by the side holding the records (services/runs/run-preparation.ts). */
export interface ToolExecution {
  runId: string;
  attempt: number;
  workDir: string;
  binary: string;
  argv: string[];
  env: Record<string, string>;
  /** Text, or bytes (a terraform run's saved plan). */
  files: Record<string, string | Buffer>;
  /** What the sandbox shows the tool besides its work dir (a terraform binary, its state, a provider mirror). */
  binds?: SandboxBind[];
  /** Every secret value the output masker hides (the run's, its credentials', the executing process's own). */
  maskValues: string[];
  /** Written to the log before the tool starts (a requeued attempt says so). */
  preface?: string;
}

/** What an attempt's afterExit may still do while the work dir and the log are open. */
export interface AttemptTail {
  /** Starts another process of the attempt in its work dir (a terraform apply after its plan), and waits for it; a cancel kills it. */
  launchAgain(argv: string[]): Promise<ExecutionOutcome>;
  /** A `[cairn] ` line in the run's log. */
  note(line: string): void;
}

export interface ToolExecutionHooks<T> {
  /** Places the project's tree at the run's commit into the work dir; undefined for a run without a project. */
  placeProject?: (workDir: string) => Promise<void>;
  /** Stores a batch of masked output; a throw is retried by the sink. */
  storeLog: (data: Buffer) => Promise<void>;
  onLogError: (err: unknown) => void;
  /** The tool has started (its pid, for the lease). */
  onStarted?: (pid: number) => void;
  /** A cancel (a person's, the timeout's, or a lost lease) kills the tool. */
  cancelSignal: AbortSignal;
  /**
   * After the tool has exited, before its output is closed and the work dir goes: may throw (a
   * cancel reported as one), read results out of the work dir, or run a further phase.
   */
  afterExit: (workDir: string, outcome: ExecutionOutcome, tail: AttemptTail) => Promise<T>;
  onExecutionChange?: (delta: 1 | -1) => void;
}

/** The environment a tool sees: none of the executing process's own (it holds database and key material). */
function toolEnvironment(execution: ToolExecution): Record<string, string> {
  return {
    ...execution.env,
    PATH: toolPath(),
    HOME: execution.workDir,
    LANG: 'C.UTF-8',
    TMPDIR: execution.workDir,
    CAIRN_RUN_ID: execution.runId,
    // A requeued run starts again from the top: a tool may use this to pick up where it was.
    CAIRN_RUN_ATTEMPT: String(execution.attempt),
  };
}

/**
 * Runs one attempt of a run's tool, the same way on the pool and on a relay worker: a fresh work
 * dir with the tool's files (then handed to the run account, then the project's tree unpacked
 * into it), the tool started in the sandbox through the launcher, every byte it writes through the
 * secret masker into the log sink, its exit read, and the work dir removed whatever happened.
 */
export async function executeTool<T = ExecutionOutcome>(
  site: JobSandbox,
  launcher: ToolLauncher,
  execution: ToolExecution,
  hooks: ToolExecutionHooks<T>,
): Promise<ExecutionOutcome | T> {
  const { workDir } = execution;
  const sink = new LogSink(hooks.storeLog, hooks.onLogError);
  if (execution.preface) sink.write(Buffer.from(execution.preface));
  const output = new MaskedOutput(createMasker(execution.maskValues), (data) => sink.write(data));
  try {
    await createWorkDir(workDir);
    await writeWorkFiles(workDir, execution.files, site.sandbox?.user);
    await handOverWorkDir(workDir, site.sandbox?.user);
    await hooks.placeProject?.(workDir);
  } catch (err) {
    // Nothing of the run is left behind, its credential files least of all, whatever failed.
    await removeWorkDir(workDir);
    await sink.close();
    if (err instanceof GitError) return { kind: 'spawn_failed', message: `the project's tree could not be placed in the run's work dir: ${err.message}` };
    if (err instanceof WorkDirError) return { kind: 'spawn_failed', message: err.message };
    throw err;
  }

  /** One process of the attempt, started in the sandbox through the launcher; its exit read. */
  const launch = async (argv: string[]): Promise<ExecutionOutcome> => {
    let tool: SpawnedTool;
    try {
      tool = await launcher.launch(argv, {
        cwd: workDir,
        env: toolEnvironment(execution),
        onOutput: (chunk) => output.write(chunk),
        binds: execution.binds,
      });
    } catch (err) {
      if (err instanceof LauncherStopped) throw err;
      return { kind: 'spawn_failed', message: `could not start ${execution.binary}: ${(err as Error).message}` };
    }
    hooks.onStarted?.(tool.pid);
    const onCancel = () => tool.kill();
    hooks.cancelSignal.addEventListener('abort', onCancel);
    // A cancel that arrived while the tool was starting has already fired its event.
    if (hooks.cancelSignal.aborted) onCancel();
    try {
      // A launcher that dies takes the execution with it: the error fails this attempt.
      return exitOutcome(await tool.exited);
    } finally {
      hooks.cancelSignal.removeEventListener('abort', onCancel);
    }
  };

  hooks.onExecutionChange?.(1);
  let outputOpen = true;
  const closeOutput = async () => {
    if (!outputOpen) return;
    outputOpen = false;
    output.end();
    await sink.close();
  };
  try {
    const outcome = await launch(execution.argv);
    if (outcome.kind === 'spawn_failed') return outcome;
    const tail: AttemptTail = { launchAgain: launch, note: (line) => output.write(Buffer.from(`[cairn] ${line}\n`)) };
    try {
      return await hooks.afterExit(workDir, outcome, tail);
    } finally {
      await closeOutput();
    }
  } finally {
    await closeOutput().catch(() => undefined);
    hooks.onExecutionChange?.(-1);
    await removeWorkDir(workDir);
  }
}

/** Unpacks a project's commit from this process's project cache into the work dir, in the sandbox (runtime/git.ts). */
export function projectFromCache(site: JobSandbox, project: { id: string; commit: string }): (workDir: string) => Promise<void> {
  return (workDir) => extractCommit(site, checkoutDir(site.projectsDir, project.id), project.commit, workDir, PROJECT_COPY_TIMEOUT_MS);
}
