import fs from 'node:fs';
import path from 'node:path';
import { QueueEvents, type Job } from 'bullmq';
import { newestEventId } from '../../src/queue/job-events';
import { forgetStaticModels } from '../../src/embedding/static';
import { parsePayload } from '../../src/queue/jobs';
import { startWorker, type RunningWorker } from '../../workers/main';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, tempDir, testEnv } from '../helpers/env';
import { shareTypedArraysWithNative, topicModelSpec, writeModel2VecFolder } from '../helpers/model-fixtures';
import { waitUntil } from '../helpers/wait';

shareTypedArraysWithNative();

const STATIC = { embeddingSource: 'static' as const, staticEnabled: true };
const quiet = { REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0', COMPACT_EVERY_MS: '0' };

/**
 * Runs one extract-facts job and resolves with its result. A completed extraction is removed from Redis at once (its
 * payload is chat text), so the result is read from the queue's events, listened to before the job is added.
 */
async function extract(t: TestApi, apiKeyId: string, userText: string, requestId: string): Promise<{ returnvalue: unknown }> {
  // From the newest event as of now: with BullMQ's '$', a job finished before the reader's first read was missed.
  const lastEventId = await newestEventId(t.ctx.queues, 'extraction');
  const events = new QueueEvents('extraction', { connection: { url: t.env.REDIS_URL, maxRetriesPerRequest: null }, prefix: t.env.QUEUE_PREFIX, lastEventId });
  events.on('error', () => undefined);
  try {
    await events.waitUntilReady();
    // The job id is deterministic, so the listener knows it before the add (a fast worker may finish first).
    const jobId = `extract-${requestId}`;
    const done = new Promise<{ returnvalue: unknown }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out after 15000 ms waiting for extraction ${requestId}`)), 15_000);
      events.on('completed', (e) => {
        if (e.jobId !== jobId) return;
        clearTimeout(timer);
        resolve({ returnvalue: e.returnvalue });
      });
      events.on('failed', (e) => {
        if (e.jobId !== jobId) return;
        clearTimeout(timer);
        reject(new Error(`extraction ${requestId} failed: ${e.failedReason}`));
      });
    });
    expect((await t.ctx.queues.enqueue('extract-facts', { apiKeyId, userText, requestId })).jobId).toBe(jobId);
    return await done;
  } finally {
    await events.close();
  }
}

async function embedJobsFor(t: TestApi, memoryId: string): Promise<Job[]> {
  const jobs = await t.ctx.queues.queue('embedding').getJobs(['waiting', 'active', 'delayed', 'completed', 'failed', 'prioritized']);
  return jobs.filter((j) => j.name === 'embed-memory' && j.data.memoryId === memoryId);
}

/** Builds the index for the fixture model in the test's own process, as a finished reindex leaves it. */
async function buildIndex(t: TestApi): Promise<string> {
  const settings = t.ctx.settings.updateMemory(STATIC);
  const probe = await t.ctx.embedding.embedOne('probe', settings);
  const signature = t.ctx.vectors.signatureFor(probe.resolution)!;
  t.ctx.vectors.rebuild(signature, probe.resolution.dimensions!);
  return signature;
}

describe('extraction embeds its new facts in the same job with a local model (issue 14)', () => {
  let t: TestApi;
  let w: RunningWorker;
  const folder = writeModel2VecFolder(path.join(tempDir('models'), 'static16'), topicModelSpec(16, 50));

  beforeAll(async () => {
    t = buildTestApi(testEnv({ MEMORY_STATIC_MODEL: folder, ...quiet }));
    await buildIndex(t);
    w = await startWorker(t.env, silentLog());
  });
  afterAll(async () => {
    await w.stop();
    await t.close();
  });

  it('a new fact is injectable when the extraction job completes: vector stored, flag cleared, no embed-memory job', async () => {
    const job = await extract(t, 'tenant-i1', 'I like pizza and cheese.', 'i1-r1');
    expect(job.returnvalue).toMatchObject({ facts: 1, changed: 1, embeddedInline: 1, embedsQueued: 0 });
    const memory = t.ctx.memory.findByKey('tenant-i1', 'preference:pizza_and_cheese')!;
    expect(t.ctx.memory.findFresh(memory.id)?.needsReindex).toBe(false);
    const query = await t.ctx.embedding.embedOne('pizza cheese', t.ctx.settings.memoryFresh());
    const hits = t.ctx.vectors.knn('tenant-i1', query.vector!, 3, { nowIso: new Date().toISOString() });
    expect(hits.map((h) => h.id)).toContain(memory.id);
    expect(await embedJobsFor(t, memory.id)).toHaveLength(0);
  });

  it('is idempotent: the same statement again is a re-assertion, the same changes embedded twice leave one vector', async () => {
    const before = t.ctx.vectors.stats().rowCount;
    const again = await extract(t, 'tenant-i1', 'I like pizza and cheese.', 'i1-r2');
    expect(again.returnvalue).toMatchObject({ facts: 1, changed: 0, reasserted: 1, embeddedInline: 0, embedsQueued: 0 });
    // A retried job that got past the upsert re-embeds the same rows: same vectors, no new rows.
    const changes = t.ctx.memory.upsertMany([{ apiKeyId: 'tenant-i1', type: 'factual', key: 'preference:snow', content: 'likes snow and rain' }], { source: 'extraction' }, 'create');
    expect(await t.ctx.reindex.embedInline(changes)).toEqual({ inline: 1, queued: 0 });
    expect(await t.ctx.reindex.embedInline(changes)).toEqual({ inline: 1, queued: 0 });
    expect(t.ctx.vectors.stats()).toMatchObject({ rowCount: before + 1, needsReindex: 0 });
  });

  it('a changed fact gets its new vector inline; an edit that lands first keeps its flag for its own job', async () => {
    await extract(t, 'tenant-i1', 'My favorite food is pizza.', 'i1-r3');
    const first = t.ctx.memory.findByKey('tenant-i1', 'preference:favorite_food')!;
    const job = await extract(t, 'tenant-i1', 'My favorite food is bread.', 'i1-r4');
    expect(job.returnvalue).toMatchObject({ changed: 1, embeddedInline: 1, embedsQueued: 0 });
    const query = await t.ctx.embedding.embedOne('bread', t.ctx.settings.memoryFresh());
    const [hit] = t.ctx.vectors.knn('tenant-i1', query.vector!, 1, { nowIso: new Date().toISOString(), sessionId: null });
    expect(hit!.id).toBe(first.id);
    // Embedding a stale change (content edited since) stores nothing that clears the newer edit's flag.
    const stale = t.ctx.memory.upsertMany([{ apiKeyId: 'tenant-i1', type: 'factual', key: 'preference:cat', content: 'likes cat' }], { source: 'extraction' }, 'create');
    t.ctx.memory.update(stale[0]!.memory.id, { content: 'likes dog' }, { source: 'api' });
    await t.ctx.reindex.embedInline(stale);
    expect(t.ctx.memory.findFresh(stale[0]!.memory.id)?.needsReindex).toBe(true);
  });
});

describe('the reindex job', () => {
  it('embeds every row in 512-row batches and leaves the query cache alone', async () => {
    const folder = writeModel2VecFolder(path.join(tempDir('models'), 'static10'), topicModelSpec(10, 20));
    const t = buildTestApi(testEnv({ MEMORY_STATIC_MODEL: folder, ...quiet }));
    try {
      await buildIndex(t);
      const words = ['cat', 'pizza', 'python', 'snow', 'bread', 'dog'];
      t.ctx.memory.upsertMany(
        Array.from({ length: 1100 }, (_, i) => ({ apiKeyId: 'tenant-r', type: 'factual' as const, content: `${words[i % 6]} ${words[(i * 7) % 6]} note ${i}` })),
        { source: 'import' },
        'import',
      );
      const cached = t.ctx.embedding.cacheStats().size;
      const progress: object[] = [];
      const data = parsePayload('reindex', { force: true });
      expect(data.batchSize).toBe(512);
      const result = await t.ctx.reindex.run(data, { progress: async (p) => void progress.push(p), checkpoint: async () => undefined });
      expect(result).toMatchObject({ phase: 'done', done: 1100, total: 1100, failed: 0 });
      // One report before the first batch, one per batch (3), one with the result.
      expect(progress).toHaveLength(5);
      expect(t.ctx.vectors.stats()).toMatchObject({ rowCount: 1100, needsReindex: 0 });
      expect(t.ctx.embedding.cacheStats().size).toBe(cached);
    } finally {
      await t.close();
    }
  });
});

describe('extraction falls back to embed-memory jobs when it cannot embed inline', () => {
  it('no index for the model yet: embed-memory is queued, which starts the reindex that embeds the fact', async () => {
    const folder = writeModel2VecFolder(path.join(tempDir('models'), 'static8'), topicModelSpec(8, 10));
    const t = buildTestApi(testEnv({ MEMORY_STATIC_MODEL: folder, ...quiet }));
    t.ctx.settings.updateMemory(STATIC);
    const w = await startWorker(t.env, silentLog());
    try {
      const job = await extract(t, 'tenant-i2', 'I like python and typescript.', 'i2-r1');
      expect(job.returnvalue).toMatchObject({ changed: 1, embeddedInline: 0, embedsQueued: 1 });
      const memory = t.ctx.memory.findByKey('tenant-i2', 'preference:python_and_typescript')!;
      await waitUntil(() => t.ctx.memory.findFresh(memory.id)?.needsReindex === false, 20_000, 'embedded by the reindex');
      expect(t.ctx.vectors.stats()).toMatchObject({ rowCount: 1, activeDim: 8 });
    } finally {
      await w.stop();
      await t.close();
    }
  });

  it('the model cannot be loaded: the extraction still completes and queues embed-memory (which retries)', async () => {
    const good = writeModel2VecFolder(path.join(tempDir('models'), 'good8'), topicModelSpec(8, 10));
    const broken = path.join(tempDir('models'), 'broken');
    fs.cpSync(good, broken, { recursive: true });
    const t = buildTestApi(testEnv({ MEMORY_STATIC_MODEL: broken, ...quiet }));
    // The index exists for the (same-named) folder's model; then its weights are corrupted on disk.
    await buildIndex(t);
    fs.writeFileSync(path.join(broken, 'model.safetensors'), 'not a safetensors file');
    fs.writeFileSync(path.join(broken, 'tokenizer.json'), '{');
    // This process loaded the good files for the index; the worker (same process) must read the disk again.
    forgetStaticModels();
    const w = await startWorker(t.env, silentLog());
    try {
      const job = await extract(t, 'tenant-i3', 'I like snow and rain.', 'i3-r1');
      expect(job.returnvalue).toMatchObject({ changed: 1, embeddedInline: 0, embedsQueued: 1 });
      const memory = t.ctx.memory.findByKey('tenant-i3', 'preference:snow_and_rain')!;
      expect(t.ctx.memory.findFresh(memory.id)?.needsReindex).toBe(true);
      const [embed] = await waitUntil(async () => {
        const jobs = await embedJobsFor(t, memory.id);
        return jobs.length && jobs[0]!.attemptsMade >= 1 ? jobs : null;
      }, 15_000, 'the embed-memory job to have failed once');
      expect(embed!.failedReason).toMatch(/could not be loaded/);
    } finally {
      await w.stop();
      await t.close();
    }
  });
});

describe('a worker that embeds loads its local model at boot', () => {
  it('the width is measured before any job ran', async () => {
    const folder = writeModel2VecFolder(path.join(tempDir('models'), 'static12'), topicModelSpec(12, 10));
    const t = buildTestApi(testEnv({ MEMORY_STATIC_MODEL: folder, ...quiet }));
    t.ctx.settings.updateMemory(STATIC);
    const w = await startWorker(t.env, silentLog());
    try {
      await waitUntil(() => w.ctx.embedding.resolve(w.ctx.settings.memoryFresh()).dimensions === 12, 10_000, 'the model loaded at boot');
      expect(w.ctx.embedding.cacheStats().size).toBe(0);
    } finally {
      await w.stop();
      await t.close();
    }
  });
});
