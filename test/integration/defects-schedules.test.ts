import { Queue } from 'bullmq';
import { startWorker, type RunningWorker } from '../../workers/main';
import { silentLog, testEnv } from '../helpers/env';
import { TestRedis } from '../helpers/redis-server';
import { waitUntil } from '../helpers/wait';

/**
 * P2: a Redis that comes back empty (restart without persistence, failover to a fresh replica)
 * has lost the job schedulers; a running worker must re-create them on reconnect, without a restart.
 */
describe('P2: job schedulers after Redis comes back empty', () => {
  jest.setTimeout(60_000);
  const servers: TestRedis[] = [];
  let worker: RunningWorker | null = null;
  afterEach(async () => {
    await worker?.stop();
    worker = null;
    for (const s of servers.splice(0)) await s.remove();
  });

  /** The maintenance queue's schedulers as seen through a connection of the test's own. */
  async function schedulers(url: string, prefix: string): Promise<{ id: string; every: number | undefined }[]> {
    const q = new Queue('maintenance', { connection: { url, maxRetriesPerRequest: 1, retryStrategy: () => null }, prefix });
    q.on('error', () => undefined);
    try {
      await q.waitUntilReady();
      const list = await q.getJobSchedulers();
      return list.map((s) => ({ id: String(s.key ?? s.id), every: s.every ?? undefined })).sort((a, b) => a.id.localeCompare(b.id));
    } finally {
      await q.waitUntilReady().catch(() => undefined);
      await q.close();
    }
  }

  it('a running worker re-creates them on a new, empty redis-server on the same port', async () => {
    const first = await TestRedis.start({ persist: false });
    servers.push(first);
    const env = testEnv({ REDIS_URL: first.url, REPAIR_SWEEP_EVERY_MS: '60000', EXPIRE_EVERY_MS: '120000', QDRANT_CLEANUP_EVERY_MS: '3600000' });
    worker = await startWorker(env, silentLog());
    const expected = [
      { id: 'schedule-expire-memories', every: 120_000 },
      { id: 'schedule-qdrant-cleanup', every: 3_600_000 },
      { id: 'schedule-repair-sweep', every: 60_000 },
    ];
    expect(await schedulers(first.url, env.QUEUE_PREFIX)).toEqual(expected);

    // Redis dies; a new one with a new data dir and no AOF takes its port: nothing of the old data survives.
    await first.stop(true);
    const second = new TestRedis(first.port, { persist: false });
    servers.push(second);
    await second.start();
    expect(second.dir).not.toBe(first.dir);

    const back = await waitUntil(async () => {
      const s = await schedulers(second.url, env.QUEUE_PREFIX);
      return s.length === expected.length ? s : null;
    }, 20_000, 'the schedulers to be re-created on the new Redis');
    expect(back).toEqual(expected);
    // The schedules work again: each has its next run queued.
    const q = new Queue('maintenance', { connection: { url: second.url, maxRetriesPerRequest: 1 }, prefix: env.QUEUE_PREFIX });
    q.on('error', () => undefined);
    try {
      await q.waitUntilReady();
      const next = await waitUntil(async () => {
        const jobs = await q.getJobs(['delayed', 'waiting', 'active', 'completed']);
        const names = new Set(jobs.map((j) => j.name));
        return names.has('repair-sweep') && names.has('expire-memories') ? names : null;
      }, 10_000, 'scheduled jobs on the new Redis');
      expect(next.size).toBeGreaterThanOrEqual(2);
    } finally {
      await q.close();
    }
  });

  it('with a schedule turned off (0) nothing is re-created for it', async () => {
    const first = await TestRedis.start({ persist: false });
    servers.push(first);
    const env = testEnv({ REDIS_URL: first.url, REPAIR_SWEEP_EVERY_MS: '60000', EXPIRE_EVERY_MS: '0', QDRANT_CLEANUP_EVERY_MS: '86400000' });
    worker = await startWorker(env, silentLog());
    await first.stop(true);
    const second = new TestRedis(first.port, { persist: false });
    servers.push(second);
    await second.start();
    const back = await waitUntil(async () => {
      const s = await schedulers(second.url, env.QUEUE_PREFIX);
      return s.length >= 2 ? s : null;
    }, 20_000, 'the schedulers to be re-created on the new Redis');
    // The default daily cleanup, and no expiry schedule.
    expect(back).toEqual([
      { id: 'schedule-qdrant-cleanup', every: 86_400_000 },
      { id: 'schedule-repair-sweep', every: 60_000 },
    ]);
  });
});
