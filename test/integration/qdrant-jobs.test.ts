import path from 'node:path';
import request from 'supertest';
import { buildApiContext, watchRedisForRepair } from '../../src/api';
import { createApp } from '../../src/http/app';
import type { ApiContext } from '../../src/http/api-context';
import { createLogger } from '../../src/logger';
import { Metrics } from '../../src/metrics';
import { physicalCollectionName } from '../../src/vector/qdrant.store';
import { startWorker, type RunningWorker } from '../../workers/main';
import { memoryInput } from '../factories';
import { startFakeQdrant, type FakeQdrant } from '../helpers/fake-qdrant';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream';
import { TEST_TOKEN, silentLog, tempDir, testEnv } from '../helpers/env';
import { openStorage } from '../../src/services';
import { shareTypedArraysWithNative, topicModelSpec, writeModel2VecFolder, writeTransformersModel } from '../helpers/model-fixtures';
import { waitUntil } from '../helpers/wait';

shareTypedArraysWithNative();

const QDRANT_KEY = 'qdrant-secret-key-ABCDEFGH12345678';
const auth = { authorization: `Bearer ${TEST_TOKEN}` };

/** Every log line of the api and the worker, to prove the key never reaches one. */
const lines: string[] = [];
const capture = () => createLogger('debug', 'test', { write: (s: string) => void lines.push(s) });

