import { spawn } from 'node:child_process';
import { machineCpuTicks, processTable, processTreeCpuSeconds } from '../../embedded/process-cpu';

// The test summary and the capacity benchmark charge a process tree with its CPU, reaped children
// included: a child that burns CPU and exits must show in its parent's tree and not in another's.

/** A child node process that spins for `ms` of wall time, then exits; resolves when it has been reaped. */
function burn(ms: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', `const end = Date.now() + ${ms}; while (Date.now() < end);`], { stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', () => resolve());
  });
}

test('a reaped child\'s CPU is in its parent\'s tree, and the machine counts it busy', async () => {
  const treeBefore = processTreeCpuSeconds(process.pid);
  const ownBefore = process.cpuUsage();
  const machineBefore = machineCpuTicks()!;
  await burn(600);
  const own = process.cpuUsage(ownBefore);
  const grown = processTreeCpuSeconds(process.pid) - treeBefore - (own.user + own.system) / 1e6;
  // The child spun for 0.6 s of wall time; on a busy machine it gets less than a whole core.
  expect(grown).toBeGreaterThan(0.1);
  expect(grown).toBeLessThan(5);
  const machine = machineCpuTicks()!;
  expect(machine.busy - machineBefore.busy).toBeGreaterThan(0);
  expect(machine.total - machineBefore.total).toBeGreaterThanOrEqual(machine.busy - machineBefore.busy);
});

test('a tree holds the trees below it, and a gone process reads as nothing', async () => {
  const parentTree = processTreeCpuSeconds(process.ppid);
  expect(parentTree).toBeGreaterThanOrEqual(processTreeCpuSeconds(process.pid));
  // pid 2^22 + 1 is above Linux's pid_max: no such process.
  expect(processTreeCpuSeconds(4_194_305)).toBe(0);
});

test('a subtree left out is not charged to the tree above it', async () => {
  // A living child spinning: its CPU is its own (not yet reaped into this process's counters).
  const child = spawn(process.execPath, ['-e', 'const end = Date.now() + 5000; while (Date.now() < end);'], { stdio: 'ignore' });
  try {
    await new Promise((r) => setTimeout(r, 700));
    const table = processTable();
    const childCpu = processTreeCpuSeconds(child.pid!, table);
    expect(childCpu).toBeGreaterThan(0.1);
    const whole = processTreeCpuSeconds(process.pid, table);
    const without = processTreeCpuSeconds(process.pid, table, [child.pid!]);
    expect(whole - without).toBeCloseTo(childCpu, 5);
  } finally {
    child.kill('SIGKILL');
  }
});
