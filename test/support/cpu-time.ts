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

