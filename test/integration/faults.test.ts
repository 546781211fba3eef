import type { Job } from 'bullmq';
import { QueueLayer } from '../../src/queue/queues';
import path from 'node:path';
import { memoryInput } from '../factories';
import { topicModelSpec, writeModel2VecFolder } from '../helpers/model-fixtures';
import { silentLog, tempDir, testEnv } from '../helpers/env';
import { childEnv, spawnEngram, type Child } from '../helpers/processes';
import { tempStorage } from '../helpers/storage';
import { waitUntil } from '../helpers/wait';

const ROWS = 30_000;

/** A worker process that notices a dead peer's job quickly. */
const FAST_STALL = { WORKER_STALLED_INTERVAL_MS: '1000', WORKER_LOCK_DURATION_MS: '2000', SHUTDOWN_GRACE_MS: '8000', EXPIRE_EVERY_MS: '0', REPAIR_SWEEP_EVERY_MS: '0' };

function setup() {
  const env = testEnv();
  const s = tempStorage(env);
  const past = new Date(Date.now() - 60_000).toISOString();
  for (let i = 0; i < ROWS; i += 5000) {
    s.memory.upsertMany(
      Array.from({ length: 5000 }, (_, j) => memoryInput({ apiKeyId: 'expiring', key: `e${i + j}`, content: `fact ${i + j}`, expiresAt: past })),
      { source: 'api' },
    );
  }
  const queues = new QueueLayer(env, silentLog(), s.db.db, 'worker');
  const effect = () =>
    s.db.db
      .prepare("SELECT COUNT(*) AS events, COUNT(DISTINCT memory_uuid) AS distinctRows FROM memory_events WHERE op = 'expire'")
      .get() as { events: number; distinctRows: number };
  const remaining = () => s.memory.list({ apiKeyId: 'expiring' }, 1, 0).total;
  return { env, s, queues, effect, remaining };
}

async function progressDone(queues: QueueLayer, job: Job): Promise<number> {
  const fresh = await queues.queue('maintenance').getJob(job.id!);
  const p = fresh?.progress as { done?: number } | number | undefined;
  return typeof p === 'object' && p ? (p.done ?? 0) : 0;
}

