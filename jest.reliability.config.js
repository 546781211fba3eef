/**
 * Jest for `npm run test:reliability`: the reliability suite under test/reliability/ (hostile input, isolation, faults,
 * abuse), run apart from `npm test` because it takes minutes. Same global setup as jest.config.js (a redis-server of the
 * run's own on a free 127.0.0.1 port); every file matching test/reliability/**\/*.test.ts runs, in band.
 */
const base = require('./jest.config.js');

module.exports = {
  ...base,
  roots: ['<rootDir>/test/reliability'],
  testPathIgnorePatterns: ['/node_modules/'],
  testTimeout: 600000,
};
