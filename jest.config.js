/**
 * Jest for `npm test`: everything except test/e2e/ (that is `npm run test:e2e`, jest.e2e.config.js).
 * ts-jest transpiles (tsc --noEmit type-checks separately); tests run in band. The global setup starts a
 * redis-server of the run's own on a free 127.0.0.1 port (or uses TEST_REDIS_URL) and the teardown stops it.
 */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/src', '<rootDir>/workers', '<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/e2e/', '<rootDir>/test/reliability/'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json', diagnostics: false }] },
  globalSetup: '<rootDir>/test/helpers/global-setup.ts',
  globalTeardown: '<rootDir>/test/helpers/global-teardown.ts',
  setupFiles: ['<rootDir>/test/helpers/setup-env.ts'],
  testTimeout: 30000,
  maxWorkers: 1,
};
