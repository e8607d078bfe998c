/** Unit tests are pure; integration tests share one Temporal dev server and one PostgreSQL (see test/support). */
module.exports = {
  testEnvironment: 'node',
  // jose ships ECMAScript modules only; jest's CommonJS runtime needs them compiled like our sources.
  transform: { '^.+\\.ts$': ['@swc/jest'], '/node_modules/jose/.+\\.js$': ['@swc/jest'] },
  transformIgnorePatterns: ['/node_modules/(?!jose/)'],
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  setupFilesAfterEnv: ['<rootDir>/test/support/cleanup.ts'],
  testTimeout: 120000,
  // Two cores: one test file at a time keeps timings honest and the shared servers unhurried.
  maxWorkers: 1,
  reporters: ['default', '<rootDir>/test/support/summary-reporter.js'],
};
