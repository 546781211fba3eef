/** Jest for `npm run test:e2e`: only test/e2e/ (Debian's chromium, the built api + worker processes); same setup as jest.config.js. */
const base = require('./jest.config');

module.exports = {
  ...base,
  roots: ['<rootDir>/test/e2e'],
  testPathIgnorePatterns: ['/node_modules/'],
};
