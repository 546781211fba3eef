/** Jest: ts-jest transpiles (tsc --noEmit type-checks separately); tests run in band against real Redis. */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/src', '<rootDir>/workers', '<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json', diagnostics: false }] },
  setupFiles: ['<rootDir>/test/helpers/setup-env.ts'],
  testTimeout: 30000,
  maxWorkers: 1,
};
