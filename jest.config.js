const os = require('node:os');

/**
 * The test lanes, all run by `npm test` in one pool of workers:
 * - unit: test/unit, pure code, no servers;
 * - integration: test/integration and test/replay, each file with its own database (copied from a
 *   template migrated once) and task queue on the one Temporal dev server and PostgreSQL that
 *   global-setup starts, so files run side by side;
 * - timers: long waits in simulated time on the time-skipping Temporal server (test/support/time-skipping.ts).
 * Load-sized tests run a small version by default and their full size with CAIRN_SOAK=1
 * (test/support/soak.ts). `npx jest --selectProjects unit` runs one lane.
 */
// Each file's CPU is recorded here for the summary (test/support/cleanup.ts, summary-reporter.js).
process.env.CAIRN_TEST_CPU_LOG ??= require('node:path').join(os.tmpdir(), `cairn-test-cpu-${process.pid}.ndjson`);

const TIMERS = ['<rootDir>/test/integration/time-skipping.test.ts'];

/**
 * The shared Temporal dev server and PostgreSQL (test/support/global-setup.ts), for the lanes that
 * need them: jest runs a setup module once however many projects name it, and only when tests of
 * one of them run, so the unit lane alone starts nothing.
 */
const servers = {
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
};

const shared = {
  testEnvironment: 'node',
  // jose ships ECMAScript modules only; jest's CommonJS runtime needs them compiled like our sources.
  transform: { '^.+\\.ts$': ['@swc/jest'], '/node_modules/jose/.+\\.js$': ['@swc/jest'] },
  transformIgnorePatterns: ['/node_modules/(?!jose/)'],
  setupFiles: ['<rootDir>/test/support/compile-cache.ts'],
  setupFilesAfterEnv: ['<rootDir>/test/support/cleanup.ts'],
};

module.exports = {
  projects: [
    { ...shared, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    {
      ...shared,
      ...servers,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts', '<rootDir>/test/replay/**/*.test.ts', '<rootDir>/test/e2e/**/*.test.ts'],
      testPathIgnorePatterns: ['/node_modules/', ...TIMERS],
    },
    { ...shared, ...servers, displayName: 'timers', testMatch: TIMERS },
  ],
  testTimeout: 120000,
  // One worker more than there are cores (three on a 2-core machine), at most 8: an integration
  // file spends about half its time waiting on Temporal, PostgreSQL and the processes it starts,
  // and the workers share one Temporal dev server and one PostgreSQL. The requeue tests that kill
  // a launcher per attempt wait on what happened, not on how long it took, so a busy machine only
  // slows them.
  maxWorkers: Math.min(8, os.availableParallelism() + 1),
  // A worker keeps some 30 to 40 MB of heap for each integration file it ran (measured with a file
  // that starts a server, runs one run and stops it), so over a run it grows past 2 GB; past this
  // much after a file, jest starts it afresh (losing only its code cache).
  workerIdleMemoryLimit: '1GB',
  testSequencer: '<rootDir>/test/support/sequencer.js',
  reporters: ['default', '<rootDir>/test/support/summary-reporter.js'],
};
