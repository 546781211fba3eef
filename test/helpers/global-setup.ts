import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TestRedis, onPath, redisAnswers } from './redis-server';

/** What global-teardown.ts undoes; jest keeps globals set here for the global teardown. */
export interface TestRun {
  tmpDir: string;
  redis: TestRedis | null;
}
declare global {
  var __engramTestRun: TestRun | undefined;
}

/**
 * jest globalSetup (runs once, in the jest parent process, before any test file):
 * - ENGRAM_TEST_TMPDIR: a directory for this run's temp files (tempDir(), TestRedis), removed by the teardown;
 * - ENGRAM_TEST_REDIS_URL: the Redis tests use (test/helpers/env.ts testRedisUrl()). That is a redis-server of
 *   our own on a free 127.0.0.1 port, or TEST_REDIS_URL when set. REDIS_URL is overridden with it too, so no
 *   test can reach a Redis this run did not start (or was not told to use).
 * Test files see these because jest copies process.env into every test environment and worker after this runs.
 */
export default async function globalSetup(): Promise<void> {
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'engram-test-'));
  process.env.ENGRAM_TEST_TMPDIR = tmpDir;
  const run: TestRun = { tmpDir, redis: null };
  globalThis.__engramTestRun = run;
  // If jest dies before the teardown runs: no redis-server or temp files left behind.
  process.once('exit', () => {
    run.redis?.killNow();
    fs.rmSync(tmpDir, { recursive: true, force: true });
  });

  let url = process.env.TEST_REDIS_URL;
  if (url) {
    if (!(await redisAnswers(url, 3000))) throw new Error(`TEST_REDIS_URL=${url}: no Redis answers PING there.`);
  } else {
    if (!onPath('redis-server')) {
      throw new Error(
        'The tests start their own Redis, but `redis-server` is not on PATH. Install it (Debian: apt-get install redis-server) ' +
          'or set TEST_REDIS_URL=redis://host:port to use a Redis you run (tests use their own key prefixes there and never flush it).',
      );
    }
    run.redis = await TestRedis.start({ persist: false });
    url = run.redis.url;
  }
  process.env.ENGRAM_TEST_REDIS_URL = url;
  process.env.REDIS_URL = url;
}
