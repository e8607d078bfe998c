import { promises as fs } from 'node:fs';
import path from 'node:path';
import { exceededBoundError } from '../core/runs/run-outcome';
import { toolPath } from '../tools/registry';
import { spawnTool } from './process';
import type { RunNetwork, SandboxBind, SandboxSettings } from './sandbox';
import { createWorkDir, handOverWorkDir, readWorkFile, removeWorkDir, writeWorkFiles } from './work-dir';

/**
 * Cairn's own short jobs over bytes a user controls, run where a run would run them: in the run
 * sandbox, as the run account, under the runs' bounds and network rules. A git fetch of a
 * project, unpacking a commit's tree into a run's work dir, reading a project's tree, a dynamic
 * inventory script, `ansible-inventory` and `ansible --list-hosts` for previews, PyYAML reading an
 * inventory: none of them runs on the server as itself, so no link, option or pattern in what
 * they read can reach the server's files.
 *
 * A job gets a scratch dir of its own under the work root (its working directory and HOME, with
 * the files it is given), a scrubbed environment (PATH, HOME, LANG, TMPDIR and what the job
 * names), the host paths it binds, and a timeout after which the sandbox is ended. What the job
 * writes to standard output lands in a file of the scratch dir, read back within a bound; what it
 * writes to standard error is kept (its last part) for the error.
 */

/**
 * Where jobs run: the run sandbox (undefined only with --run-isolation none; its bounds hold every
 * job as they hold runs), the work root their dirs are made in, and this process's cache of
 * project repositories (runtime/git.ts), each a place the run account can enter.
 */
export interface JobSandbox {
  sandbox: SandboxSettings | undefined;
  workRoot: string;
  projectsDir: string;
  /**
   * Where terraform, opentofu and go runs keep what outlives a run (runtime/iac.ts): the binaries
   * staged for the sandbox, the local backends' state, the go caches. Absent for a site that runs
   * no tool (Cairn's own jobs).
   */
  iacDir?: string;
  iacProviderMirror?: string;
  iacProviderDownloads?: boolean;
  /** --module-fetch-timeout, seconds. */
  moduleFetchTimeout?: number;
}

export interface SandboxedJob {
  /** What the job is, for errors: "git fetch", "the script", "ansible-inventory". */
  what: string;
  /** The scratch dir's name prefix. */
  name: string;
  argv: string[];
  files?: Record<string, string>;
  /** Host paths shown in the sandbox (a project's repository); read-only unless writable. */
  binds?: SandboxBind[];
  env?: Record<string, string>;
  timeoutMs: number;
  /** The most of standard output read back; more is an error naming the bound. */
  maxOutputBytes: number;
  /** The job's network; the runs' (--run-network) unless the job needs none. */
  network?: RunNetwork;
  /** Runs in this existing dir (a run's work dir, already handed over) instead of a scratch dir of its own. */
  dir?: string;
  /** Ends the job when aborted (an activity's cancellation); it then fails as stopped. */
  signal?: AbortSignal;
}

/** A job that did not finish well: its message names the job and ends with the last of what it printed. */
export class JobFailed extends Error {
  constructor(
    message: string,
    /** The last of standard error, for callers that read it (a limit matching no host). */
    readonly printed: string,
    readonly exitCode: number | null,
  ) {
    super(message);
  }
}

/** How much of standard error a failure keeps. */
const ERROR_TAIL_BYTES = 2000;
/** The file standard output goes to, in the job's dir. */
const OUTPUT_FILE = '.cairn-job.out';

/** Runs the job and answers its standard output; a failure, a timeout or output past its bound is a JobFailed. */
export async function runSandboxedJob(where: JobSandbox, job: SandboxedJob): Promise<Buffer> {
  const owner = where.sandbox?.user;
  let dir = job.dir;
  if (!dir) {
    await fs.mkdir(where.workRoot, { recursive: true, mode: 0o711 });
    dir = await fs.mkdtemp(path.join(where.workRoot, `${job.name}-`));
    await createWorkDir(dir);
    await writeWorkFiles(dir, job.files ?? {}, owner);
    await handOverWorkDir(dir, owner);
  } else if (job.files && Object.keys(job.files).length) {
    throw new Error('a job run in an existing dir takes no files');
  }
  const scratch = dir;
  try {
    let tail = Buffer.alloc(0);
    const sandbox = where.sandbox && job.network && job.network !== where.sandbox.network ? { ...where.sandbox, network: job.network } : where.sandbox;
    const tool = await spawnTool(['/bin/sh', '-c', `exec "$@" >${OUTPUT_FILE}`, 'cairn-job', ...job.argv], {
      cwd: scratch,
      env: { ...job.env, PATH: toolPath(), HOME: scratch, LANG: 'C.UTF-8', TMPDIR: scratch },
      onOutput: (chunk) => {
        tail = Buffer.concat([tail, chunk]);
        if (tail.length > ERROR_TAIL_BYTES) tail = tail.subarray(tail.length - ERROR_TAIL_BYTES);
      },
      sandbox,
      binds: job.binds,
    }).catch((err: Error) => {
      throw new JobFailed(`${job.what} could not be started: ${err.message}`, '', null);
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      tool.kill(1000);
    }, job.timeoutMs);
    const stop = () => tool.kill(1000);
    job.signal?.addEventListener('abort', stop);
    if (job.signal?.aborted) stop();
    const exit = await tool.exited.finally(() => {
      clearTimeout(timer);
      job.signal?.removeEventListener('abort', stop);
    });
    const printed = tail.toString('utf8').trim();
    if (job.signal?.aborted) throw new JobFailed(`${job.what} was stopped`, printed, null);
    if (timedOut) throw new JobFailed(`${job.what} did not finish within ${Math.round(job.timeoutMs / 1000)} s and was stopped`, printed, null);
    if (exit.exceeded) throw new JobFailed(`${job.what} ${exceededBoundError(exit.exceeded)}`, printed, exit.exitCode);
    if (exit.exitCode !== 0) {
      const how = exit.signal ? `was ended by ${exit.signal}` : `exited with code ${exit.exitCode}`;
      throw new JobFailed(`${job.what} ${how}${printed ? `: ${printed}` : ''}`, printed, exit.exitCode);
    }
    const output = await readWorkFile(scratch, OUTPUT_FILE, job.maxOutputBytes + 1);
    if (!output) throw new JobFailed(`${job.what} left no output`, printed, 0);
    if (output.size > job.maxOutputBytes) throw new JobFailed(`${job.what} printed ${output.size} bytes; at most ${job.maxOutputBytes} are read`, printed, 0);
    return output.bytes;
  } finally {
    if (job.dir) await fs.rm(path.join(scratch, OUTPUT_FILE), { force: true }).catch(() => undefined);
    else await removeWorkDir(scratch);
  }
}
