// Ends a jest run with one plain line, "Tests: N passed, N failed[, N skipped]", that any CI reads,
// after one line per lane (jest project): its files, the seconds they took in all, and the span
// from its first file's start to its last file's end; then the machine's CPU over the run and the
// files that cost the most CPU (test/support/cleanup.ts records each file's), since the lanes are
// bound by the cores they share.
const { existsSync, readFileSync, rmSync } = require('node:fs');
const os = require('node:os');

/**
 * The machine's busy and total CPU ticks so far (/proc/stat), or undefined without /proc; the
 * hypervisor's steal in neither, as embedded/process-cpu.ts machineCpuTicks reads them (this plain
 * JS reporter cannot load that TypeScript module).
 */
function machineTicks() {
  try {
    const [, ...ticks] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).map(Number);
    const idle = ticks[3] + (ticks[4] ?? 0);
    const total = ticks.slice(0, 8).reduce((a, b) => a + b, 0) - (ticks[7] ?? 0);
    return { busy: total - idle, total };
  } catch {
    return undefined;
  }
}

class SummaryReporter {
  onRunStart() {
    this.startTicks = machineTicks();
  }

  onRunComplete(_contexts, results) {
    const lanes = new Map();
    for (const file of results.testResults) {
      const name = file.displayName?.name ?? 'tests';
      const lane = lanes.get(name) ?? { files: 0, busy: 0, start: Infinity, end: 0 };
      lane.files += 1;
      lane.busy += file.perfStats.runtime;
      lane.start = Math.min(lane.start, file.perfStats.start);
      lane.end = Math.max(lane.end, file.perfStats.end);
      lanes.set(name, lane);
    }
    const seconds = (ms) => `${Math.round(ms / 1000)} s`;
    for (const [name, lane] of lanes) {
      process.stdout.write(`\nLane ${name}: ${lane.files} files, ${seconds(lane.busy)} in files, ${seconds(lane.end - lane.start)} from first start to last end`);
    }
    this.printCpu();
    const skipped = results.numPendingTests + results.numTodoTests;
    const failed = results.numFailedTests + results.numRuntimeErrorTestSuites;
    process.stdout.write(`\nTests: ${results.numPassedTests} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
  }
}

SummaryReporter.prototype.printCpu = function printCpu() {
  const end = machineTicks();
  if (this.startTicks && end) {
    const share = (end.busy - this.startTicks.busy) / (end.total - this.startTicks.total);
    const seconds = ((end.busy - this.startTicks.busy) / 100).toFixed(0);
    process.stdout.write(`\nMachine CPU: ${(share * 100).toFixed(0)}% busy over the run on ${os.availableParallelism()} cores (${seconds} CPU s)`);
  }
  const log = process.env.CAIRN_TEST_CPU_LOG;
  if (!log || !existsSync(log)) return;
  const files = readFileSync(log, 'utf8').trim().split('\n').filter(Boolean).map((line) => JSON.parse(line));
  rmSync(log, { force: true });
  const total = files.reduce((sum, f) => sum + f.cpu, 0);
  const top = files.sort((a, b) => b.cpu - a.cpu).slice(0, 12).map((f) => `${f.file} ${f.cpu.toFixed(0)} s`);
  process.stdout.write(`\nCPU in test files and the processes they started: ${total.toFixed(0)} s; most: ${top.join(', ')}`);
};

module.exports = SummaryReporter;
