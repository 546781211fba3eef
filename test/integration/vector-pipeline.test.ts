import path from 'node:path';
import request from 'supertest';
import { startWorker, type RunningWorker } from '../../workers/main';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, tempDir, testEnv } from '../helpers/env';
import { shareTypedArraysWithNative, topicModelSpec, writeModel2VecFolder, writeTransformersModel } from '../helpers/model-fixtures';
import { waitUntil } from '../helpers/wait';

shareTypedArraysWithNative();

const STATIC = { embeddingSource: 'static' as const, staticEnabled: true };

describe('embeddings → sqlite-vec through the job pipeline', () => {
  let t: TestApi;
  let w: RunningWorker;
  const dir = tempDir('models');
  const staticFolder = writeModel2VecFolder(path.join(dir, 'static16'), topicModelSpec(16, 50));
  const transformersFolder = writeTransformersModel(path.join(dir, 'tf24'), topicModelSpec(24, 50));

  beforeAll(async () => {
    const env = testEnv({ MEMORY_STATIC_MODEL: staticFolder, MEMORY_TRANSFORMERS_MODEL: transformersFolder, REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0' });
    t = buildTestApi(env);
    w = await startWorker(env, silentLog());
  });
  afterAll(async () => {
    await w.stop();
    await t.close();
  });

  const vec = () => t.ctx.vectors.stats();
  const post = (content: string, key: string, apiKeyId = 'tenant-a') =>
    request(t.app).post('/api/memory').set(t.auth).send({ content, key, apiKeyId }).expect((r) => expect(r.status).toBeLessThan(300));

  it('without an embedding source, memories stay keyword-only and nothing is built', async () => {
    await post('my cat likes the rain', 'k0');
    const status = (await request(t.app).get('/api/memory/engine-status').set(t.auth)).body;
    expect(status.embedding).toMatchObject({ source: null, available: false });
    expect(status.vectorStore).toMatchObject({ backend: 'sqlite-vec', rowCount: 0, needsReindex: 1, signature: null });
    expect(status.keyword).toMatchObject({ available: true, backend: 'FTS5' });
    expect(status.qdrant).toEqual({ enabled: false, healthy: null, latencyMs: null, error: null });
    expect(status.rerank).toMatchObject({ enabled: false, available: false });
  });

  it('configuring a source starts a reindex job that builds the index and embeds every row', async () => {
    for (let i = 1; i <= 30; i++) await post(`the ${['cat', 'pizza', 'python', 'snow'][i % 4]} note ${i}`, `k${i}`);
    const r = await request(t.app).put('/api/settings/memory').set(t.auth).send(STATIC);
    expect(r.status).toBe(200);
    await waitUntil(() => vec().rowCount === 31 && vec().needsReindex === 0, 20_000, 'all rows embedded');
    expect(vec().signature).toBe(`static:${staticFolder}:16`);
    expect(vec().activeDim).toBe(16);
    const status = (await request(t.app).get('/api/memory/engine-status').set(t.auth)).body;
    expect(status.embedding).toMatchObject({ source: 'static', dimensions: 16, available: true, cacheStats: expect.any(Object) });
    expect(status.vectorStore).toMatchObject({ available: true, rowCount: 31, needsReindex: 0, activeDim: 16 });
  });

  it('every create and content update enqueues embed-memory; a metadata-only update does not', async () => {
    const created = (await post('a puppy and a kitten', 'pets')).body.memory;
    await waitUntil(() => t.ctx.memory.findFresh(created.id)?.needsReindex === false, 10_000, 'embedded');
    expect(vec().rowCount).toBe(32);
    await request(t.app).put(`/api/memory/${created.id}`).set(t.auth).send({ metadata: { x: 1 } }).expect(200);
    expect(t.ctx.memory.findFresh(created.id)?.needsReindex).toBe(false);
    await request(t.app).put(`/api/memory/${created.id}`).set(t.auth).send({ content: 'bread and cheese for lunch' }).expect(200);
    expect(t.ctx.memory.findFresh(created.id)?.needsReindex).toBe(true);
    await waitUntil(() => t.ctx.memory.findFresh(created.id)?.needsReindex === false, 10_000, 're-embedded');
    // Deleting the memory deletes its vector in the same transaction.
    await request(t.app).delete(`/api/memory/${created.id}`).set(t.auth).expect(200);
    expect(vec().rowCount).toBe(31);
  });

  it('a signature change (another model) rebuilds through the reindex job and re-embeds every row', async () => {
    await request(t.app).put('/api/settings/memory').set(t.auth).send({ embeddingSource: 'transformers', transformersEnabled: true }).expect(200);
    await waitUntil(() => vec().signature === `transformers:${transformersFolder}:24` && vec().needsReindex === 0 && vec().rowCount === 31, 30_000, 'reindexed');
    expect(vec().activeDim).toBe(24);
  });

  it('POST /api/memory/reindex answers 202 {jobId, started, pending}, 409 while one is live, and reports progress', async () => {
    // The reindex worker is paused, so the first job stays waiting (live) while the second request arrives.
    const reindexWorker = w.workers.get('reindex')!;
    await reindexWorker.pause();
    const first = await request(t.app).post('/api/memory/reindex').set(t.auth).send({ force: true });
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ jobId: expect.stringMatching(/^reindex-api-/), queue: 'reindex', started: true, pending: 31 });
    const second = await request(t.app).post('/api/memory/reindex').set(t.auth).send({});
    expect(second.status).toBe(409);
    expect(second.body).toMatchObject({ error: { code: 'conflict', details: { jobId: first.body.jobId } } });
    reindexWorker.resume();
    const job = await waitUntil(async () => {
      const j = await t.ctx.queues.queue('reindex').getJob(first.body.jobId);
      return j?.finishedOn ? j : null;
    }, 20_000, 'reindex done');
    expect(job.returnvalue).toMatchObject({ phase: 'done', total: 31, done: 31, failed: 0 });
    expect(vec().needsReindex).toBe(0);
    expect((await request(t.app).post('/api/memory/reindex').set(t.auth).send({ force: 'yes' })).status).toBe(400);
  });

  it('lists embedding providers with hasKey and dimensions where known', async () => {
    const r = await request(t.app).get('/api/memory/embedding-providers').set(t.auth);
    const openai = r.body.providers.find((p: { provider: string }) => p.provider === 'openai');
    expect(openai).toMatchObject({ hasKey: false });
    expect(openai.models).toEqual(expect.arrayContaining([expect.objectContaining({ id: 'openai/text-embedding-3-small', dimensions: 1536 })]));
  });

  it('settings refuse a custom endpoint the URL policy blocks, without echoing it', async () => {
    for (const url of ['http://169.254.169.254/latest', 'http://127.0.0.1:9/v1', 'ftp://example.com', 'https://user:pw@example.com', 'https://example.com/v1?x=1']) {
      const r = await request(t.app).put('/api/settings/memory').set(t.auth).send({ customBaseUrl: url });
      expect(r.status).toBe(400);
      expect(r.body.error.details[0].path).toBe('body.customBaseUrl');
      expect(JSON.stringify(r.body)).not.toContain(url.split('//')[1].split('/')[0].replace(/^.*@/, ''));
    }
    expect((await request(t.app).put('/api/settings/memory').set(t.auth).send({ customBaseUrl: 'https://embeddings.example.com/v1' })).status).toBe(200);
  });
});
