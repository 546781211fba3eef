import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { startWorker, type RunningWorker } from '../../workers/main';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, testEnv } from '../helpers/env';
import { waitUntil } from '../helpers/wait';

/** Schedules off: the tests start the jobs they look at. */
const NO_SCHEDULES = { REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0' };

describe('D1: a poisoned outbox row is quarantined, the rest flush', () => {
  let t: TestApi;
  let w: RunningWorker | null = null;
  beforeAll(() => {
    t = buildTestApi(testEnv(NO_SCHEDULES));
  });
  afterAll(async () => {
    await w?.stop();
    await t.close();
  });

  const insert = (jobName: string, jobId: string, payload: string) =>
    Number(
      t.ctx.db.db
        .prepare('INSERT INTO outbox (job_name, job_id, payload, created_at) VALUES (?, ?, ?, ?)')
        .run(jobName, jobId, payload, new Date().toISOString()).lastInsertRowid,
    );
  const outboxRows = () =>
    t.ctx.db.db.prepare('SELECT outbox_id AS outboxId, job_name AS jobName, attempts FROM outbox ORDER BY outbox_id').all() as {
      outboxId: number;
      jobName: string;
      attempts: number;
    }[];
  const access = () => JSON.stringify({ memoryIds: [crypto.randomUUID()] });

  it('flushOutbox quarantines unknown names, unparseable and invalid payloads, and moves every other row', async () => {
    const badJson = insert('record-access', 'd1-bad-json', '{"memoryIds": [');
    insert('record-access', 'd1-ok-a', access());
    const unknown = insert('no-such-job', 'd1-unknown', '{}');
    const invalid = insert('embed-memory', 'd1-invalid', '{"memoryId":"not-a-uuid"}');
    insert('record-access', 'd1-ok-b', access());

    const r = await t.ctx.queues.flushOutbox();
    expect(r).toEqual({ moved: 2, remaining: 0, quarantined: 3 });
    expect(await t.ctx.queues.queue('maintenance').getJob('d1-ok-a')).toBeDefined();
    expect(await t.ctx.queues.queue('maintenance').getJob('d1-ok-b')).toBeDefined();
    expect(outboxRows().map((x) => x.outboxId)).toEqual([badJson, unknown, invalid]);

    // Quarantined rows are never retried automatically: a second flush does not touch them.
    const before = outboxRows();
    expect(await t.ctx.queues.flushOutbox()).toEqual({ moved: 0, remaining: 0, quarantined: 0 });
    expect(outboxRows()).toEqual(before);
    expect(t.ctx.queues.outboxCount()).toBe(0);
  });

  it('the repair-sweep job completes beside quarantined rows (it failed every run before)', async () => {
    w = await startWorker(t.env, silentLog());
    // Let whatever is queued already (the api's reconnect sweep) run first, so this sweep is the one that meets the rows.
    await waitUntil(async () => {
      const c = await t.ctx.queues.queue('maintenance').getJobCounts('waiting', 'active', 'delayed');
      return c.waiting + c.active + c.delayed === 0;
    }, 10_000, 'maintenance queue idle');
    insert('record-access', 'd1-bad-json-2', 'not json at all');
    insert('record-access', 'd1-ok-c', access());
    const { jobId } = await t.ctx.queues.enqueue('repair-sweep', { reason: 'manual' });
    const job = await waitUntil(async () => {
      const j = await t.ctx.queues.queue('maintenance').getJob(jobId);
      return j?.finishedOn ? j : null;
    }, 15_000, 'repair-sweep to finish');
    expect(job.failedReason ?? null).toBeNull();
    expect(await job.getState()).toBe('completed');
    expect(job.returnvalue).toMatchObject({ outboxMoved: 1, outboxQuarantined: 1 });
    expect(await t.ctx.queues.queue('maintenance').getJob('d1-ok-c')).toBeDefined();
  });

  it('GET /api/jobs lists quarantined rows with their error; DELETE /api/jobs/outbox/:outboxId removes one (404 when absent)', async () => {
    const res = await request(t.app).get('/api/jobs').set(t.auth);
    expect(res.status).toBe(200);
    expect(res.body.outbox).toBe(0);
    const q = res.body.outboxQuarantined as { outboxId: number; jobName: string; jobId: string; error: string; createdAt: string }[];
    expect(q.map((x) => x.jobId)).toEqual(['d1-bad-json', 'd1-unknown', 'd1-invalid', 'd1-bad-json-2']);
    const byId = Object.fromEntries(q.map((x) => [x.jobId, x]));
    expect(byId['d1-bad-json']).toMatchObject({ jobName: 'record-access', error: expect.stringMatching(/JSON/), createdAt: expect.any(String), outboxId: expect.any(Number) });
    expect(byId['d1-unknown'].error).toMatch(/unknown job name/);
    expect(byId['d1-invalid'].error).toMatch(/invalid payload: memoryId/);

    await w!.publishMetrics();
    const metrics = await request(t.app).get('/metrics').set(t.auth);
    expect(metrics.text).toMatch(/engram_outbox_quarantined_rows\{role="worker"\} 4/);

    const target = byId['d1-unknown'].outboxId;
    const del = await request(t.app).delete(`/api/jobs/outbox/${target}`).set(t.auth);
    expect(del.status).toBe(200);
    expect(del.body).toMatchObject({ success: true, outboxId: target, jobName: 'no-such-job' });
    expect((await request(t.app).delete(`/api/jobs/outbox/${target}`).set(t.auth)).status).toBe(404);
    expect((await request(t.app).delete('/api/jobs/outbox/nope').set(t.auth)).status).toBe(400);
    const after = await request(t.app).get('/api/jobs').set(t.auth);
    expect(after.body.outboxQuarantined.map((x: { jobId: string }) => x.jobId)).toEqual(['d1-bad-json', 'd1-invalid', 'd1-bad-json-2']);
  });

  it('a pending row cannot be deleted through the quarantine route (409), and a new job with a quarantined id is still accepted', async () => {
    // Redis is up, so park a pending row directly.
    const pending = insert('repair-sweep', 'd1-pending', '{"reason":"manual"}');
    const res = await request(t.app).delete(`/api/jobs/outbox/${pending}`).set(t.auth);
    expect(res.status).toBe(409);
    // The same (name, id) as a quarantined row is a new pending row, not swallowed by the quarantined one.
    insert('record-access', 'd1-bad-json', access());
    // A job id BullMQ would refuse (an integer) would fail every addBulk of its queue: quarantined too.
    insert('record-access', '777', access());
    expect(t.ctx.queues.outboxCount()).toBe(3);
    expect(await t.ctx.queues.flushOutbox()).toEqual({ moved: 2, remaining: 0, quarantined: 1 });
    expect(t.ctx.queues.outboxQuarantined().find((x) => x.jobId === '777')?.error).toMatch(/integer/);
  });
});

describe('D4: the reindex singleton under concurrent triggers', () => {
  const live = async (t: TestApi) => (await t.ctx.queues.queue('reindex').getJobs(['waiting', 'active', 'delayed', 'prioritized'])).filter((j) => j.name === 'reindex');

  it('20 concurrent ReindexService.request() calls leave exactly one live reindex job, and all of them name it', async () => {
    // No worker serves the reindex queue here, so the job stays live for the whole test.
    const t = buildTestApi(testEnv(NO_SCHEDULES));
    try {
      await waitUntil(() => t.ctx.queues.isReady(), 5000, 'redis ready');
      const results = await Promise.all(Array.from({ length: 20 }, () => t.ctx.reindex.request('api')));
      const jobs = await live(t);
      expect(jobs).toHaveLength(1);
      expect(results.filter((r) => !r.existing)).toHaveLength(1);
      expect(new Set(results.map((r) => r.jobId))).toEqual(new Set([jobs[0].id]));
      // A later trigger (settings change, drift) gets the same live job.
      const again = await t.ctx.reindex.request('auto');
      expect(again).toMatchObject({ existing: true, jobId: jobs[0].id });
      expect(await live(t)).toHaveLength(1);
    } finally {
      await t.close();
    }
  });

  it('20 concurrent POST /api/memory/reindex: one 202, nineteen 409s carrying the live job id', async () => {
    const t = buildTestApi(testEnv(NO_SCHEDULES));
    try {
      await waitUntil(() => t.ctx.queues.isReady(), 5000, 'redis ready');
      const responses = await Promise.all(Array.from({ length: 20 }, () => request(t.app).post('/api/memory/reindex').set(t.auth).send({})));
      const jobs = await live(t);
      expect(jobs).toHaveLength(1);
      const accepted = responses.filter((r) => r.status === 202);
      const refused = responses.filter((r) => r.status === 409);
      expect(accepted).toHaveLength(1);
      expect(refused).toHaveLength(19);
      expect(accepted[0].body.jobId).toBe(jobs[0].id);
      for (const r of refused) expect(r.body.error.details.jobId).toBe(jobs[0].id);
    } finally {
      await t.close();
    }
  });

  it('while Redis is unreachable the outbox holds one reindex too: one 202, the rest 409 with its id', async () => {
    const t = buildTestApi(testEnv({ ...NO_SCHEDULES, REDIS_URL: 'redis://127.0.0.1:1' }));
    try {
      const results = await Promise.all(Array.from({ length: 20 }, () => t.ctx.reindex.request('auto')));
      expect(results.every((r) => r.via === 'outbox')).toBe(true);
      expect(results.filter((r) => !r.existing)).toHaveLength(1);
      expect(new Set(results.map((r) => r.jobId)).size).toBe(1);
      const responses = await Promise.all(Array.from({ length: 20 }, () => request(t.app).post('/api/memory/reindex').set(t.auth).send({})));
      expect(responses.map((r) => r.status).sort()).toEqual(Array(20).fill(409));
      for (const r of responses) expect(r.body.error.details.jobId).toBe(results[0].jobId);
      const rows = t.ctx.db.db.prepare("SELECT job_id FROM outbox WHERE job_name = 'reindex'").all() as { job_id: string }[];
      expect(rows).toEqual([{ job_id: results[0].jobId }]);
    } finally {
      await t.close();
    }
  });
});

describe('D6: job event streams (SSE) clean up when the client leaves or the job ends', () => {
  let t: TestApi;
  let w: RunningWorker;
  let server: http.Server;
  let base: string;
  const hub = () => t.ctx.jobEvents;
  const held = 'd6-held';

  beforeAll(async () => {
    t = buildTestApi(testEnv(NO_SCHEDULES));
    await waitUntil(() => t.ctx.queues.isReady(), 5000, 'redis ready');
    w = await startWorker(t.env, silentLog());
    server = http.createServer(t.app).listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // A job that stays live for the whole test: its streams only end when the client leaves.
    await t.ctx.queues.queue('maintenance').add('repair-sweep', { reason: 'manual', batchSize: 10 }, { jobId: held, delay: 3_600_000 });
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await w.stop();
    await t.close();
  });

  const open = (jobId: string, signal?: AbortSignal) => fetch(`${base}/api/jobs/maintenance/${jobId}/events`, { headers: t.auth, signal });
  const settled = (baseline: { listeners: number; heartbeats: number }, what: string) =>
    waitUntil(() => hub().listenerCount() === baseline.listeners && hub().heartbeatCount() === baseline.heartbeats, 10_000, `${what} (listeners ${hub().listenerCount()}, heartbeats ${hub().heartbeatCount()})`);

  it('200 streams dropped after their first event leave no listener and no heartbeat behind', async () => {
    const baseline = { listeners: hub().listenerCount(), heartbeats: hub().heartbeatCount() };
    const decoder = new TextDecoder();
    for (let batch = 0; batch < 10; batch++) {
      await Promise.all(
        Array.from({ length: 20 }, async () => {
          const ac = new AbortController();
          const res = await open(held, ac.signal);
          expect(res.status).toBe(200);
          const first = await res.body!.getReader().read();
          expect(decoder.decode(first.value)).toMatch(/^event: state/);
          ac.abort();
        }),
      );
    }
    await settled(baseline, 'every dropped stream to clean up');
  });

  it('streams dropped before their first event leave nothing behind either', async () => {
    const baseline = { listeners: hub().listenerCount(), heartbeats: hub().heartbeatCount() };
    await Promise.all(
      Array.from({ length: 50 }, (_, i) => {
        const req = http.get(`${base}/api/jobs/maintenance/${held}/events`, { headers: t.auth });
        req.on('error', () => undefined);
        // Gone while the route is still subscribing / reading the job, or just after the headers.
        return new Promise<void>((resolve) => {
          if (i % 2 === 0) req.once('socket', (s) => s.once('connect', () => setImmediate(() => (req.destroy(), resolve()))));
          else req.once('response', (res) => (res.destroy(), req.destroy(), resolve()));
        });
      }),
    );
    await settled(baseline, 'every early-dropped stream to clean up');
  });

  it('a stream whose job finishes ends by itself and cleans up', async () => {
    const baseline = { listeners: hub().listenerCount(), heartbeats: hub().heartbeatCount() };
    const { jobId } = await t.ctx.queues.enqueue('record-access', { memoryIds: [crypto.randomUUID()] }, { delay: 300 });
    const res = await open(jobId);
    expect(res.status).toBe(200);
    const text = await res.text(); // returns only because the server ends the stream
    expect(text).toMatch(/event: completed/);
    await settled(baseline, 'the finished stream to clean up');
  });
});
