import { readFileSync, readdirSync } from 'node:fs';

// What processes on this machine have spent in CPU, from /proc: the test summary's per-file cost
// and the benchmarks' per-component cost read it the same way. Linux only; without /proc every
// reading is undefined (or 0 for a tree), never an error.

/** Clock ticks per second in /proc (USER_HZ, 100 on Linux). */
export const TICKS_PER_SECOND = 100;

/** One process as /proc shows it: its parent, its command name and its CPU seconds (utime, stime, cutime, cstime). */
export interface ProcessEntry {
  ppid: number;
  command: string;
  cpu: number;
}

function procStat(pid: string): ProcessEntry | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name sits in parentheses and may hold spaces; the fields after it start with state, field 3.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return {
      ppid: Number(fields[1]),
      command: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')),
      cpu: [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0) / TICKS_PER_SECOND,
    };
  } catch {
    return undefined;
  }
}

/** Every process on the machine now, by pid; empty where /proc is missing. One read serves many questions. */
export function processTable(): Map<number, ProcessEntry> {
  const table = new Map<number, ProcessEntry>();
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return table;
  }
  for (const pid of pids) {
    const entry = procStat(pid);
    if (entry) table.set(Number(pid), entry);
  }
  return table;
}

/**
 * CPU seconds used so far by a process and every process below it, living or reaped (a reaped
 * child's time is in its parent's cutime and cstime): a server's own work plus its tool launchers
 * and the runs they started, or PostgreSQL's postmaster and all its backends. The subtrees of
 * `excluding` are left out (a benchmark that started the Temporal dev server charges it apart).
 * Several trees read at one moment share one `table`.
 */
export function processTreeCpuSeconds(rootPid: number, table = processTable(), excluding: number[] = []): number {
  const below = (pid: number): boolean => {
    for (let at: number | undefined = pid; at !== undefined && at > 1; at = table.get(at)?.ppid) {
      if (at === rootPid) return true;
      if (excluding.includes(at)) return false;
    }
    return false;
  };
  let total = 0;
  for (const [pid, entry] of table) if (below(pid)) total += entry.cpu;
  return total;
}

/**
 * The machine's busy and total CPU ticks since boot, over all cores (the `cpu` line of /proc/stat),
 * and the ticks the hypervisor gave to other guests while this one wanted to run (steal). Steal is
 * neither busy nor in the total: it is no work of this machine's, and on a shared host it comes
 * and goes with the neighbours.
 */
export function machineCpuTicks(): { busy: number; total: number; steal: number } | undefined {
  try {
    const [, ...ticks] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).map(Number);
    // user nice system idle iowait irq softirq steal: idle and iowait are the fourth and fifth.
    const steal = ticks[7] ?? 0;
    const total = ticks.slice(0, 8).reduce((a, b) => a + b, 0) - steal;
    return { busy: total - ticks[3] - ticks[4], total, steal };
  } catch {
    return undefined;
  }
}