describe('Qdrant tier end to end: settings, dual-write jobs, retrieval fallback, backfill', () => {
  let fake: FakeQdrant;
  let ctx: ApiContext;
  let app: ReturnType<typeof createApp>;
  let w: RunningWorker;
  const dir = tempDir('models');
  const staticFolder = writeModel2VecFolder(path.join(dir, 'static16'), topicModelSpec(16, 50));
  const transformersFolder = writeTransformersModel(path.join(dir, 'tf24'), topicModelSpec(24, 50));
  let upstream: FakeUpstream;
  let env: ReturnType<typeof testEnv>;
  const envOf = (upstreamUrl: string) => testEnv({ UPSTREAM_BASE_URL: `${upstreamUrl}/v1`, MEMORY_STATIC_MODEL: staticFolder, MEMORY_TRANSFORMERS_MODEL: transformersFolder, REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0', QDRANT_SEARCH_TIMEOUT_MS: '1000', QDRANT_TIMEOUT_MS: '3000' });

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    env = envOf(upstream.url);
    fake = await startFakeQdrant({ apiKey: QDRANT_KEY });
    ctx = buildApiContext(env, capture());
    app = createApp(ctx, new Metrics('api'));
    watchRedisForRepair(ctx);
    w = await startWorker(env, capture());
  });
  afterAll(async () => {
    await w.stop();
    await ctx.jobEvents.close();
    await ctx.retrieval.close?.();
    await ctx.queues.close();
    ctx.db.close();
    await fake.close();
    await upstream.close();
    expect(fake.schemaErrors).toEqual([]);
    // The key went to Qdrant in its header, and nowhere else.
    expect(fake.requests.some((r) => r.apiKey === QDRANT_KEY)).toBe(true);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.filter((l) => l.includes(QDRANT_KEY))).toEqual([]);
  });

  const collection = () => fake.aliases.get('engram_memory');
  const pointOf = (rowId: number) => fake.points('engram_memory').find((p) => p.id === rowId);
  const post = async (content: string, key: string, apiKeyId = 'tenant-a') => {
    const r = await request(app).post('/api/memory').set(auth).send({ content, key, apiKeyId });
    expect(r.status).toBeLessThan(300);
    return r.body.memory as { id: string };
  };
  const rowIdOf = (id: string) => ctx.memory.getRecord(id)!.rowId;
  const preview = (query: string, apiKeyId = 'tenant-a') =>
    request(app).post('/api/memory/retrieve-preview').set(auth).send({ query, apiKeyId, strategy: 'semantic' });

  it('GET/PUT /api/settings/qdrant: the api key is masked, "" removes it, enabling selects qdrant, disabling resets to auto; bad input is a 400 with the path', async () => {
    const initial = await request(app).get('/api/settings/qdrant').set(auth);
    expect(initial.body).toMatchObject({ enabled: false, host: '', port: 6333, collection: 'engram_memory', quantization: 'none', hasApiKey: false, apiKeyMasked: null });
    const bad = await request(app).put('/api/settings/qdrant').set(auth).send({ port: 70000, host: 'http://169.254.169.254' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details.map((d: { path: string }) => d.path).sort()).toEqual(['body.host', 'body.port']);
    expect((await request(app).put('/api/settings/qdrant').set(auth).send({ bogus: 1 })).status).toBe(400);
    expect((await request(app).get('/api/settings/qdrant').set(auth)).body).toEqual(initial.body);

    const on = await request(app).put('/api/settings/qdrant').set(auth).send({ enabled: true, host: fake.url, apiKey: QDRANT_KEY });
    expect(on.status).toBe(200);
    expect(on.body).toMatchObject({ enabled: true, hasApiKey: true, apiKeyMasked: `***${QDRANT_KEY.slice(-4)}` });
    // Enabling queues the backfill that builds the index searches use (here it finds no vector index yet and skips).
    expect(on.body.backfill).toEqual({ jobId: expect.stringMatching(/^qdrant-backfill-enable-/), queue: 'reindex' });
    expect(JSON.stringify(on.body)).not.toContain(QDRANT_KEY);
    expect((await request(app).get('/api/settings/memory').set(auth)).body.vectorStore).toBe('qdrant');
    expect(JSON.stringify((await request(app).get('/api/settings/qdrant').set(auth)).body)).not.toContain(QDRANT_KEY);

    const off = await request(app).put('/api/settings/qdrant').set(auth).send({ enabled: false, apiKey: '' });
    expect(off.body).toMatchObject({ enabled: false, hasApiKey: false, apiKeyMasked: null });
    expect((await request(app).get('/api/settings/memory').set(auth)).body.vectorStore).toBe('auto');
    // Health of a disabled Qdrant changes nothing and says why.
    const health = await request(app).get('/api/settings/qdrant/health').set(auth);
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({ ok: false, enabled: false });
    expect(fake.collections.size).toBe(0);

    await request(app).put('/api/settings/qdrant').set(auth).send({ enabled: true, apiKey: QDRANT_KEY }).expect(200);
    await request(app).put('/api/settings/memory').set(auth).send({ embeddingSource: 'static', staticEnabled: true }).expect(200);
    await waitUntil(() => ctx.vectors.stats().signature !== null, 20_000, 'index built');
    // The reindex that built it queued a backfill; with no memory yet it creates the (empty, hence complete) collection and points the alias.
    await waitUntil(() => collection() === physicalCollectionName('engram_memory', ctx.vectors.stats().signature!), 20_000, 'alias pointed by the backfill after the first index build');
  });

  it('every embed, update and delete reaches Qdrant through qdrant-sync jobs that carry ids only', async () => {
    const cat = await post('my cat sleeps on the warm sofa', 'pet');
    const pizza = await post('pizza with cheese for dinner', 'food');
    const other = await post('my cat is a tabby', 'pet', 'tenant-b');
    await waitUntil(() => pointOf(rowIdOf(cat.id)) && pointOf(rowIdOf(pizza.id)) && pointOf(rowIdOf(other.id)), 20_000, 'points written');
    expect(collection()).toBe(physicalCollectionName('engram_memory', ctx.vectors.stats().signature!));
    // The vector in Qdrant is the one sqlite-vec holds (read back from sqlite-vec, not a second embedding).
    const p = pointOf(rowIdOf(cat.id))!;
    expect(p.payload).toMatchObject({ memoryId: cat.id, apiKeyId: 'tenant-a', content: 'my cat sleeps on the warm sofa' });

    await request(app).put(`/api/memory/${cat.id}`).set(auth).send({ metadata: { mood: 'sleepy' } }).expect(200);
    await waitUntil(() => (pointOf(rowIdOf(cat.id))?.payload.metadata as { mood?: string })?.mood === 'sleepy', 10_000, 'metadata synced');
    await request(app).put(`/api/memory/${cat.id}`).set(auth).send({ content: 'my cat chases pizza boxes' }).expect(200);
    await waitUntil(() => pointOf(rowIdOf(cat.id))?.payload.content === 'my cat chases pizza boxes' && ctx.memory.findFresh(cat.id)?.needsReindex === false, 10_000, 'content synced');
    const row = ctx.db.db.prepare('SELECT embedding FROM vec_memories WHERE memory_id = ?').get(BigInt(rowIdOf(cat.id))) as { embedding: Buffer };
    const sqliteVector = Array.from(new Float32Array(row.embedding.buffer.slice(row.embedding.byteOffset, row.embedding.byteOffset + row.embedding.byteLength)));
    const round = (v: number[]) => JSON.stringify(v.map((x) => Math.round(x * 1e5)));
    // The update's sync and the embed's sync run concurrently; whichever writes last re-reads, so Qdrant ends with the new vector.
    await waitUntil(async () => (await ctx.queues.queue('embedding').getJobCounts('active', 'waiting', 'delayed', 'prioritized')).active === 0 && round(pointOf(rowIdOf(cat.id))!.vector) === round(sqliteVector), 10_000, 'the new vector in Qdrant');

    const rowId = rowIdOf(pizza.id);
    await request(app).delete(`/api/memory/${pizza.id}`).set(auth).expect(200);
    await waitUntil(() => !pointOf(rowId), 10_000, 'point deleted');

    // Job payloads: memory ids only, never the key or any text.
    const jobs = await ctx.queues.queue('embedding').getJobs(['completed', 'waiting', 'delayed', 'active', 'failed']);
    const syncJobs = jobs.filter((j) => j.name === 'qdrant-sync');
    expect(syncJobs.length).toBeGreaterThan(0);
    for (const j of syncJobs) expect(Object.keys(j.data)).toEqual(['memoryIds']);
    expect(JSON.stringify(jobs.map((j) => j.data))).not.toContain(QDRANT_KEY);
  });

  it('retrieval uses Qdrant when healthy; down or slow → sqlite-vec with a reason (then FTS5), never a failed request; the metric counts it', async () => {
    const ok = await preview('cat');
    expect(ok.status).toBe(200);
    expect(ok.body.resolution).toMatchObject({ vectorStore: 'qdrant', fallbackReason: null });
    expect(ok.body.memories.map((m: { content: string }) => m.content)).toContain('my cat chases pizza boxes');
    // Tenant A never sees tenant B's cat.
    expect(ok.body.memories.map((m: { content: string }) => m.content)).not.toContain('my cat is a tabby');

    fake.mode = 'down';
    const down = await preview('cat');
    expect(down.status).toBe(200);
    expect(down.body.resolution.vectorStore).toBe('sqlite-vec');
    expect(down.body.resolution.fallbackReason).toMatch(/^qdrant unavailable \(unhealthy\); served by sqlite-vec$/);
    expect(down.body.memories.map((m: { content: string }) => m.content)).toContain('my cat chases pizza boxes');

    fake.mode = 'hang';
    const slow = await preview('cat');
    expect(slow.status).toBe(200);
    expect(slow.body.resolution.fallbackReason).toMatch(/qdrant unavailable \(timeout\); served by sqlite-vec/);
    expect(slow.body.memories.length).toBeGreaterThan(0);
    fake.mode = 'up';

    const metrics = new Metrics('api');
    const { registerQdrantFallbackMetric } = await import('../../src/memory/qdrant-metrics');
    registerQdrantFallbackMetric(metrics.registry, ctx.retrieval as never);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/engram_retrieval_qdrant_fallback_total\{reason="unhealthy",role="api"\} [1-9]/);
    expect(text).toMatch(/engram_retrieval_qdrant_fallback_total\{reason="timeout",role="api"\} [1-9]/);
  });

  it('a chat while Qdrant hangs still gets its memories (from sqlite-vec, inside the memory phase) and never fails', async () => {
    await request(app).put('/api/settings/memory').set(auth).send({ enabled: true }).expect(200);
    const key = ctx.apiKeys.create('chat');
    const m = await post('my cat loves tuna', 'cat-food', key.id);
    await waitUntil(() => pointOf(rowIdOf(m.id)), 10_000, 'point written');
    const chat = () =>
      request(app)
        .post('/v1/chat/completions')
        .set('authorization', `Bearer ${key.key}`)
        .send({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'what does my cat eat?' }] });
    const healthy = await chat();
    expect(healthy.status).toBe(200);
    expect(healthy.headers['x-memory-status']).toBe('injected');
    fake.mode = 'hang';
    const r = await chat();
    fake.mode = 'up';
    expect(r.status).toBe(200);
    // Injected, not degraded: the Qdrant search gave up inside the 1.5 s memory phase and sqlite-vec answered.
    expect(r.headers['x-memory-status']).toBe('injected');
    expect(JSON.stringify(upstream.requests[upstream.requests.length - 1]!.body)).toContain('my cat loves tuna');
    await request(app).put('/api/settings/memory').set(auth).send({ enabled: false }).expect(200);
  });

  it('sync jobs retry while Qdrant is down and converge once it returns', async () => {
    const m = await post('snow on the mountain', 'weather');
    await waitUntil(() => pointOf(rowIdOf(m.id)), 10_000, 'point written');
    fake.mode = 'down';
    await request(app).put(`/api/memory/${m.id}`).set(auth).send({ metadata: { fresh: true } }).expect(200);
    const failedAttempt = await waitUntil(async () => {
      const jobs = await ctx.queues.queue('embedding').getJobs(['delayed', 'waiting', 'active']);
      return jobs.find((j) => j.name === 'qdrant-sync' && j.attemptsMade >= 1 && (j.data as { memoryIds: string[] }).memoryIds.includes(m.id));
    }, 15_000, 'a failed sync attempt waiting for its retry');
    expect(failedAttempt.failedReason).toMatch(/Qdrant .* failed \(HTTP 503\)/);
    expect(failedAttempt.failedReason).not.toContain(QDRANT_KEY);
    fake.mode = 'up';
    await waitUntil(() => (pointOf(rowIdOf(m.id))?.payload.metadata as { fresh?: boolean })?.fresh === true, 20_000, 'synced after Qdrant came back');
  });

  it('health, tenant-scoped test search, cleanup job and embedding models', async () => {
    const h = await request(app).get('/api/settings/qdrant/health').set(auth);
    expect(h.body).toMatchObject({ ok: true, reachable: true, collectionExists: true, aliasTarget: collection(), dimension: 16, expectedDimension: 16, latencyMs: expect.any(Number) });
    expect(h.body.pointCount).toBe(fake.points('engram_memory').length);

    expect(fake.points('engram_memory').filter((p) => p.payload.apiKeyId === 'tenant-b').map((p) => p.payload.content)).toEqual(['my cat is a tabby']);
    const s = await request(app).post('/api/settings/qdrant/search').set(auth).send({ query: 'cat', apiKeyId: 'tenant-b', topK: 100 });
    expect(s.status).toBe(200);
    expect(s.body.ok).toBe(true);
    expect(s.body.results.map((r: { payload: { apiKeyId: string } }) => r.payload.apiKeyId)).toEqual(['tenant-b']);
    expect((await request(app).post('/api/settings/qdrant/search').set(auth).send({ query: 'cat', topK: 5 })).status).toBe(400);
    expect((await request(app).post('/api/settings/qdrant/search').set(auth).send({ query: 'cat', apiKeyId: 'a', topK: 101 })).status).toBe(400);

    // An orphan (a point whose memory is gone) and an expired point, as a missed sync would leave them.
    const target = collection()!;
    const sample = fake.points(target)[0]!;
    fake.collections.get(target)!.points.set('n:999999', { id: 999999, vector: sample.vector, payload: { ...sample.payload, rowId: 999999 } });
    fake.collections.get(target)!.points.set('n:999998', { id: 999998, vector: sample.vector, payload: { ...sample.payload, rowId: 999998, expiresAtUnix: 1000 } });
    const before = fake.points(target).length;
    const c = await request(app).post('/api/settings/qdrant/cleanup').set(auth).send({});
    expect(c.status).toBe(202);
    expect(c.body.queue).toBe('maintenance');
    const job = await waitUntil(async () => {
      const j = await ctx.queues.queue(c.body.queue).getJob(c.body.jobId);
      return j?.finishedOn ? j : null;
    }, 15_000, 'cleanup done');
    // The orphan sweep's progress is a percentage: every point left after the expired ones were deleted is scanned.
    expect(job.returnvalue).toMatchObject({ phase: 'done', expired: 1, orphans: 1, deletedCount: 2, done: before - 1, total: before - 1 });
    expect(fake.points(target).length).toBe(before - 2);

    const status = await request(app).get('/api/memory/engine-status').set(auth);
    expect(status.body.qdrant).toEqual({ enabled: true, healthy: true, latencyMs: expect.any(Number), error: null });

    const models = await request(app).get('/api/settings/qdrant/embedding-models').set(auth);
    expect(models.body.models).toEqual(expect.arrayContaining([{ value: 'openai/text-embedding-3-small', label: expect.any(String) }]));
  });

  it('a model change: the reindex job rebuilds sqlite-vec, then a backfill fills a new collection and switches the alias; the old collection is dropped', async () => {
    const oldCollection = collection()!;
    await request(app).put('/api/settings/memory').set(auth).send({ embeddingSource: 'transformers', transformersEnabled: true }).expect(200);
    await waitUntil(() => ctx.vectors.stats().signature === `transformers:${transformersFolder}:24` && ctx.vectors.stats().needsReindex === 0, 30_000, 'reindexed');
    const newCollection = physicalCollectionName('engram_memory', `transformers:${transformersFolder}:24`);
    await waitUntil(() => collection() === newCollection && !fake.collections.has(oldCollection), 30_000, 'alias switched and old collection dropped');
    expect(fake.collections.get(newCollection)!.size).toBe(24);
    expect(fake.points(newCollection).length).toBe(ctx.vectors.stats().rowCount);
    const after = await preview('cat');
    await waitUntil(async () => (await preview('cat')).body.resolution.vectorStore === 'qdrant', 10_000, 'qdrant serves the new model');
    expect(after.status).toBe(200);
  });

  it('backfill of 5,000 pre-existing rows: 202 with a job id, 409 while it runs, progress to 100%, resumes after the worker is stopped mid-way', async () => {
    // 5,000 rows that predate Qdrant: written to SQLite and sqlite-vec directly, never synced.
    const sig = ctx.vectors.stats().signature!;
    const inputs = Array.from({ length: 5000 }, (_, i) => memoryInput({ apiKeyId: i % 2 ? 'tenant-a' : 'tenant-c', content: `backfill row ${i}` }));
    // Straight into SQLite (no after-commit hooks: no embed or sync jobs), as memories written before Qdrant was turned on.
    const direct = openStorage(env, silentLog());
    const changes = direct.memory.upsertMany(inputs, { source: 'api' }, 'import');
    direct.vectors.upsertMany(
      changes.map((c, i) => ({ rowId: c.memory.rowId, apiKeyId: c.memory.apiKeyId, vector: new Float32Array(ctx.vectors.stats().activeDim!).map((_, j) => ((i * 7 + j * 13) % 17) + 1), contentHash: c.memory.contentHash })),
      sig,
    );
    direct.db.close();
    const total = ctx.memory.count();
    const upsertsBefore = fake.requests.filter((r) => r.path.endsWith('/points') && r.method === 'PUT').length;
    const reindexWorker = w.workers.get('reindex')!;
    await reindexWorker.pause();
    const first = await request(app).post('/api/memory/qdrant/backfill').set(auth).send({});
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ jobId: expect.stringMatching(/^qdrant-backfill-api-/), queue: 'reindex', started: true, total });
    expect(await ctx.queues.queue(first.body.queue).getJob(first.body.jobId)).toBeTruthy();
    const second = await request(app).post('/api/memory/qdrant/backfill').set(auth).send({});
    expect(second.status).toBe(409);
    expect(second.body.error.details).toEqual({ jobId: first.body.jobId, queue: 'reindex' });
    reindexWorker.resume();

    // Slow Qdrant a little so the stop lands mid-way, then stop the worker (its handler hands the job back at a checkpoint).
    fake.delayMs = 5;
    const queue = ctx.queues.queue('reindex');
    await waitUntil(async () => ((await queue.getJob(first.body.jobId))?.progress as { done?: number })?.done! >= 1000, 30_000, 'a fifth done');
    await w.stop();
    const mid = (await queue.getJob(first.body.jobId))!;
    const cursor = (mid.data as { afterRowId: number; done: number }).done;
    expect(cursor).toBeGreaterThanOrEqual(1000);
    expect(cursor).toBeLessThan(total);
    expect(await mid.getState()).toBe('waiting');
    fake.delayMs = 0;

    w = await startWorker(env, capture());
    const done = await waitUntil(async () => {
      const j = await queue.getJob(first.body.jobId);
      return j?.finishedOn ? j : null;
    }, 60_000, 'backfill done');
    expect(done.returnvalue).toMatchObject({ phase: 'done', done: total, total, failed: 0 });
    expect(done.progress).toMatchObject({ phase: 'done', done: total, total });
    expect(fake.points('engram_memory').length).toBe(ctx.vectors.stats().rowCount);
    expect(ctx.vectors.stats().rowCount).toBe(total);
    // Resumed, not restarted: the pages written add up to the rows plus at most the page in flight at the stop.
    const pointsWritten = fake.requests
      .slice(0)
      .filter((r) => r.path.endsWith('/points') && r.method === 'PUT')
      .slice(upsertsBefore)
      .reduce((a, r) => a + ((r.body as { points: unknown[] }).points?.length ?? 0), 0);
    expect(pointsWritten).toBeLessThanOrEqual(total + 256);
    expect(pointsWritten).toBeGreaterThanOrEqual(total);
    // A new backfill may start now.
    const again = await request(app).post('/api/memory/qdrant/backfill').set(auth).send({});
    expect(again.status).toBe(202);
  });
});
