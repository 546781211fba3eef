import crypto from 'node:crypto';
import { OutboxRepository } from '../../src/queue/outbox.repository';
import { startWorker, type RunningWorker } from '../../workers/main';
import { memoryInput } from '../factories';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, testEnv } from '../helpers/env';
import { TestRedis } from '../helpers/redis-server';
import { waitUntil } from '../helpers/wait';
import { crashingAfterFirstCommit } from '../helpers/crash-after-commit';

/**
 * A record-access job adds its counts once: the counts and the job's done tombstone commit together, so a run that
 * is delivered again after its commit (the worker died, or lost Redis, before the ack) adds nothing.
 */
describe('record-access counts once per job', () => {
  jest.setTimeout(60_000);
  let redis: TestRedis;
  let t: TestApi;
  const workers: RunningWorker[] = [];

  beforeEach(async () => {
    redis = await TestRedis.start();
    t = buildTestApi(testEnv({ REDIS_URL: redis.url, REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0' }));
    await waitUntil(() => t.ctx.queues.isReady(), 10_000, 'api connected');
  });
  afterEach(async () => {
    for (const w of workers.splice(0)) await w.stop();
    await t.close();
    await redis.remove();
  });

  const memory = (key: string) => t.ctx.memory.create(memoryInput({ apiKeyId: 'k-once', key, content: `likes ${key}` }), { source: 'api' }).memory;
  /** What the record-access handler does for job `jobId`: one access of memory `id`, claimed once. */
  const accessAs = (jobId: string, id: string) => t.ctx.memory.recordAccess([id], new Date().toISOString(), undefined, () => t.ctx.queues.claimOnce('record-access', jobId));

  it('a job re-run after its counts committed (a crash before the ack) adds nothing; another job with the same ids does', async () => {
    const a = memory('tea');
    const b = memory('coffee');
    const runs: Record<string, unknown[]> = {};
    // Commits the counts, then dies before BullMQ records the completion: the job runs again (attempts: 3).
    const handlers = crashingAfterFirstCommit('record-access', runs);
    workers.push(await startWorker(t.env, silentLog(), { handlers }));

    const { jobId } = await t.ctx.queues.enqueue('record-access', { memoryIds: [a.id, b.id], counts: [3, 1] });
    await waitUntil(() => (runs[jobId]?.length ?? 0) >= 2, 20_000, 'the job to run twice');
    expect(runs[jobId]).toEqual([{ updated: 2 }, { updated: 0, skipped: 'already_done' }]);
    // Without the claim the second run adds the counts again (6 and 2).
    expect(t.ctx.memory.get(a.id)).toMatchObject({ accessCount: 3 });
    expect(t.ctx.memory.get(b.id)).toMatchObject({ accessCount: 1 });

    // Another send of the same ids is another job: counted.
    const second = await t.ctx.queues.enqueue('record-access', { memoryIds: [a.id] });
    expect(second.jobId).not.toBe(jobId);
    await waitUntil(() => (runs[second.jobId]?.length ?? 0) >= 2, 20_000, 'the second job to run twice');
    expect(t.ctx.memory.get(a.id)).toMatchObject({ accessCount: 4 });
    // The tombstones are neither pending nor tracked work: nothing for a flush or the sweep to move.
    expect(t.ctx.queues.outboxCount()).toBe(0);
    expect(t.ctx.queues.outboxTrackedCount()).toBe(0);
    expect((await t.ctx.queues.flushOutbox()).moved).toBe(0);
  });

  it('a job that waited in the outbox is marked done by its run (never relayed again, the relay\'s removal keeps it); its tombstone goes after an hour', () => {
    const a = memory('tea');
    const db = t.ctx.db.db;
    const jobId = `record-access-${crypto.randomUUID()}`;
    // As the outbox holds a job Redis did not take.
    db.prepare('INSERT INTO outbox (job_name, job_id, payload, created_at) VALUES (?, ?, ?, ?)').run('record-access', jobId, JSON.stringify({ memoryIds: [a.id] }), new Date().toISOString());
    expect(t.ctx.queues.outboxCount()).toBe(1);
    expect(accessAs(jobId, a.id)).toBe(1);
    expect(t.ctx.queues.outboxCount()).toBe(0);
    expect(accessAs(jobId, a.id)).toBeNull();
    expect(t.ctx.memory.get(a.id)).toMatchObject({ accessCount: 1 });
    // The relay read the row, Redis took the job, the worker ran it before the relay removed the row it moved:
    // that removal leaves the tombstone.
    const { outbox_id: outboxId } = db.prepare('SELECT outbox_id FROM outbox WHERE job_id = ?').get(jobId) as { outbox_id: number };
    new OutboxRepository(db).remove([outboxId]);
    expect(accessAs(jobId, a.id)).toBeNull();

    const tombstones = () => (db.prepare("SELECT COUNT(*) AS n FROM outbox WHERE job_name = 'record-access' AND done_at IS NOT NULL").get() as { n: number }).n;
    expect(tombstones()).toBe(1);
    expect(t.ctx.queues.pruneOutbox(Date.now() + 59 * 60_000).done).toBe(0);
    expect(tombstones()).toBe(1);
    expect(t.ctx.queues.pruneOutbox(Date.now() + 61 * 60_000).done).toBe(1);
    expect(tombstones()).toBe(0);
  });

  it('a job whose outbox row was quarantined clears that quarantine when it runs, once', () => {
    const a = memory('coffee');
    const db = t.ctx.db.db;
    const jobId = `record-access-${crypto.randomUUID()}`;
    // The relay gave up on the row (set aside with why), and the same job ran after all (added again by hand).
    const outbox = new OutboxRepository(db);
    const outboxId = outbox.add('record-access', jobId, { memoryIds: [a.id] }, new Date().toISOString());
    outbox.quarantine([{ outboxId, error: 'Redis refused it' }], new Date().toISOString());
    expect(t.ctx.queues.outboxQuarantinedCount()).toBe(1);
    expect(accessAs(jobId, a.id)).toBe(1);
    // Before: the quarantined row stayed listed beside the new tombstone, as if the counts were lost.
    expect(t.ctx.queues.outboxQuarantinedCount()).toBe(0);
    expect(accessAs(jobId, a.id)).toBeNull();
    expect(t.ctx.memory.get(a.id)).toMatchObject({ accessCount: 1 });
  });
});
