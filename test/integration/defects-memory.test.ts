import { QueueEvents } from 'bullmq';
import { newestEventId } from '../../src/queue/job-events';
import { startWorker, type RunningWorker } from '../../workers/main';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, testEnv } from '../helpers/env';
import { waitUntil } from '../helpers/wait';

describe('D9: a fact stated again, unchanged, through the real extract-facts worker', () => {
  let t: TestApi;
  let w: RunningWorker;
  // A finished extract-facts job is removed at once (its payload is chat text): its result is read from the queue's events.
  let events: QueueEvents;
  const finished = new Map<string, (r: { returnvalue: unknown }) => void>();
  beforeAll(async () => {
    t = buildTestApi(testEnv({ REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0' }));
    await waitUntil(() => t.ctx.queues.isReady(), 5000, 'redis ready');
    events = new QueueEvents('extraction', { connection: { url: t.env.REDIS_URL, maxRetriesPerRequest: null }, prefix: t.env.QUEUE_PREFIX, lastEventId: await newestEventId(t.ctx.queues, 'extraction') });
    events.on('error', () => undefined);
    events.on('completed', ({ jobId, returnvalue }) => finished.get(jobId)?.({ returnvalue }));
    await events.waitUntilReady();
    w = await startWorker(t.env, silentLog());
  });
  afterAll(async () => {
    await events?.close();
    await w?.stop();
    await t.close();
  });

  const extract = async (requestId: string) => {
    const done = new Promise<{ returnvalue: unknown }>((resolve) => finished.set(`extract-${requestId}`, resolve));
    const { jobId } = await t.ctx.queues.enqueue('extract-facts', { apiKeyId: 'tenant-d9', userText: 'I really prefer dark mode.', requestId });
    expect(jobId).toBe(`extract-${requestId}`);
    return waitUntil(() => Promise.race([done, new Promise<null>((r) => setTimeout(() => r(null), 100))]), 10_000, `extraction ${requestId}`);
  };

  it('is counted as a re-assertion: one history row, no embedding, updated_at refreshed', async () => {
    const first = await extract('d9-r1');
    expect(first.returnvalue).toMatchObject({ facts: 1, changed: 1, reasserted: 0 });
    const memory = t.ctx.memory.findByKey('tenant-d9', 'preference:dark_mode')!;
    expect(memory.content).toBe('really prefers dark mode');
    await new Promise((r) => setTimeout(r, 5)); // updated_at has millisecond resolution

    for (const id of ['d9-r2', 'd9-r3', 'd9-r4']) {
      const again = await extract(id);
      expect(again.returnvalue).toMatchObject({ facts: 1, changed: 0, reasserted: 1, embedsQueued: 0 });
    }
    expect(t.ctx.memory.history(memory.id).map((e) => e.op)).toEqual(['create']);
    const row = t.ctx.db.db.prepare('SELECT reassert_count, last_asserted_at, updated_at FROM memories WHERE id = ?').get(memory.id) as {
      reassert_count: number;
      last_asserted_at: string;
      updated_at: string;
    };
    expect(row.reassert_count).toBe(3);
    expect(row.updated_at > memory.updatedAt).toBe(true);
    expect(row.last_asserted_at).toBe(row.updated_at);
    // Only the first statement queued an embedding.
    const embeds = (await t.ctx.queues.queue('embedding').getJobs(['waiting', 'active', 'delayed', 'completed', 'failed', 'prioritized'])).filter(
      (j) => j.data.memoryId === memory.id,
    );
    expect(embeds).toHaveLength(1);
  });

  it('a changed statement of the same fact is a real change, with its history row and an embedding', async () => {
    const done = new Promise<{ returnvalue: unknown }>((resolve) => finished.set('extract-d9-r5', resolve));
    await t.ctx.queues.enqueue('extract-facts', { apiKeyId: 'tenant-d9', userText: 'I prefer dark mode.', requestId: 'd9-r5' });
    const job = await waitUntil(() => Promise.race([done, new Promise<null>((r) => setTimeout(() => r(null), 100))]), 10_000, 'extraction d9-r5');
    expect(job.returnvalue).toMatchObject({ facts: 1, changed: 1, reasserted: 0, embedsQueued: 1 });
    const memory = t.ctx.memory.findByKey('tenant-d9', 'preference:dark_mode')!;
    expect(memory.content).toBe('prefers dark mode');
    const history = t.ctx.memory.history(memory.id);
    expect(history.map((e) => e.op)).toEqual(['create', 'update']);
    expect(history[1].after?.metadata).toMatchObject({ requestId: 'd9-r5' });
  });
});
