import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

export const ROOT = path.resolve(__dirname, '..', '..');

/** Pids of the processes whose command line matches the regex `pattern` (pgrep -f); none is an empty list. */
export function processesMatching(pattern: string): string[] {
  try {
    return execFileSync('pgrep', ['-f', pattern], { encoding: 'utf8' }).split('\n').filter(Boolean);
  } catch (err) {
    // pgrep exits 1 when nothing matches.
    if ((err as { status?: number }).status === 1) return [];
    throw err;
  }
}

/** Whether the process is this test's own child; one that ended meanwhile (another file's launcher) is not. */
export function isChildOfThisProcess(pid: string): boolean {
  return execFileSync('sh', ['-c', `ps -o ppid= -p ${Number(pid)} || true`]).toString().trim() === String(process.pid);
}

export interface ChildHandle {
  child: ChildProcess;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  /** Resolves with the first match of the pattern in the output. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Starts a process. With `group`, it leads a process group of its own and `stop` signals the whole
 * group: for a command such as `npm start` whose real work runs in a child of its own.
 */
export function startChild(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
  options: { cwd?: string; group?: boolean } = {},
): ChildHandle {
  const child = spawn(command, args, { cwd: options.cwd ?? ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], detached: options.group });
  let output = '';
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
    for (const listener of listeners) listener();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    output: () => output,
    exited,
    waitFor(pattern, timeoutMs = 90_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = output.match(pattern);
          if (match) {
            cleanup();
            resolve(match);
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`timed out waiting for ${pattern} in:\n${output.slice(-3000)}`));
        }, timeoutMs);
        const onExit = () => {
          check();
          cleanup();
          reject(new Error(`process exited before ${pattern} appeared:\n${output.slice(-3000)}`));
        };
        const cleanup = () => {
          clearTimeout(timer);
          listeners.delete(check);
          child.off('exit', onExit);
        };
        listeners.add(check);
        child.once('exit', onExit);
        check();
      });
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      if (options.group) process.kill(-child.pid!, signal);
      else child.kill(signal);
      await exited;
    },
  };
}

/** `node bin/run-ts.js <script> args…`: a TypeScript script in its own process. */
export function startTsScript(script: string, args: string[], env?: NodeJS.ProcessEnv): ChildHandle {
  return startChild(process.execPath, [path.join(ROOT, 'bin', 'run-ts.js'), script, ...args], env);
}

/** `cairn serve` (or another command) as a real process. */
export function startCairn(args: string[], env: NodeJS.ProcessEnv): ChildHandle {
  return startChild(process.execPath, [path.join(ROOT, 'bin', 'cairn.js'), ...args], env);
}
