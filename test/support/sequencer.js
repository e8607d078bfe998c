// Longest first, so no worker is left with a long file once the others have run out: the seconds
// a file took last time on this machine (jest's cache) where there is a record, else the figure
// below measured on 2 cores, else its size (a fresh clone, as in CI, has no record).
const path = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;

const SECONDS_ON_TWO_CORES = {
  'test/integration/schedules.test.ts': 100,
  'test/integration/durability.test.ts': 70,
  'test/integration/cli.test.ts': 60,
  'test/integration/composed-inventories.test.ts': 45,
  'test/integration/schedule-durability.test.ts': 42,
  'test/integration/notifications.test.ts': 42,
  'test/integration/projects.test.ts': 40,
  'test/integration/workflows.test.ts': 40,
  'test/integration/access-matrix.test.ts': 40,
  'test/e2e/console.test.ts': 40,
  'test/integration/workflow-edges.test.ts': 40,
  'test/integration/time-skipping.test.ts': 35,
  'test/integration/run-stream.test.ts': 35,
  'test/integration/submission-fields.test.ts': 35,
  'test/integration/facts.test.ts': 35,
  'test/integration/notification-durability.test.ts': 32,
};

/** Seconds per byte of a test file never timed: about what an integration file takes. */
const SECONDS_PER_BYTE = 1 / 1000;

class LongestFirst extends Sequencer {
  sort(tests) {
    const estimate = (test) => {
      const timed = this.time(test);
      if (timed != null) return timed / 1000;
      const known = SECONDS_ON_TWO_CORES[path.relative(test.context.config.rootDir, test.path)];
      if (known != null) return known;
      return (test.context.hasteFS.getSize(test.path) ?? 0) * SECONDS_PER_BYTE;
    };
    const seconds = new Map(tests.map((test) => [test, estimate(test)]));
    return [...tests].sort((a, b) => (this.hasFailed(a) === this.hasFailed(b) ? seconds.get(b) - seconds.get(a) : this.hasFailed(a) ? -1 : 1));
  }
}

module.exports = LongestFirst;
