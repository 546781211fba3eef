import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadEnv, type Env } from '../../src/config/env';
import { createLogger } from '../../src/logger';

export const TEST_TOKEN = 'test-management-token-0123456789';

const dirs: string[] = [];
process.once('exit', () => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

/**
 * A temp directory. Under jest it lives in the run's directory (ENGRAM_TEST_TMPDIR, made by
 * test/helpers/global-setup.ts), which the global teardown removes; elsewhere (bench) it is removed at process exit.
 */
export function tempDir(label = 'engram'): string {
  const dir = fs.mkdtempSync(path.join(process.env.ENGRAM_TEST_TMPDIR ?? os.tmpdir(), `${label}-`));
  dirs.push(dir);
  return dir;
}

/**
 * The Redis tests use: the redis-server the jest globalSetup started (or TEST_REDIS_URL), passed in
 * ENGRAM_TEST_REDIS_URL. Outside jest (bench) it is REDIS_URL or 127.0.0.1:6379.
 */
export function testRedisUrl(): string {
  const url = process.env.ENGRAM_TEST_REDIS_URL;
  if (url) return url;
  if (process.env.JEST_WORKER_ID !== undefined) {
    throw new Error('no test Redis: run jest with its config (jest.config.js), whose globalSetup test/helpers/global-setup.ts starts one');
  }
  return process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
}

/** A unique BullMQ prefix per test file/run, so test runs never share queues. */
export function testPrefix(label: string): string {
  return `t-${label}-${crypto.randomBytes(4).toString('hex')}`;
}

/** A parsed Env over a temp DATA_DIR with its own queue prefix; overrides are raw env strings. */
export function testEnv(overrides: Record<string, string | undefined> = {}): Env {
  return loadEnv({
    NODE_ENV: 'test',
    DATA_DIR: tempDir(),
    QUEUE_PREFIX: testPrefix('q'),
    MANAGEMENT_TOKEN: TEST_TOKEN,
    LOG_LEVEL: 'silent',
    REDIS_URL: testRedisUrl(),
    // The brute-force brake is off in tests that send many wrong credentials on purpose (auth tables, fuzzers); test/reliability/abuse.test.ts turns it on.
    AUTH_FAILURE_LIMIT: '0',
    // Off unless a test turns it on: its daily schedule would leave a delayed job in every test's maintenance queue,
    // and tests that turn the other schedules off wait for that queue to be idle.
    QDRANT_CLEANUP_EVERY_MS: '0',
    ...overrides,
  });
}

export const silentLog = () => createLogger(process.env.TEST_LOG_LEVEL ?? 'silent', 'test');
