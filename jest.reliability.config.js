const base = require('./jest.config'); module.exports = { ...base, roots: ['<rootDir>/test/reliability'], testPathIgnorePatterns: ['/node_modules/'] };
