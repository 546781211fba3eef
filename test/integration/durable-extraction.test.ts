import http from 'node:http';
import type { AddressInfo } from 'node:net';
import IORedis from 'ioredis';
import { UnrecoverableError } from 'bullmq';
import { registry } from '../../workers/registry';
import type { Registry } from '../../workers/context';
import { startWorker, type RunningWorker } from '../../workers/main';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, testEnv } from '../helpers/env';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream';
import { TestRedis } from '../helpers/redis-server';
import { waitUntil } from '../helpers/wait';
import { crashingAfterFirstCommit } from '../helpers/crash-after-commit';

/**
 * Issue 15 §3: an extraction acknowledged by a chat's 200 survives a Redis that restarts EMPTY while its
 * job waits (the api records it in SQLite before the add; the repair sweep re-adds what Redis lost), and
 * a job that committed its facts never writes them again (the record is claimed in the facts' transaction).
 */
describe('durable extract-facts records', () => {
  jest.setTimeout(90_000);
  let redis: TestRedis;
  let upstream: FakeUpstream;
  let t: TestApi;
  let server: http.Server;
  let base: string;
  let key: { id: string; key: string };
  const workers: RunningWorker[] = [];

  beforeEach(async () => {
    redis = await TestRedis.start();
    upstream = await startFakeUpstream();
    const env = testEnv({
      REDIS_URL: redis.url,
      UPSTREAM_BASE_URL: `${upstream.url}/v1`,
      UPSTREAM_API_KEY: 'upstream-secret',
      REPAIR_SWEEP_EVERY_MS: '1000',
      EXPIRE_EVERY_MS: '0',
      OUTBOX_RELAY_GRACE_MS: '0',
    });
    t = buildTestApi(env);
    server = http.createServer(t.app).listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    key = t.ctx.apiKeys.create('durable');
    t.ctx.settings.updateMemory({ enabled: true, strategy: 'hybrid' });
    await waitUntil(() => t.ctx.queues.isReady(), 10_000, 'api connected');
  });
  afterEach(async () => {
    for (const w of workers.splice(0)) await w.stop();
    server.closeAllConnections();
    server.close();
    await t.close();
    await upstream.close();
    await redis.remove();
  });

  const chat = async (content: string) => {
    const r = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content }] }),
    });
    await r.text();
    return r.status;
  };
  const rows = () =>
    t.ctx.db.db.prepare('SELECT content, reassert_count FROM memories WHERE api_key_id = ? ORDER BY content').all(key.id) as { content: string; reassert_count: number }[];
  const events = () => (t.ctx.db.db.prepare('SELECT COUNT(*) AS n FROM memory_events').get() as { n: number }).n;

  it('worker down, N chats, Redis FLUSHALL, worker up: all N facts land, each once', async () => {
    const n = 12;
    for (let i = 0; i < n; i++) expect(await chat(`I prefer tool${i} for task${i}.`)).toBe(200);
    // The records are written before the add, after the answer: wait for all of them and their jobs.
    await waitUntil(() => t.ctx.queues.outboxTrackedCount() === n, 10_000, 'records written');
    const extraction = t.ctx.queues.queue('extraction');
    await waitUntil(async () => (await extraction.getJobCountByTypes('waiting')) === n, 10_000, 'jobs waiting');

    // Redis loses everything (restart without persistence): only SQLite knows the work.
    const admin = new IORedis(redis.url, { maxRetriesPerRequest: 1 });
    admin.on('error', () => undefined);
    await admin.flushall();
    admin.disconnect();
    expect(await extraction.getJobCountByTypes('waiting', 'active', 'delayed')).toBe(0);
    expect(t.ctx.queues.outboxCount()).toBe(0); // nothing "never added": the records are tracked ones

    workers.push(await startWorker(t.env, silentLog()));
    await waitUntil(() => rows().length === n && t.ctx.queues.outboxTrackedCount() === 0, 30_000, `${n} facts`).catch((err: Error) => {
      throw new Error(`${err.message}; landed ${rows().length}, tracked ${t.ctx.queues.outboxTrackedCount()}`);
    });
    // More sweeps re-add nothing: done records are tombstones.
    await new Promise((r) => setTimeout(r, 2500));
    const got = rows();
    expect(got.map((r) => r.content)).toEqual(Array.from({ length: n }, (_, i) => `prefers tool${i} for task${i}`).sort());
    expect(got.every((r) => r.reassert_count === 0)).toBe(true);
    expect(events()).toBe(n);
    expect(t.ctx.queues.outboxQuarantinedCount()).toBe(0);
  });

  it('a job re-delivered after its facts committed (crash before the ack, or a re-add) writes nothing', async () => {
    const runs: Record<string, unknown[]> = {};
    // Commits the facts, then dies before BullMQ records the completion: the job runs again.
    const handlers = crashingAfterFirstCommit('extract-facts', runs);
    workers.push(await startWorker(t.env, silentLog(), { handlers }));
    const n = 4;
    for (let i = 0; i < n; i++) expect(await chat(`I prefer lang${i} for job${i}.`)).toBe(200);
    await waitUntil(() => Object.values(runs).filter((r) => r.length >= 2).length === n, 30_000, 'every job ran twice');

    const got = rows();
    expect(got).toHaveLength(n);
    // Without the claim, the second run re-asserts each fact (reassert_count 1).
    expect(got.every((r) => r.reassert_count === 0)).toBe(true);
    for (const r of Object.values(runs)) {
      expect(r[0]).toMatchObject({ facts: 1, changed: 1 });
      expect(r[1]).toEqual({ facts: 0, changed: 0, skipped: 'already_done' });
    }
    expect(t.ctx.queues.outboxTrackedCount()).toBe(0);

    // The sweep's race: a record read just before its job completed is re-added after Redis removed the
    // job (removeOnComplete). Same id, same payload — the tombstone makes it a no-op.
    const [jobId] = Object.keys(runs);
    const extraction = t.ctx.queues.queue('extraction');
    await waitUntil(async () => (await extraction.getJob(jobId)) === undefined, 10_000, 'completed job removed');
    const again = await extraction.add('extract-facts', { apiKeyId: key.id, sessionId: null, userText: 'I prefer lang0 for job0.', requestId: jobId.replace(/^extract-/, '') }, { jobId });
    await waitUntil(() => (runs[jobId].length === 3 ? true : null), 10_000, 're-added job ran');
    expect(runs[jobId][2]).toEqual({ facts: 0, changed: 0, skipped: 'already_done' });
    expect(again.id).toBe(jobId);
    expect(rows().every((r) => r.reassert_count === 0)).toBe(true);
    expect(events()).toBe(n);
    // A flush finds no tombstone to relay.
    expect((await t.ctx.queues.flushOutbox()).moved).toBe(0);
  });

  it('a quarantined job an operator retries does its work once: its quarantine goes, and a re-delivery writes nothing', async () => {
    let broken = true;
    const runs: unknown[] = [];
    const real = registry['extract-facts'];
    const handlers: Registry = {
      ...registry,
      'extract-facts': async (data, jc) => {
        if (broken) throw new UnrecoverableError('extraction broke');
        const out = await real(data, jc);
        runs.push(out);
        return out;
      },
    };
    workers.push(await startWorker(t.env, silentLog(), { handlers }));
    expect(await chat('I prefer emacs for editing.')).toBe(200);
    await waitUntil(() => t.ctx.queues.outboxQuarantinedCount() === 1, 15_000, 'record quarantined');
    const [q] = t.ctx.queues.outboxQuarantined();
    const extraction = t.ctx.queues.queue('extraction');
    const failed = await extraction.getJob(q.jobId!);
    expect(await failed!.getState()).toBe('failed');

    // The operator fixes the cause and retries the failed job (bull-board's retry).
    broken = false;
    await failed!.retry('failed');
    await waitUntil(() => runs.length === 1, 15_000, 'retried job ran');
    expect(runs[0]).toMatchObject({ facts: 1, changed: 1 });
    expect(rows()).toEqual([{ content: 'prefers emacs for editing', reassert_count: 0 }]);
    // Before: the row stayed quarantined for a day (GET /api/jobs listed a job that had done its work) and the
    // claim answered 'untracked', leaving no tombstone.
    expect(t.ctx.queues.outboxQuarantinedCount()).toBe(0);
    expect(t.ctx.queues.outboxTrackedCount()).toBe(0);

    // The same job delivered again (a crash before the ack, a re-add): the tombstone makes it a no-op.
    await waitUntil(async () => (await extraction.getJob(q.jobId!)) === undefined, 10_000, 'completed job removed');
    await extraction.add('extract-facts', { apiKeyId: key.id, sessionId: null, userText: 'I prefer emacs for editing.', requestId: q.jobId!.replace(/^extract-/, '') }, { jobId: q.jobId! });
    await waitUntil(() => runs.length === 2, 10_000, 're-added job ran');
    expect(runs[1]).toEqual({ facts: 0, changed: 0, skipped: 'already_done' });
    expect(rows()).toEqual([{ content: 'prefers emacs for editing', reassert_count: 0 }]);
    expect(events()).toBe(1);
  });

  it('a job that fails for good leaves its record quarantined (visible, not relayed), pruned after a day', async () => {
    const handlers: Registry = {
      ...registry,
      'extract-facts': async () => {
        throw new UnrecoverableError('extraction broke');
      },
    };
    workers.push(await startWorker(t.env, silentLog(), { handlers }));
    expect(await chat('I prefer vim for editing.')).toBe(200);
    await waitUntil(() => t.ctx.queues.outboxQuarantinedCount() === 1, 15_000, 'record quarantined');
    const [q] = t.ctx.queues.outboxQuarantined();
    expect(q).toMatchObject({ jobName: 'extract-facts', jobId: expect.stringMatching(/^extract-/), error: 'extraction broke' });
    expect(t.ctx.queues.outboxTrackedCount()).toBe(0);
    expect((await t.ctx.queues.flushOutbox()).moved).toBe(0);
    // Kept as long as the failed job is (a day), then pruned.
    expect(t.ctx.queues.pruneOutbox()).toEqual({ done: 0, quarantined: 0 });
    expect(t.ctx.queues.pruneOutbox(Date.now() + 25 * 3600 * 1000)).toEqual({ done: 0, quarantined: 1 });
    expect(t.ctx.queues.outboxQuarantinedCount()).toBe(0);
  });
});
