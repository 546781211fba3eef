import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadEnv, type Env } from '../../src/config/env';
import { createLogger } from '../../src/logger';

export const TEST_TOKEN = 'test-management-token-0123456789';

const dirs: string[] = [];
process.once('exit', () => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

/** A temp directory removed at process exit. */
export function tempDir(label = 'engram'): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${label}-`));
  dirs.push(dir);
  return dir;
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
    REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    ...overrides,
  });
}

export const silentLog = () => createLogger(process.env.TEST_LOG_LEVEL ?? 'silent', 'test');
