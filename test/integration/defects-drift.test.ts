import path from 'node:path';
import request from 'supertest';
import type { Env } from '../../src/config/env';
import { startWorker, type RunningWorker } from '../../workers/main';
import { memoryInput } from '../factories';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, tempDir, testEnv } from '../helpers/env';
import { topicModelSpec, writeModel2VecFolder } from '../helpers/model-fixtures';
import { waitUntil } from '../helpers/wait';

const ROWS = 25;

/**
 * D3: the embedding model or storage type changed through env (MEMORY_STATIC_MODEL,
 * MEMORY_VEC_QUANTIZATION) while the index was built for another one: a worker that starts with
 * the new env must notice and reindex, without anyone touching the settings.
 */
describe('D3: an embedding change made through env starts a reindex', () => {
  jest.setTimeout(60_000);
  const dir = tempDir('models');
  const folderA = writeModel2VecFolder(path.join(dir, 'model-a'), topicModelSpec(16, 40));
  const folderB = writeModel2VecFolder(path.join(dir, 'model-b'), topicModelSpec(16, 60));
  const folderC = writeModel2VecFolder(path.join(dir, 'model-c'), topicModelSpec(24, 10));
  let t: TestApi;
  let worker: RunningWorker | null = null;

  const stats = () => t.ctx.vectors.stats();
  const reindexJobs = async () => (await t.ctx.queues.queue('reindex').getJobs(['waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed'])).filter((j) => j.name === 'reindex');
  const envWith = (over: Partial<Env>): Env => ({ ...t.env, ...over });

  /** Starts a worker on `env`, expects it to queue a drift reindex and waits until that job has rebuilt the index. */
  async function expectDriftReindex(env: Env, signature: string) {
    const before = new Set((await reindexJobs()).map((j) => j.id));
    worker = await startWorker(env, silentLog());
    try {
      await driftReindexed(worker, before, signature);
    } finally {
      await worker.stop();
      worker = null;
    }
  }

  async function driftReindexed(w: RunningWorker, before: Set<string | undefined>, signature: string) {
    const queued = (await reindexJobs()).filter((j) => !before.has(j.id));
    expect(queued.map((j) => j.id)).toEqual([expect.stringMatching(/^reindex-auto-/)]);
    const done = await waitUntil(async () => {
      const j = await t.ctx.queues.queue('reindex').getJob(queued[0].id!);
      return j?.finishedOn ? j : null;
    }, 30_000, 'the drift reindex to finish');
    expect(done.failedReason ?? null).toBeNull();
    // (done/total are not pinned: an embed-memory job may embed a row of the new index first.)
    expect(done.returnvalue).toMatchObject({ phase: 'done', rebuilt: true, signature, failed: 0 });
    expect(stats()).toMatchObject({ signature, rowCount: ROWS, needsReindex: 0 });
    expect(w.ctx.reindex.drift()).toBeNull();
  }

  beforeAll(async () => {
    t = buildTestApi(testEnv({ MEMORY_STATIC_MODEL: folderA, REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0' }));
    t.ctx.memory.upsertMany(
      Array.from({ length: ROWS }, (_, i) => memoryInput({ apiKeyId: 'drift', key: `k${i}`, content: `the ${['cat', 'pizza', 'python', 'snow'][i % 4]} note ${i}` })),
      { source: 'api' },
    );
    await request(t.app).put('/api/settings/memory').set(t.auth).send({ embeddingSource: 'static', staticEnabled: true }).expect(200);
    worker = await startWorker(t.env, silentLog());
    await waitUntil(() => stats().signature === `static:${folderA}:16` && stats().rowCount === ROWS && stats().needsReindex === 0, 30_000, 'the index for model A');
    // Nothing queued or running any more, so the next reindex is the drift one.
    for (const q of ['reindex', 'embedding'] as const) {
      await waitUntil(async () => {
        const c = await t.ctx.queues.queue(q).getJobCounts('waiting', 'active', 'delayed', 'prioritized');
        return c.waiting + c.active + c.delayed + c.prioritized === 0;
      }, 30_000, `${q} queue idle`);
    }
    expect(worker.ctx.reindex.drift()).toBeNull();
    await worker.stop();
    worker = null;
  });
  afterAll(async () => {
    await worker?.stop();
    await t.close();
  });

  it('a worker started with MEMORY_STATIC_MODEL pointing at another model folder (same width) rebuilds for it', async () => {
    await expectDriftReindex(envWith({ MEMORY_STATIC_MODEL: folderB }), `static:${folderB}:16`);
  });

  it('a worker started with MEMORY_VEC_QUANTIZATION=int8 rebuilds the index as int8', async () => {
    await expectDriftReindex(envWith({ MEMORY_STATIC_MODEL: folderB, MEMORY_VEC_QUANTIZATION: 'int8' }), `static:${folderB}:16:int8`);
  });

  it('and back to float, with a model of another width', async () => {
    await expectDriftReindex(envWith({ MEMORY_STATIC_MODEL: folderC, MEMORY_VEC_QUANTIZATION: 'none' }), `static:${folderC}:24`);
  });

  it('a worker started with the env the index was built for queues nothing', async () => {
    const before = (await reindexJobs()).length;
    worker = await startWorker(envWith({ MEMORY_STATIC_MODEL: folderC, MEMORY_VEC_QUANTIZATION: 'none' }), silentLog());
    try {
      expect(worker.ctx.reindex.drift()).toBeNull();
      expect((await reindexJobs()).length).toBe(before);
    } finally {
      await worker.stop();
      worker = null;
    }
  });
});
