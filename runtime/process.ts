import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, promises as fs, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import type { ExceededBound, ExecutionOutcome } from '../core/runs/run-outcome';
import { SandboxBounds } from './run-bounds';
import { BLOCK_FD, INFO_FD, sandboxArgs, type SandboxBind, type SandboxSettings } from './sandbox';

export interface ProcessExit {
  exitCode: number | null;
  signal: string | null;
  /** The bound a sandboxed tool crossed, for which it was ended (or which it reached before it ended). */
  exceeded?: ExceededBound;
}

/** How a tool's exit ends its run: failed naming the bound it crossed, else by its exit. */
export function exitOutcome(exit: ProcessExit): ExecutionOutcome {
  if (exit.exceeded) return { kind: 'bound_exceeded', exitCode: exit.exitCode, ...exit.exceeded };
  return { kind: 'exited', exitCode: exit.exitCode, signal: exit.signal };
}

export interface SpawnedTool {
  pid: number;
  exited: Promise<ProcessExit>;
  /** Ends the tool: SIGTERM to its processes, then SIGKILL to all of them after the grace period. */
  kill(graceMs?: number): void;
  /** Stops reading the tool's output (a tool that fills its pipe then waits), and reads it again. */
  pauseOutput?(): void;
  resumeOutput?(): void;
}

export interface SpawnOptions {
  cwd: string;
  env: Record<string, string>;
  onOutput: (chunk: Buffer) => void;
  /** Runs the tool in this sandbox; absent runs it directly (only with --run-isolation none). */
  sandbox?: SandboxSettings;
  /** Host paths the sandbox shows besides the work dir (runtime/sandbox.ts). */
  binds?: SandboxBind[];
}

/** How long the isolated network may take to come up before the start is given up. */
const NETWORK_READY_MS = 10_000;

/**
 * Starts argv in its own process group with stdout and stderr on one pipe, so the captured output
 * keeps the exact order the tool wrote it in. Resolves once the tool runs (in a sandbox: once the
 * sandbox exists and its network is up).
 */
export async function spawnTool(argv: string[], options: SpawnOptions): Promise<SpawnedTool> {
  if (!options.sandbox) return plainTool(argv, options);
  return sandboxedTool(argv, options, options.sandbox);
}

