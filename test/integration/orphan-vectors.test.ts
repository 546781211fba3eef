import path from 'node:path';
import { startWorker, type RunningWorker } from '../../workers/main';
import { memoryInput } from '../factories';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, tempDir, testEnv } from '../helpers/env';
import { topicModelSpec, writeModel2VecFolder } from '../helpers/model-fixtures';
import { waitUntil } from '../helpers/wait';

/**
 * A vector whose memory is gone (deleted where sqlite-vec was not loaded, or by SQL outside Engram) is
 * deleted by the repair sweep, and the deletion is logged like any other, so the api's in-memory copies drop it too.
 */
describe('the repair sweep deletes orphaned vectors', () => {
  jest.setTimeout(60_000);
  let t: TestApi;
  let w: RunningWorker;
  const folder = writeModel2VecFolder(path.join(tempDir('models'), 'topics'), topicModelSpec(16, 40));

  beforeAll(async () => {
    const env = testEnv({ MEMORY_STATIC_MODEL: folder, REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0', COMPACT_EVERY_MS: '0' });
    t = buildTestApi(env);
    w = await startWorker(env, silentLog());
    for (const [key, content] of [['cat', 'my cat sleeps on the sofa'], ['snow', 'snow and storm expected tomorrow'], ['pizza', 'pizza with cheese for lunch']]) {
      t.ctx.memory.create(memoryInput({ apiKeyId: 'A', key, content }), { source: 'api' });
    }
    t.ctx.settings.updateMemory({ embeddingSource: 'static', staticEnabled: true });
    await t.ctx.queues.enqueue('reindex', { force: false, trigger: 'api' });
    await waitUntil(() => t.ctx.vectors.stats().needsReindex === 0 && t.ctx.vectors.stats().rowCount === 3, 20_000, 'index built');
  });
  afterAll(async () => {
    await w.stop();
    await t.close();
  });

  const sweep = async (batchSize?: number) => {
    // As the schedule adds it: a new job each time ('manual' ones within 10 s are one job).
    const { jobId } = await t.ctx.queues.enqueue('repair-sweep', { reason: 'schedule', ...(batchSize ? { batchSize } : {}) });
    const job = await waitUntil(async () => {
      const j = await t.ctx.queues.queue('maintenance').getJob(jobId);
      return j?.finishedOn ? j : null;
    }, 15_000, 'repair-sweep');
    expect(job.failedReason).toBeUndefined();
    return job.returnvalue as { orphanVectorsPruned: number };
  };

  it('finds them, deletes at most batchSize per run, and logs each deletion', async () => {
    // Two memories go by SQL, past the delete hook that removes their vectors.
    const gone = t.ctx.db.db.prepare("SELECT memory_id AS rowId FROM memories WHERE api_key_id = 'A' AND key IN ('cat', 'snow') ORDER BY memory_id").all() as { rowId: number }[];
    t.ctx.db.db.prepare("DELETE FROM memories WHERE api_key_id = 'A' AND key IN ('cat', 'snow')").run();
    expect(t.ctx.vectors.stats().rowCount).toBe(3);

    expect((await sweep(1)).orphanVectorsPruned).toBe(1);
    expect(t.ctx.vectors.stats().rowCount).toBe(2);
    expect((await sweep()).orphanVectorsPruned).toBe(1);
    expect(t.ctx.vectors.stats().rowCount).toBe(1);
    expect((await sweep()).orphanVectorsPruned).toBe(0);
    // Each deletion was logged, which is what brings the api's in-memory copies up to date (vec-scan-cache.test.ts).
    const logged = t.ctx.db.db.prepare('SELECT memory_id AS rowId FROM memory_vec_log WHERE memory_id IN (?, ?) ORDER BY seq').all(gone[0]!.rowId, gone[1]!.rowId) as { rowId: number }[];
    expect(new Set(logged.map((l) => l.rowId))).toEqual(new Set(gone.map((g) => g.rowId)));
  });
});
