import { readFileSync, readdirSync } from 'node:fs';

/**
 * The CPU time (user and system, in milliseconds) `work` takes in this process, and its answer.
 * A bound on an algorithm's cost checks CPU time, not the wall clock: other test workers and
 * whatever else shares the machine slow the wall clock, never the work itself.
 */
export function cpuTimed<T>(work: () => T): { value: T; ms: number } {
  const before = process.cpuUsage();
  const value = work();
  const used = process.cpuUsage(before);
  return { value, ms: (used.user + used.system) / 1000 };
}

/** Clock ticks per second in /proc (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** A process's parent and CPU seconds (utime, stime, cutime, cstime of /proc/PID/stat), or undefined once gone. */
function procStat(pid: string): { ppid: number; cpu: number } | undefined {
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
 * CPU seconds used so far by this process and every process below it, living or reaped: a test
 * file's own work plus its servers' tool launchers and the runs they started. 0 where /proc is missing.
 */
export function processTreeCpuSeconds(): number {
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
    for (let at: number | undefined = pid; at !== undefined && at > 1; at = stats.get(at)?.ppid) if (at === process.pid) return true;
    return false;
  };
  let total = 0;
  for (const [pid, stat] of stats) if (below(pid)) total += stat.cpu;
  return total;
}