function plainTool(argv: string[], options: SpawnOptions): SpawnedTool {
  const child = spawn('/bin/sh', ['-c', 'exec "$@" 2>&1', 'sh', ...argv], {
    cwd: options.cwd,
    env: options.env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = collect(child, options.onOutput);
  const pid = child.pid!;
  return {
    pid,
    exited,
    ...outputFlow(child),
    kill(graceMs = 5000) {
      signalGroup(pid, 'SIGTERM');
      afterGrace(exited, graceMs, () => signalGroup(pid, 'SIGKILL'));
    },
  };
}

async function sandboxedTool(argv: string[], options: SpawnOptions, sandbox: SandboxSettings): Promise<SpawnedTool> {
  const bounds = await SandboxBounds.open(sandbox.bounds);
  // Started through prlimit with the sandbox's rlimits, as the run account: nothing of the tool's
  // environment passes through a process of higher privilege.
  const start = bounds.command([sandbox.bwrap, ...sandboxArgs(sandbox, options.cwd, argv, options.binds)]);
  let child: ChildProcess;
  try {
    child = spawn(start.file, start.args, {
      cwd: options.cwd,
      env: options.env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe'],
      ...(sandbox.user ? { uid: sandbox.user.uid, gid: sandbox.user.gid } : {}),
    });
  } catch (err) {
    await bounds.finish(options.cwd);
    throw err;
  }
  const ended = collect(child, options.onOutput);
  const pid = child.pid!;
  const block = child.stdio[BLOCK_FD] as Writable;
  // The extra pipes may be reset by a sandbox that fails to start; that shows as its exit.
  for (const fd of [INFO_FD, BLOCK_FD]) child.stdio[fd]?.on('error', () => undefined);
  let network: ChildProcess | undefined;
  const stopAll = () => {
    signalGroup(pid, 'SIGKILL');
    network?.kill('SIGKILL');
  };
  ended.finally(() => network?.kill('SIGKILL')).catch(() => undefined);
  // The exit a caller sees names the bound the sandbox crossed, if it crossed one.
  const exited = ended.then(
    async (exit) => ({ ...exit, exceeded: await bounds.finish(options.cwd) }),
    async (err) => {
      await bounds.finish(options.cwd).catch(() => undefined);
      throw err;
    },
  );
  exited.catch(() => undefined);
  let sandboxPid: number;
  try {
    sandboxPid = await sandboxInitPid(child.stdio[INFO_FD] as Readable, ended);
    // The sandbox's init waits to start the tool: everything of the tool will be born in the cgroup.
    await bounds.confine(sandboxPid);
    if (sandbox.network === 'isolated') {
      await loopbackReady(sandboxPid, ended);
      network = await startIsolatedNetwork(sandbox, sandboxPid, ended);
    }
    block.end('1');
  } catch (err) {
    stopAll();
    await exited.catch(() => undefined);
    throw err;
  }
  const killSandbox = () => {
    signalProcess(sandboxPid, 'SIGKILL');
    stopAll();
  };
  await bounds.watch(options.cwd, sandboxPid, killSandbox);
  return {
    pid,
    exited,
    ...outputFlow(child),
    kill(graceMs = 5000) {
      // Every process of the sandbox but its init gets SIGTERM (the init would take them all down
      // at once); after the grace period the whole sandbox goes.
      signalNamespace(sandboxPid, 'SIGTERM');
      afterGrace(exited, graceMs, killSandbox);
    },
  };
}

/** Output flow control over the tool's stdout and stderr pipes. */
function outputFlow(child: ChildProcess): Pick<SpawnedTool, 'pauseOutput' | 'resumeOutput'> {
  return {
    pauseOutput: () => [child.stdout, child.stderr].forEach((pipe) => pipe?.pause()),
    resumeOutput: () => [child.stdout, child.stderr].forEach((pipe) => pipe?.resume()),
  };
}

/** Relays output and resolves with the exit once every byte is delivered ('close' waits for the pipes). */
function collect(child: ChildProcess, onOutput: (chunk: Buffer) => void): Promise<ProcessExit> {
  child.stdout!.on('data', onOutput);
  child.stderr!.on('data', onOutput);
  return new Promise<ProcessExit>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (exitCode, signal) => resolve({ exitCode, signal }));
  });
}

function afterGrace(exited: Promise<ProcessExit>, graceMs: number, then: () => void): void {
  const timer = setTimeout(then, graceMs);
  exited.finally(() => clearTimeout(timer)).catch(() => undefined);
}

/** The host pid of the sandbox's init, which bwrap writes as JSON on its info fd. */
function sandboxInitPid(info: Readable, exited: Promise<ProcessExit>): Promise<number> {
  return new Promise((resolve, reject) => {
    let text = '';
    info.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      const match = /"child-pid"\s*:\s*(\d+)/.exec(text);
      if (match) resolve(Number(match[1]));
    });
    info.on('error', () => undefined);
    exited.then(() => reject(new Error('the sandbox ended before it started the tool')), reject);
  });
}

/**
 * Resolves once bwrap has brought up the sandbox's loopback (127.0.0.1 is in its routing table).
 * slirp4netns configures the namespace's interfaces too, and bwrap fails if it gets there first.
 */
async function loopbackReady(sandboxPid: number, exited: Promise<ProcessExit>): Promise<void> {
  let ended = false;
  exited.then(() => (ended = true), () => (ended = true));
  const deadline = Date.now() + NETWORK_READY_MS;
  while (!ended && Date.now() < deadline) {
    try {
      // Read at once, not through the thread pool: a small procfs file, polled every 2 ms.
      if (readFileSync(`/proc/${sandboxPid}/net/fib_trie`, 'utf8').includes('127.0.0.1')) return;
    } catch {
      /* not there yet, or already gone */
    }
    await new Promise((r) => setTimeout(r, 2));
  }
  throw new Error(ended ? 'the sandbox ended before it started the tool' : 'the sandbox did not bring up its loopback');
}

