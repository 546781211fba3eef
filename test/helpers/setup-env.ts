// Quiet logs in tests unless a test asks for them.
process.env.LOG_LEVEL = process.env.TEST_LOG_LEVEL ?? 'silent';
