import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { startWorker, type RunningWorker } from '../../workers/main';
import { openStorage, type Storage } from '../../src/services';
import { silentLog, tempDir, testEnv } from '../helpers/env';
import { childEnv, CLI } from '../helpers/processes';

const run = promisify(execFile);
const QUIET = { REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0', COMPACT_EVERY_MS: '0' };

/** `engram export` and `engram import` from the built CLI, against real data dirs and a real worker. */
describe('engram export / engram import', () => {
  it('exports a key to a file (stdout too), and imports it into another data dir through a worker', async () => {
    const srcEnv = testEnv(QUIET);
    const src: Storage = openStorage(srcEnv, silentLog());
    for (let i = 0; i < 25; i++) src.memory.create({ apiKeyId: 'cli-a', type: 'factual', key: `k${i}`, content: `CLI fact ${i}.` }, { source: 'api' });
    src.memory.create({ apiKeyId: 'cli-b', type: 'factual', key: 'other', content: 'Another tenant.' }, { source: 'api' });
    const file = path.join(tempDir('cli'), 'a.ndjson');
    const exp = await run(process.execPath, [CLI, 'export', '--key', 'cli-a', '--out', file], { env: childEnv(srcEnv) });
    expect(exp.stderr).toMatch(/exported 25 memories of cli-a/);
    const lines = fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).toHaveLength(25);
    const toStdout = await run(process.execPath, [CLI, 'export', '--key', 'cli-b'], { env: childEnv(srcEnv) });
    expect(toStdout.stdout.trim().split('\n').map((l) => JSON.parse(l).content)).toEqual(['Another tenant.']);
    src.db.close();

    const dstEnv = testEnv(QUIET);
    const w: RunningWorker = await startWorker(dstEnv, silentLog());
    try {
      const imp = await run(process.execPath, [CLI, 'import', file, '--map', 'cli-a=cli-new'], { env: childEnv(dstEnv) });
      expect(imp.stdout).toMatch(/imported: 25 created, 0 updated, 0 unchanged, 0 failed/);
      const rows = w.ctx.memory.list({ apiKeyId: 'cli-new' }, 100, 0).data;
      expect(rows.map((r) => r.id).sort()).toEqual(lines.map((l) => l.id).sort());
      const bad = await run(process.execPath, [CLI, 'import', file, '--map', 'oops'], { env: childEnv(dstEnv) }).catch((e: { code: number; stderr: string }) => e);
      expect(bad).toMatchObject({ code: 2, stderr: expect.stringMatching(/--map expects old=new/) });
    } finally {
      await w.stop();
    }
  });
});
