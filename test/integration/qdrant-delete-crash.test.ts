import path from 'node:path';
import request from 'supertest';
import { startWorker, type RunningWorker } from '../../workers/main';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, tempDir, testEnv } from '../helpers/env';
import { startFakeQdrant, type FakeQdrant } from '../helpers/fake-qdrant';
import { shareTypedArraysWithNative, topicModelSpec, writeModel2VecFolder } from '../helpers/model-fixtures';
import { waitUntil } from '../helpers/wait';

shareTypedArraysWithNative();

const DAY = 86_400_000;
const TOPICS = ['cat', 'pizza', 'python', 'snow', 'dog', 'bread'];

/**
 * A delete's Qdrant sync must survive the process dying right after the delete commits. Seen in
 * test/reliability/faults-worker-kill.test.ts (about 1 run in 3 under load): a summarize job killed
 * after a summary's transaction committed, before its after-commit hook had added the qdrant-sync
 * of the deleted candidates, ran again, found those candidates gone, and never synced them: their
 * points stayed in Qdrant for good (the repair sweep only re-embeds flagged rows, the backfill only
 * writes rows that exist). Here the crash point is reached without timing: the worker's Redis adds
 * never happen from the commit on, that worker is stopped, and a fresh one runs the repair sweep.
 */
describe('a delete or an update reaches Qdrant although the process dies between the commit and the qdrant-sync add', () => {
  let fake: FakeQdrant;
  let t: TestApi;
  let w: RunningWorker;
  const folder = writeModel2VecFolder(path.join(tempDir('models'), 'm'), topicModelSpec(16));
  let seq = 0;
  /** The last outbox row written while seeding (see recordedRows). */
  let seededUpTo = 0;

  beforeAll(async () => {
    fake = await startFakeQdrant();
    t = buildTestApi(testEnv({ MEMORY_STATIC_MODEL: folder, REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0', COMPACT_EVERY_MS: '0', QDRANT_TIMEOUT_MS: '3000' }));
    w = await startWorker(t.env, silentLog());
    await request(t.app).put('/api/settings/memory').set(t.auth).send({ embeddingSource: 'static', staticEnabled: true }).expect(200);
    await request(t.app).put('/api/settings/qdrant').set(t.auth).send({ enabled: true, host: fake.url }).expect(200);
    await waitUntil(() => t.ctx.vectors.stats().signature !== null, 20_000, 'index built');
  });
  afterAll(async () => {
    await w.stop();
    await t.close();
    await fake.close();
    expect(fake.schemaErrors).toEqual([]);
  });

  /** Imported memories created `daysAgo` days ago, each embedded and in Qdrant before this returns. */
  async function seed(apiKeyId: string, n: number, daysAgo: number): Promise<string[]> {
    const at = new Date(Date.now() - daysAgo * DAY).toISOString();
    const ids: string[] = [];
    t.ctx.memory.transaction((report) => {
      for (let i = 0; i < n; i++) {
        seq++;
        const id = `00000000-0000-4000-8000-${String(seq).padStart(12, '0')}`;
        ids.push(id);
        const m = { id, apiKeyId, sessionId: '', type: 'factual' as const, key: `f${seq}`, content: `the ${TOPICS[seq % TOPICS.length]} fact number ${seq}`, metadata: {}, createdAt: at, updatedAt: at, expiresAt: null, accessCount: 0, lastAccessedAt: null };
        report(t.ctx.memory.importInTx(m, { source: 'import' }).change);
      }
    });
    await waitUntil(() => ids.every((id) => point(id)), 30_000, `${n} points of ${apiKeyId} in Qdrant`);
    // Every add the seed started has given up waiting by now (the api's and the worker's wait is 750 ms).
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    seededUpTo = (t.ctx.db.db.prepare('SELECT COALESCE(MAX(outbox_id), 0) AS n FROM outbox').get() as { n: number }).n;
    return ids;
  }
  /**
   * The memory ids of the pending qdrant-sync outbox rows written after the last seed, one array per
   * row. Rows from before are not this test's business: on a loaded machine an add of the seed's own
   * jobs can outlast its 750 ms wait, and its row stays in the outbox although Redis took the job.
   */
  const recordedRows = (): string[][] =>
    (t.ctx.db.db.prepare("SELECT payload FROM outbox WHERE job_name = 'qdrant-sync' AND done_at IS NULL AND quarantined_at IS NULL AND queued_at IS NULL AND outbox_id > ?").all(seededUpTo) as { payload: string }[]).map(
      (r) => (JSON.parse(r.payload) as { memoryIds: string[] }).memoryIds,
    );
  const point = (memoryId: string) => fake.points('engram_memory').find((p) => p.payload.memoryId === memoryId);
  /** Points whose memory no longer exists. */
  const orphans = () => fake.points('engram_memory').filter((p) => !t.ctx.memory.getRecord(p.payload.memoryId as string));

  it('a summarize killed right after a summary commits: the deleted candidates leave Qdrant once a fresh worker sweeps', async () => {
    // 250 candidates: more than one qdrant-sync's 200 ids, so the recorded deletion spans two outbox rows.
    const ids = await seed('tenant-sum', 250, 90);
    expect(orphans()).toEqual([]);

    // The summarize job's process dies at its first add to Redis after the commit: that add never
    // completes, nor does anything the job would do after it.
    const adds = jest.spyOn(w.ctx.queues, 'enqueue').mockImplementation(() => new Promise(() => undefined));
    try {
      void w.ctx.summarize.run({ apiKeyId: 'tenant-sum', olderThanDays: 30 }, Date.now(), {
        jobId: 'summarize-crash',
        progress: async () => undefined,
        checkpoint: async () => undefined,
      });
      // The first summary's transaction committed (summary written, candidates deleted), and its after-commit adds hang.
      await waitUntil(() => adds.mock.calls.some(([name]) => name === 'qdrant-sync'), 10_000, 'the qdrant-sync add after the commit');
    } finally {
      adds.mockRestore();
    }
    const deleted = ids.filter((id) => !t.ctx.memory.getRecord(id));
    expect(deleted.length).toBeGreaterThan(0);
    // The deletion is on record in SQLite: it committed with the delete.
    const rows = recordedRows();
    expect(rows.length).toBe(Math.ceil(deleted.length / 200));
    expect(rows.flat().sort()).toEqual([...deleted].sort());
    expect(orphans().length).toBe(deleted.length);

    // A fresh worker takes over (the summarize run above never resumes).
    await w.stop();
    w = await startWorker(t.env, silentLog());
    await t.ctx.queues.enqueue('repair-sweep', { reason: 'manual' });
    await waitUntil(() => orphans().length === 0 && recordedRows().length === 0, 20_000, 'the recorded deletions relayed and the points deleted').catch((err: Error) => {
      throw new Error(`${err.message}: ${orphans().length} orphan points, ${recordedRows().length} recorded deletion rows pending`);
    });
    expect(deleted.every((id) => !point(id))).toBe(true);
  });

  it('an update whose process dies right after its commit: the point gets the new payload (expiry) once the repair sweep relays its sync', async () => {
    const [id] = await seed('tenant-upd', 1, 1);
    expect(point(id!)!.payload.expiresAtUnix).toBeNull();
    const expiresAt = new Date(Math.ceil(Date.now() / 1000) * 1000 + 30 * DAY).toISOString();

    // The api's add of the update's qdrant-sync never completes (the process dies there).
    const adds = jest.spyOn(t.ctx.queues, 'enqueue').mockImplementation(() => new Promise(() => undefined));
    try {
      await request(t.app).put(`/api/memory/${id}`).set(t.auth).send({ expiresAt }).expect(200);
      await waitUntil(() => adds.mock.calls.some(([name]) => name === 'qdrant-sync'), 10_000, 'the qdrant-sync add after the commit');
    } finally {
      adds.mockRestore();
    }
    // The sync is on record in SQLite: it committed with the update.
    expect(recordedRows()).toEqual([[id]]);
    expect(point(id!)!.payload.expiresAtUnix).toBeNull();

    // A 'schedule' sweep has no coalescing id: the first test's manual sweep may hold this 10 s window's.
    await t.ctx.queues.enqueue('repair-sweep', { reason: 'schedule' });
    await waitUntil(() => point(id!)?.payload.expiresAtUnix === Date.parse(expiresAt) / 1000 && recordedRows().length === 0, 20_000, 'the recorded update relayed and the payload rewritten').catch((err: Error) => {
      throw new Error(`${err.message}: payload expiresAtUnix ${JSON.stringify(point(id!)?.payload.expiresAtUnix)}, ${recordedRows().length} recorded rows pending`);
    });
  });

  it('without a crash the recorded rows go once the job is added; a rolled-back delete records nothing and keeps its point', async () => {
    const [a, b, c] = await seed('tenant-del', 3, 1);
    expect(() =>
      t.ctx.memory.transaction((report) => {
        report(t.ctx.memory.deleteInTx(a!, { source: 'api' }));
        throw new Error('rolled back');
      }),
    ).toThrow('rolled back');
    expect(recordedRows()).toEqual([]);
    await request(t.app).delete(`/api/memory/${b}`).set(t.auth).expect(200);
    await request(t.app).delete(`/api/memory/${c}`).set(t.auth).expect(200);
    await waitUntil(() => !point(b!) && !point(c!) && recordedRows().length === 0, 10_000, 'points deleted and the recorded rows dropped');
    expect(t.ctx.memory.getRecord(a!)).toBeTruthy();
    expect(point(a!)).toBeTruthy();
    expect(orphans().filter((p) => p.payload.apiKeyId === 'tenant-del')).toEqual([]);
  });
});
