import path from 'node:path';
import request from 'supertest';
import { startWorker } from '../../workers/main';
import { buildTestApi } from '../helpers/api';
import { silentLog, tempDir, testEnv } from '../helpers/env';
import { topicModelSpec, writeModel2VecFolder } from '../helpers/model-fixtures';
import { TestRedis } from '../helpers/redis-server';
import { waitUntil } from '../helpers/wait';

describe('Redis outage while the api takes writes', () => {
  jest.setTimeout(60_000);

  it('requests succeed while Redis is down (jobs land in the outbox); after a restart the outbox drains and every job runs', async () => {
    const redis = await TestRedis.start();
    const folder = writeModel2VecFolder(path.join(tempDir('models'), 'm'), topicModelSpec(16));
    const env = testEnv({ REDIS_URL: redis.url, MEMORY_STATIC_MODEL: folder, REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0' });
    const t = buildTestApi(env);
    t.ctx.settings.updateMemory({ embeddingSource: 'static', staticEnabled: true });
    const post = (i: number) => request(t.app).post('/api/memory').set(t.auth).send({ apiKeyId: 'k', key: `fact-${i}`, content: `my cat number ${i}` });
    try {
      await waitUntil(() => t.ctx.queues.isReady(), 10_000, 'api connected');
      for (let i = 0; i < 5; i++) expect((await post(i)).status).toBe(201);
      // Embedding is enqueued after the response; wait until Redis has those 5 before pulling the plug.
      await waitUntil(async () => (await t.ctx.queues.queue('embedding').getJobCountByTypes('waiting', 'active', 'completed', 'delayed')) >= 5, 5000, 'first jobs queued');
      expect(t.ctx.queues.outboxCount()).toBe(0);

      await redis.stop(true); // a crash, not a clean shutdown
      await waitUntil(() => !t.ctx.queues.isReady(), 5000, 'api noticed the outage');
      for (let i = 5; i < 25; i++) {
        const started = Date.now();
        const r = await post(i);
        expect(r.status).toBe(201);
        // Never waits on Redis.
        expect(Date.now() - started).toBeLessThan(1000);
      }
      // An update of content is a job too; a metadata-only one is not.
      const one = t.ctx.memory.findByKey('k', 'fact-3')!;
      expect((await request(t.app).put(`/api/memory/${one.id}`).set(t.auth).send({ content: 'my dog number 3' })).status).toBe(200);
      expect(t.ctx.queues.outboxCount()).toBe(21);
      expect((await request(t.app).get('/readyz')).status).toBe(503);

      await redis.start();
      await waitUntil(() => t.ctx.queues.outboxCount() === 0, 15_000, 'outbox drained on reconnect');
      const embedQueue = t.ctx.queues.queue('embedding');
      expect(await embedQueue.getJobCountByTypes('waiting', 'delayed', 'prioritized')).toBeGreaterThanOrEqual(21);

      const w = await startWorker(env, silentLog());
      try {
        // The first embed job finds no index and starts a reindex; in the end every row has its vector.
        await waitUntil(() => t.ctx.vectors.stats().rowCount === 25 && t.ctx.vectors.stats().needsReindex === 0, 30_000, 'every row embedded');
        const counts = await waitUntil(async () => {
          const c = await embedQueue.getJobCounts('completed', 'failed', 'waiting', 'active', 'delayed');
          return c.waiting + c.active + c.delayed === 0 ? c : null;
        }, 10_000, 'embedding queue settled');
        expect(counts.failed).toBe(0);
        expect(counts.completed).toBeGreaterThanOrEqual(26);
      } finally {
        await w.stop();
      }
    } finally {
      await t.close();
      await redis.stop();
    }
  });
});