/**
 * Connects the sandbox's network namespace to the outside through slirp4netns, with the host's
 * loopback closed, and resolves once the link is up. slirp4netns ends when the tool does, or when
 * this process dies (its exit fd closes).
 *
 * The namespaces are opened the moment bwrap names its sandbox and handed to slirp4netns as open
 * descriptors: bwrap soon moves the sandbox into a nested user namespace, which does not own the
 * network namespace, so going by pid would find the wrong one.
 */
function startIsolatedNetwork(sandbox: SandboxSettings, sandboxPid: number, exited: Promise<ProcessExit>): Promise<ChildProcess> {
  // As root, slirp4netns enters the network namespace directly. Otherwise it must first enter the
  // user namespace that owns it, which is only the sandbox's until bwrap moves into a nested one.
  const namespaces = [openSync(`/proc/${sandboxPid}/ns/net`, 'r')];
  if (process.getuid?.() !== 0) namespaces.push(openSync(`/proc/${sandboxPid}/ns/user`, 'r'));
  const args = ['--configure', '--mtu=65520', '--disable-host-loopback', '--ready-fd=3', '--exit-fd=4'];
  if (namespaces.length > 1) args.push('--userns-path=/proc/self/fd/6');
  args.push('--netns-type=path', '/proc/self/fd/5', 'tap0');
  let slirp: ChildProcess;
  try {
    slirp = spawn(sandbox.slirp4netns!, args, { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe', ...namespaces] });
  } finally {
    for (const fd of namespaces) closeSync(fd);
  }
  for (const fd of [3, 4]) slirp.stdio[fd]?.on('error', () => undefined);
  let stderr = '';
  slirp.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-2000)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(`slirp4netns did not come up within ${NETWORK_READY_MS / 1000} s`), NETWORK_READY_MS);
    const fail = (why: string) => {
      clearTimeout(timer);
      slirp.kill('SIGKILL');
      reject(new Error(`the run's isolated network could not be set up (${why}${stderr ? `: ${stderr.trim().replace(/\s+/g, ' ')}` : ''})`));
    };
    (slirp.stdio[3] as Readable).once('data', () => {
      clearTimeout(timer);
      resolve(slirp);
    });
    slirp.once('error', (err) => fail(err.message));
    slirp.once('exit', (code) => fail(`slirp4netns exited with code ${code}`));
    exited.then(() => fail('the sandbox ended first'), () => undefined);
  });
}

export function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  signalProcess(-pgid, signal);
}

/** Signals a process (or, with a negative pid, a process group) that may be gone already. */
function signalProcess(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    /* already gone */
  }
}

/** Signals every process in the PID namespace whose init is `initPid`, except the init itself. */
function signalNamespace(initPid: number, signal: NodeJS.Signals): void {
  let namespace: string;
  try {
    namespace = readlinkSync(`/proc/${initPid}/ns/pid`);
  } catch {
    return;
  }
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === initPid) continue;
    try {
      if (readlinkSync(`/proc/${pid}/ns/pid`) === namespace) signalProcess(pid, signal);
    } catch {
      /* gone, or not ours to see */
    }
  }
}

/**
 * Ends a process group an earlier attempt of this run left behind on this host (its server was
 * killed). The pid is trusted only while the process still carries the run's id in its environment.
 */
export async function killLeftoverProcess(pid: number, runId: string): Promise<boolean> {
  try {
    const environ = await fs.readFile(`/proc/${pid}/environ`, 'utf8');
    if (!environ.split('\0').includes(`CAIRN_RUN_ID=${runId}`)) return false;
  } catch {
    return false;
  }
  signalGroup(pid, 'SIGKILL');
  return true;
}
