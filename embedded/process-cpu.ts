import { readFileSync, readdirSync } from 'node:fs';

// What processes on this machine have spent in CPU, from /proc: the test summary's per-file cost
// and the benchmarks' per-component cost read it the same way. Linux only; without /proc every
// reading is undefined (or 0 for a tree), never an error.

/** Clock ticks per second in /proc (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** A process's parent and CPU seconds (utime, stime, cutime, cstime of /proc/PID/stat), or undefined once gone. */
function procStat(pid: number | string): { ppid: number; cpu: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The fields after the command name (which may hold spaces) start with state, field 3.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(fields[1]), cpu: [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0) / TICKS_PER_SECOND };
  } catch {
    return undefined;
  }
}

/**
 * CPU seconds used so far by a process and every process below it, living or reaped (a reaped
 * child's time is in its parent's cutime and cstime): a server's own work plus its tool launchers
 * and the runs they started, or PostgreSQL's postmaster and all its backends.
 */
export function processTreeCpuSeconds(rootPid: number): number {
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return 0;
  }
  const stats = new Map<number, { ppid: number; cpu: number }>();
  for (const pid of pids) {
    const stat = procStat(pid);
    if (stat) stats.set(Number(pid), stat);
  }
  const below = (pid: number): boolean => {
    for (let at: number | undefined = pid; at !== undefined && at > 1; at = stats.get(at)?.ppid) if (at === rootPid) return true;
    return false;
  };
  let total = 0;
  for (const [pid, stat] of stats) if (below(pid)) total += stat.cpu;
  return total;
}

/** The machine's busy and total CPU ticks since boot, over all cores (the `cpu` line of /proc/stat). */
export function machineCpuTicks(): { busy: number; total: number } | undefined {
  try {
    const [, ...ticks] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).map(Number);
    const total = ticks.slice(0, 8).reduce((a, b) => a + b, 0);
    // idle and iowait are the fourth and fifth fields.
    return { busy: total - ticks[3] - ticks[4], total };
  } catch {
    return undefined;
  }
}
