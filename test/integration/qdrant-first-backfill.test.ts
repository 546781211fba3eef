import path from 'node:path';
import request from 'supertest';
import { buildApiContext } from '../../src/api';
import { createApp } from '../../src/http/app';
import type { ApiContext } from '../../src/http/api-context';
import { Metrics } from '../../src/metrics';
import { physicalCollectionName } from '../../src/vector/qdrant.store';
import { startWorker, type RunningWorker } from '../../workers/main';
import { startFakeQdrant, type FakeQdrant } from '../helpers/fake-qdrant';
import { TEST_TOKEN, silentLog, tempDir, testEnv } from '../helpers/env';
import { shareTypedArraysWithNative, topicModelSpec, writeModel2VecFolder } from '../helpers/model-fixtures';
import { waitUntil } from '../helpers/wait';

shareTypedArraysWithNative();

const auth = { authorization: `Bearer ${TEST_TOKEN}` };

describe('Qdrant turned on over an existing corpus: retrieval never sees the half-built collection', () => {
  let fake: FakeQdrant;
  let ctx: ApiContext;
  let app: ReturnType<typeof createApp>;
  let w: RunningWorker | null = null;
  const dir = tempDir('models');
  const staticFolder = writeModel2VecFolder(path.join(dir, 'static16'), topicModelSpec(16, 50));
  const env = testEnv({ MEMORY_STATIC_MODEL: staticFolder, REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0', QDRANT_SEARCH_TIMEOUT_MS: '2000', QDRANT_TIMEOUT_MS: '5000' });

  beforeAll(async () => {
    fake = await startFakeQdrant();
    ctx = buildApiContext(env, silentLog());
    app = createApp(ctx, new Metrics('api'));
  });
  afterAll(async () => {
    await w?.stop();
    await ctx.jobEvents.close();
    await ctx.retrieval.close?.();
    await ctx.queues.close();
    ctx.db.close();
    await fake.close();
    expect(fake.schemaErrors).toEqual([]);
  });

  const post = async (content: string, key: string) => {
    const r = await request(app).post('/api/memory').set(auth).send({ content, key, apiKeyId: 'tenant-a' });
    expect(r.status).toBeLessThan(300);
    return r.body.memory as { id: string; content: string };
  };
  const preview = (query: string) => request(app).post('/api/memory/retrieve-preview').set(auth).send({ query, apiKeyId: 'tenant-a', strategy: 'semantic' });
  const contents = (r: request.Response) => r.body.memories.map((m: { content: string }) => m.content) as string[];

  it('one synced memory before the first backfill: sqlite-vec serves with "backfill pending", health says so; once the backfill queued at enable completes, Qdrant serves', async () => {
    // The corpus, embedded into sqlite-vec while Qdrant is off.
    w = await startWorker(env, silentLog());
    await request(app).put('/api/settings/memory').set(auth).send({ embeddingSource: 'static', staticEnabled: true }).expect(200);
    await waitUntil(() => ctx.vectors.stats().signature !== null, 20_000, 'index built');
    const cat = await post('my cat sleeps on the warm sofa', 'pet');
    const pizza = await post('pizza with cheese for dinner', 'food');
    const snow = await post('snow and storm in the mountains', 'weather');
    await waitUntil(() => ctx.vectors.stats().rowCount === 3 && ctx.vectors.stats().needsReindex === 0, 20_000, 'corpus embedded');
    // No worker from here until the backfill should run: the one queued at enable waits in Redis.
    await w.stop();
    w = null;

    const on = await request(app).put('/api/settings/qdrant').set(auth).send({ enabled: true, host: fake.url });
    expect(on.status).toBe(200);
    expect(on.body.backfill).toEqual({ jobId: expect.stringMatching(/^qdrant-backfill-enable-/), queue: 'reindex' });
    const backfillJob = await ctx.queues.queue('reindex').getJob(on.body.backfill.jobId);
    expect(await backfillJob!.getState()).toBe('waiting');

    // One memory is synced (its edit's qdrant-sync job) before the backfill ran: its point lands in the collection of the current signature...
    const collection = physicalCollectionName('engram_memory', ctx.vectors.stats().signature!);
    await ctx.qdrantSync.sync([pizza.id]);
    expect(fake.points(collection).map((p) => p.payload.memoryId)).toEqual([pizza.id]);
    // ...which no search uses: there is no alias yet.
    expect(fake.aliases.has('engram_memory')).toBe(false);
    const before = await preview('cat');
    expect(before.status).toBe(200);
    expect(before.body.resolution).toMatchObject({ vectorStore: 'sqlite-vec', fallbackReason: 'qdrant index not built yet (backfill pending); served by sqlite-vec' });
    expect(contents(before)[0]).toBe(cat.content);
    const health = await request(app).get('/api/settings/qdrant/health').set(auth);
    expect(health.body).toMatchObject({ ok: false, reachable: true, aliasTarget: null, reason: expect.stringMatching(/^qdrant index not built yet \(backfill pending\)/) });

    // The worker comes back and runs the backfill queued at enable; it ends by pointing the alias at the complete collection.
    w = await startWorker(env, silentLog());
    const done = await waitUntil(async () => {
      const j = await ctx.queues.queue('reindex').getJob(on.body.backfill.jobId);
      return j?.finishedOn ? j : null;
    }, 30_000, 'backfill done');
    expect(done.returnvalue).toMatchObject({ phase: 'done', done: 3, total: 3, collection });
    expect(fake.aliases.get('engram_memory')).toBe(collection);
    expect(fake.points(collection).map((p) => p.payload.memoryId).sort()).toEqual([cat.id, pizza.id, snow.id].sort());
    const after = await waitUntil(async () => {
      const r = await preview('cat');
      return r.body.resolution.vectorStore === 'qdrant' ? r : null;
    }, 10_000, 'Qdrant serves');
    expect(after.body.resolution.fallbackReason).toBeNull();
    expect(contents(after)[0]).toBe(cat.content);
    expect((await request(app).get('/api/settings/qdrant/health').set(auth)).body).toMatchObject({ ok: true, reachable: true, aliasTarget: collection, pointCount: 3 });
  });
});
