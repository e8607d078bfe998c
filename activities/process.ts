import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';

export interface ProcessExit {
  exitCode: number | null;
  signal: string | null;
}

export interface SpawnedTool {
  pid: number;
  exited: Promise<ProcessExit>;
  /** Ends the whole process group: SIGTERM, then SIGKILL after the grace period. */
  kill(graceMs?: number): void;
}

/**
 * Starts argv in its own process group with stdout and stderr on one pipe, so the captured output
 * keeps the exact order the tool wrote it in. `sh` joins the two streams and then execs the tool.
 */
export function spawnTool(
  argv: string[],
  options: { cwd: string; env: Record<string, string>; onOutput: (chunk: Buffer) => void },
): SpawnedTool {
  const child = spawn('/bin/sh', ['-c', 'exec "$@" 2>&1', 'sh', ...argv], {
    cwd: options.cwd,
    env: options.env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.on('data', options.onOutput);
  child.stderr.on('data', options.onOutput);
  const exited = new Promise<ProcessExit>((resolve, reject) => {
    child.once('error', reject);
    // 'close' waits for the pipes to drain, so every byte is delivered before the exit is reported.
    child.once('close', (exitCode, signal) => resolve({ exitCode, signal }));
  });
  const pid = child.pid!;
  return {
    pid,
    exited,
    kill(graceMs = 5000) {
      signalGroup(pid, 'SIGTERM');
      const timer = setTimeout(() => signalGroup(pid, 'SIGKILL'), graceMs);
      exited.finally(() => clearTimeout(timer)).catch(() => undefined);
    },
  };
}

export function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    /* the group is already gone */
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
