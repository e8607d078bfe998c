// Ends a jest run with one plain line, "Tests: N passed, N failed[, N skipped]", that any CI reads,
// after one line per lane (jest project): its files, the seconds they took in all, and the span
// from its first file's start to its last file's end.
class SummaryReporter {
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
    const skipped = results.numPendingTests + results.numTodoTests;
    const failed = results.numFailedTests + results.numRuntimeErrorTestSuites;
    process.stdout.write(`\nTests: ${results.numPassedTests} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
  }
}
module.exports = SummaryReporter;
