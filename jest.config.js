/** Unit tests are pure; integration tests share one Temporal dev server and one PostgreSQL (see test/support). */
module.exports = {
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['@swc/jest'] },
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  setupFilesAfterEnv: ['<rootDir>/test/support/cleanup.ts'],
  testTimeout: 120000,
  // Two cores: one test file at a time keeps timings honest and the shared servers unhurried.
  maxWorkers: 1,
  reporters: ['default', '<rootDir>/test/support/summary-reporter.js'],
};
