import fs from 'node:fs';

/** jest globalTeardown: stops the redis-server global-setup.ts started and removes the run's temp directory. */
export default async function globalTeardown(): Promise<void> {
  const run = globalThis.__engramTestRun;
  if (!run) return;
  await run.redis?.remove();
  run.redis = null;
  fs.rmSync(run.tmpDir, { recursive: true, force: true });
  globalThis.__engramTestRun = undefined;
}
