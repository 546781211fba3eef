/**
 * WAL checkpoints (docs/storage-and-caches.md §1.4): the api's connection checkpoints only past
 * API_WAL_AUTOCHECKPOINT_PAGES, a worker's at SQLite's 1000 pages, so while a worker runs it does the checkpoints.
 */
import fs from 'node:fs';
import { openServices, openStorage } from '../../src/services';
import { buildTestApi } from '../helpers/api';
import { silentLog, testEnv } from '../helpers/env';

/** The WAL's length in pages, from its file (a checkpointed WAL is rewritten from its start, not truncated: the longest it got). */
function walPages(file: string, pageSize: number): number {
  const bytes = fs.statSync(`${file}-wal`).size;
  return Math.floor((bytes - 32) / (24 + pageSize));
}

describe('WAL checkpoints', () => {
  it("the api's connection has API_WAL_AUTOCHECKPOINT_PAGES, a worker's SQLite's default", async () => {
    const t = buildTestApi(testEnv({ API_WAL_AUTOCHECKPOINT_PAGES: '2500' }));
    const w = openServices(t.env, silentLog(), 'worker');
    try {
      expect(t.ctx.db.db.pragma('wal_autocheckpoint', { simple: true })).toBe(2500);
      expect(w.db.db.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
      expect(testEnv().API_WAL_AUTOCHECKPOINT_PAGES).toBe(4000);
    } finally {
      await w.queues.close();
      w.db.close();
      await t.close();
    }
  });

  it('the api alone still bounds the WAL at its setting; with a worker committing too, the worker checkpoints at 1000 pages', () => {
    const run = (withWorker: boolean) => {
      const env = testEnv();
      const api = openStorage(env, silentLog(), undefined, { walAutoCheckpointPages: 3000 });
      const worker = withWorker ? openStorage(env, silentLog(), api.db.file) : null;
      try {
        api.db.db.exec('CREATE TABLE scratch (id INTEGER PRIMARY KEY, body TEXT)');
        const pageSize = api.db.db.pragma('page_size', { simple: true }) as number;
        const insert = api.db.db.prepare('INSERT INTO scratch (body) VALUES (?)');
        const workerInsert = worker?.db.db.prepare('INSERT INTO scratch (body) VALUES (?)');
        // ~1.5 pages per commit, 4,000 commits: ~6,000 pages written, twice the api's setting.
        const body = 'x'.repeat(Math.floor(pageSize * 1.5));
        for (let i = 0; i < 4000; i++) {
          insert.run(body);
          if (workerInsert && i % 10 === 0) workerInsert.run('w');
        }
        return walPages(api.db.file, pageSize);
      } finally {
        worker?.db.close();
        api.db.close();
      }
    };
    const alone = run(false);
    // Past SQLite's 1000 (the setting is in effect), and bounded by it (checkpointed, then rewritten from the start).
    expect(alone).toBeGreaterThan(2000);
    expect(alone).toBeLessThan(3200);
    // The worker's commits checkpoint first: the WAL never gets near the api's 3000.
    expect(run(true)).toBeLessThan(1300);
  });
});