describe('fault tolerance with real worker processes', () => {
  jest.setTimeout(90_000);
  const children: Child[] = [];
  afterEach(() => {
    for (const c of children.splice(0)) if (c.proc.exitCode === null) c.proc.kill('SIGKILL');
  });

  it('kill -9 of a worker mid-job: after the stall interval another worker finishes it, exactly once in effect', async () => {
    const { env, s, queues, effect, remaining } = setup();
    try {
      const a = spawnEngram('worker', childEnv(env, FAST_STALL));
      children.push(a);
      const { jobId } = await queues.enqueue('expire-memories', { batchSize: 10 });
      const job = (await queues.queue('maintenance').getJob(jobId))!;
      const killedAt = await waitUntil(async () => {
        const done = await progressDone(queues, job);
        return done > 0 ? done : 0;
      }, 20_000, 'progress from worker A');
      a.proc.kill('SIGKILL');
      await a.exited;
      expect(killedAt).toBeLessThan(ROWS);
      expect(remaining()).toBeGreaterThan(0);

      const b = spawnEngram('worker', childEnv(env, FAST_STALL));
      children.push(b);
      await waitUntil(async () => (await queues.queue('maintenance').getJob(jobId))?.finishedOn, 45_000, 'worker B to finish the stalled job', 200);
      const finished = (await queues.queue('maintenance').getJob(jobId))!;
      expect(await finished.getState()).toBe('completed');
      expect(remaining()).toBe(0);
      // Exactly once in effect: one expiry event per memory, none twice.
      expect(effect()).toEqual({ events: ROWS, distinctRows: ROWS });
      b.proc.kill('SIGTERM');
      expect((await b.exited).code).toBe(0);
    } finally {
      await queues.close();
      s.close();
    }
  });

  it('SIGTERM with a job in flight: the worker hands it back and exits; nothing is left stalled', async () => {
    const { env, s, queues, effect, remaining } = setup();
    try {
      const a = spawnEngram('worker', childEnv(env, FAST_STALL));
      children.push(a);
      const { jobId } = await queues.enqueue('expire-memories', { batchSize: 10 });
      const job = (await queues.queue('maintenance').getJob(jobId))!;
      await waitUntil(async () => (await progressDone(queues, job)) > 0, 20_000, 'progress');
      const sentAt = Date.now();
      a.proc.kill('SIGTERM');
      const exit = await a.exited;
      expect(exit.code).toBe(0);
      expect(Date.now() - sentAt).toBeLessThan(8000);
      // Back in the waiting list at once (not active, not waiting for a stall check).
      expect(await (await queues.queue('maintenance').getJob(jobId))!.getState()).toBe('waiting');
      const partial = remaining();
      expect(partial).toBeGreaterThan(0);

      const b = spawnEngram('worker', childEnv(env, FAST_STALL));
      children.push(b);
      await waitUntil(async () => (await queues.queue('maintenance').getJob(jobId))?.finishedOn, 30_000, 'worker B to finish', 200);
      expect(remaining()).toBe(0);
      expect(effect()).toEqual({ events: ROWS, distinctRows: ROWS });
      const final = (await queues.queue('maintenance').getJob(jobId))!;
      expect(final.returnvalue).toEqual({ deleted: partial });
      b.proc.kill('SIGTERM');
      expect((await b.exited).code).toBe(0);
    } finally {
      await queues.close();
      s.close();
    }
  });

  it('kill -9 during a reindex: the job resumes where the flags say and every row ends up embedded', async () => {
    const folder = writeModel2VecFolder(path.join(tempDir('models'), 'm'), topicModelSpec(16));
    const env = testEnv({ MEMORY_STATIC_MODEL: folder });
    const s = tempStorage(env);
    const words = ['cat', 'pizza', 'python', 'snow', 'dog', 'bread'];
    for (let i = 0; i < ROWS; i += 5000) {
      s.memory.upsertMany(
        Array.from({ length: 5000 }, (_, j) => memoryInput({ apiKeyId: `k${(i + j) % 3}`, key: `r${i + j}`, content: `the ${words[(i + j) % words.length]} ${i + j}` })),
        { source: 'api' },
      );
    }
    s.settings.updateMemory({ embeddingSource: 'static', staticEnabled: true });
    const queues = new QueueLayer(env, silentLog(), s.db.db, 'worker');
    const vec = () => s.db.db.prepare('SELECT COUNT(*) AS n FROM vec_memories').get() as { n: number };
    const pending = () => (s.db.db.prepare('SELECT COUNT(*) AS n FROM memories WHERE needs_reindex = 1').get() as { n: number }).n;
    try {
      const a = spawnEngram('worker', childEnv(env, { ...FAST_STALL, MEMORY_STATIC_MODEL: folder }));
      children.push(a);
      const { jobId } = await queues.enqueue('reindex', { force: false, trigger: 'api', batchSize: 64 });
      const q = queues.queue('reindex');
      await waitUntil(async () => {
        const p = (await q.getJob(jobId))?.progress as { done?: number } | undefined;
        return (p?.done ?? 0) > 0;
      }, 30_000, 'reindex progress');
      a.proc.kill('SIGKILL');
      await a.exited;
      const left = pending();
      expect(left).toBeGreaterThan(0);
      expect(left).toBeLessThan(ROWS);

      const b = spawnEngram('worker', childEnv(env, { ...FAST_STALL, MEMORY_STATIC_MODEL: folder }));
      children.push(b);
      const job = await waitUntil(async () => {
        const j = await q.getJob(jobId);
        return j?.finishedOn ? j : null;
      }, 60_000, 'reindex finished by worker B', 200);
      expect(await job.getState()).toBe('completed');
      // Resumed: the second run only had what was still flagged.
      expect(job.returnvalue).toMatchObject({ phase: 'done', failed: 0, total: left, done: left });
      expect(pending()).toBe(0);
      expect(vec().n).toBe(ROWS);
      b.proc.kill('SIGTERM');
      expect((await b.exited).code).toBe(0);
    } finally {
      await queues.close();
      s.close();
    }
  });
});
