import http from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { JOBS, JOB_NAMES } from '../../src/queue/jobs';
import { QUEUE_NAMES } from '../../src/config/queue-names';
import { assertRegistryComplete, startWorker, type RunningWorker } from '../../workers/main';
import { registry } from '../../workers/registry';
import type { Registry } from '../../workers/context';
import { memoryInput } from '../factories';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, testEnv } from '../helpers/env';
import { waitUntil } from '../helpers/wait';

function seedExpired(t: TestApi, n: number, apiKeyId = 'exp') {
  const past = new Date(Date.now() - 60_000).toISOString();
  t.ctx.memory.upsertMany(
    Array.from({ length: n }, (_, i) => memoryInput({ apiKeyId, key: `e${i}`, content: `expired fact ${i}`, expiresAt: past })),
    { source: 'api' },
  );
}

describe('job map and registry', () => {
  it('every job in the map has a handler, on a known queue', () => {
    for (const name of JOB_NAMES) {
      expect(typeof registry[name]).toBe('function');
      expect(QUEUE_NAMES).toContain(JOBS[name].queue);
    }
    expect(() => assertRegistryComplete(registry, QUEUE_NAMES)).not.toThrow();
  });

  it('boot fails when a handler is missing', () => {
    const broken = { ...registry } as Partial<Registry>;
    delete broken['repair-sweep'];
    expect(() => assertRegistryComplete(broken as Record<string, unknown>, QUEUE_NAMES)).toThrow(/jobs without a handler: repair-sweep/);
  });
});

describe('job pipeline against the real Redis', () => {
  let t: TestApi;
  let w: RunningWorker;
  let calls: Record<string, number>;
  let gate: { release: () => void; promise: Promise<void> };

  const newGate = () => {
    let release!: () => void;
    const promise = new Promise<void>((r) => (release = r));
    return { release, promise };
  };

  beforeAll(async () => {
    const env = testEnv({ QDRANT_CLEANUP_EVERY_MS: '86400000' });
    t = buildTestApi(env);
    calls = {};
    gate = newGate();
    // The real registry, with repair-sweep wrapped so the test can count calls, fail on purpose and hold a job active.
    const handlers: Registry = {
      ...registry,
      'repair-sweep': async (data, jc) => {
        calls[jc.job.id!] = (calls[jc.job.id!] ?? 0) + 1;
        if (data.reason === 'manual' && jc.job.id!.includes('flaky') && calls[jc.job.id!] <= 2) throw new Error(`transient failure ${calls[jc.job.id!]}`);
        if (jc.job.id!.includes('hold')) await gate.promise;
        return registry['repair-sweep'](data, jc);
      },
    };
    w = await startWorker(env, silentLog(), { handlers });
  });
  afterAll(async () => {
    gate.release();
    await w.stop();
    await t.close();
  });

  const queue = (name: 'maintenance') => t.ctx.queues.queue(name);

  it('an invalid payload fails once with UnrecoverableError (no retries)', async () => {
    const job = await queue('maintenance').add('repair-sweep', { reason: 'sometimes', extra: 1 }, { attempts: 5, jobId: 'bad-payload' });
    const failed = await waitUntil(async () => ((await job.getState()) === 'failed' ? queue('maintenance').getJob(job.id!) : null), 10_000, 'failure');
    expect(failed.attemptsMade).toBe(1);
    expect(failed.failedReason).toMatch(/invalid payload: reason/);
    expect(calls['bad-payload']).toBeUndefined();
  });

  it('a job name the queue does not serve is unrecoverable too', async () => {
    const job = await queue('maintenance').add('no-such-job', {}, { attempts: 5 });
    const failed = await waitUntil(async () => ((await job.getState()) === 'failed' ? queue('maintenance').getJob(job.id!) : null), 10_000, 'failure');
    expect(failed.attemptsMade).toBe(1);
    expect(failed.failedReason).toMatch(/no job named "no-such-job"/);
  });

  it('a job that throws twice then succeeds is retried (with backoff) and completes', async () => {
    const job = await queue('maintenance').add('repair-sweep', { reason: 'manual', batchSize: 10 }, { ...JOBS['repair-sweep'].options, attempts: 5, backoff: { type: 'exponential', delay: 200, jitter: 0.5 }, jobId: 'flaky-1' });
    await waitUntil(async () => (await job.getState()) === 'completed', 15_000, 'completion');
    expect(calls['flaky-1']).toBe(3);
    const done = await queue('maintenance').getJob('flaky-1');
    expect(done?.returnvalue).toMatchObject({ reason: 'manual', outboxMoved: 0 });
  });

  it('duplicate enqueues of the same logical work run once', async () => {
    const results = await Promise.all(Array.from({ length: 5 }, () => t.ctx.queues.enqueue('repair-sweep', { reason: 'reconnect' })));
    const ids = new Set(results.map((r) => r.jobId));
    expect(ids.size).toBe(1);
    expect(results.every((r) => r.via === 'queue')).toBe(true);
    const id = [...ids][0];
    await waitUntil(async () => (await queue('maintenance').getJob(id))?.finishedOn, 10_000, 'completion');
    expect(calls[id]).toBe(1);
    // Enqueuing it again while the finished job is retained is still a no-op.
    await t.ctx.queues.enqueue('repair-sweep', { reason: 'reconnect' });
    await new Promise((r) => setTimeout(r, 300));
    expect(calls[id]).toBe(1);
  });

  it('GET /api/jobs counts per queue and state; GET one job; DELETE a waiting one, 409 for an active one', async () => {
    const counts = await request(t.app).get('/api/jobs').set(t.auth);
    expect(counts.status).toBe(200);
    expect(counts.body.queues.maintenance).toMatchObject({ completed: expect.any(Number), failed: expect.any(Number), waiting: expect.any(Number) });
    expect(counts.body.outbox).toBe(0);

    const one = await request(t.app).get('/api/jobs/maintenance/flaky-1').set(t.auth);
    expect(one.body).toMatchObject({ id: 'flaky-1', name: 'repair-sweep', state: 'completed', attemptsMade: expect.any(Number), failedReason: expect.anything() });
    expect(one.body.timestamps.finished).toEqual(expect.any(Number));
    expect(one.body).not.toHaveProperty('data');

    const held = await queue('maintenance').add('repair-sweep', { reason: 'manual', batchSize: 10 }, { jobId: 'hold-1' });
    await waitUntil(async () => (await held.getState()) === 'active', 10_000, 'active');
    const busy = await request(t.app).delete('/api/jobs/maintenance/hold-1').set(t.auth);
    expect(busy.status).toBe(409);
    const delayed = await queue('maintenance').add('repair-sweep', { reason: 'manual', batchSize: 10 }, { jobId: 'later-1', delay: 60_000 });
    const del = await request(t.app).delete('/api/jobs/maintenance/later-1').set(t.auth);
    expect(del.body).toMatchObject({ success: true, previousState: 'delayed' });
    expect(await queue('maintenance').getJob(delayed.id!)).toBeUndefined();
    gate.release();
    await waitUntil(async () => (await held.getState()) === 'completed', 10_000, 'held job completion');

    expect((await request(t.app).get('/api/jobs/maintenance/nope').set(t.auth)).status).toBe(404);
    expect((await request(t.app).get('/api/jobs/nowhere/x').set(t.auth)).status).toBe(400);
  });

  it('progress events reach the SSE endpoint, which ends when the job ends', async () => {
    seedExpired(t, 120);
    const server = http.createServer(t.app).listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    try {
      const { jobId } = await t.ctx.queues.enqueue('expire-memories', { batchSize: 10 }, { delay: 400 });
      const port = (server.address() as AddressInfo).port;
      const res = await fetch(`http://127.0.0.1:${port}/api/jobs/maintenance/${jobId}/events`, { headers: t.auth });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
      const text = await res.text(); // the server ends the stream when the job ends
      const events = [...text.matchAll(/^event: (\w+)\ndata: (.*)$/gm)].map((m) => ({ type: m[1], data: JSON.parse(m[2]) }));
      expect(events[0].type).toBe('state');
      const progress = events.filter((e) => e.type === 'progress');
      expect(progress.length).toBeGreaterThanOrEqual(1);
      expect(progress[progress.length - 1].data.data).toMatchObject({ phase: 'deleting', done: 120 });
      expect(events[events.length - 1]).toMatchObject({ type: 'completed', data: { returnvalue: { deleted: 120 } } });
      expect(t.ctx.memory.list({ apiKeyId: 'exp' }, 10, 0).total).toBe(0);
      // A finished job's stream says so at once.
      const again = await (await fetch(`http://127.0.0.1:${port}/api/jobs/maintenance/${jobId}/events`, { headers: t.auth })).text();
      expect(again).toMatch(/event: completed/);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  it('repeatable schedules exist once, however many times workers boot', async () => {
    const env = { ...t.env };
    const second = await startWorker(env, silentLog());
    await second.stop();
    const schedulers = await queue('maintenance').getJobSchedulers();
    expect(schedulers.map((s) => s.key ?? s.id).sort()).toEqual(['schedule-expire-memories', 'schedule-qdrant-cleanup', 'schedule-repair-sweep']);
  });

  it('the scheduled qdrant-cleanup ends at once, saying why, while Qdrant is not enabled', async () => {
    const { every } = (await queue('maintenance').getJobScheduler('schedule-qdrant-cleanup'))!;
    expect(every).toBe(86_400_000);
    // What the schedule adds each day: the same job with its defaults.
    const { jobId } = await t.ctx.queues.enqueue('qdrant-cleanup', {});
    const done = await waitUntil(async () => {
      const j = await queue('maintenance').getJob(jobId);
      return j?.finishedOn ? j : null;
    }, 10_000, 'cleanup completion');
    expect(done.failedReason).toBeUndefined();
    expect(done.returnvalue).toEqual({ phase: 'skipped', reason: 'Qdrant is not enabled', deletedCount: 0 });
  });

  it('/metrics shows queue depth, HTTP latency by route and job durations/failures by job name', async () => {
    await w.publishMetrics();
    const res = await request(t.app).get('/metrics').set(t.auth);
    expect(res.status).toBe(200);
    expect(res.text).toMatch(/engram_queue_jobs\{queue="maintenance",state="completed"/);
    expect(res.text).toMatch(/engram_http_request_duration_seconds_bucket\{[^}]*route="\/api\/jobs\/"/);
    expect(res.text).toMatch(/engram_job_duration_seconds_count\{[^}]*job="repair-sweep"/);
    expect(res.text).toMatch(/engram_job_failures_total\{[^}]*job="repair-sweep"[^}]*final="false"/);
    expect(res.text).toMatch(/engram_outbox_rows\{role="api"\} 0/);
  });

  it('bull-board sits behind a login form and a cookie for browsers', async () => {
    const page = await request(t.app).get('/admin/queues').set('accept', 'text/html');
    expect(page.status).toBe(303);
    expect(page.headers.location).toBe('/admin/login');
    expect((await request(t.app).get('/admin/login')).text).toMatch(/<form method="post" action="\/admin\/login">/);
    const bad = await request(t.app).post('/admin/login').type('form').send({ token: 'nope' });
    expect(bad.status).toBe(403);
    const ok = await request(t.app).post('/admin/login').type('form').send({ token: t.ctx.managementToken });
    expect(ok.status).toBe(303);
    const cookie = ok.headers['set-cookie'][0] as string;
    expect(cookie).toMatch(/engram_mgmt=[^;]+; Max-Age=\d+; Path=\/; Expires=[^;]+; HttpOnly; SameSite=Strict/);
    expect(cookie).not.toContain(t.ctx.managementToken);
    const board = await request(t.app).get('/admin/queues').set('cookie', cookie.split(';')[0]);
    expect(board.status).toBe(200);
    expect(board.text).toMatch(/<html/i);
    const api = await request(t.app).get('/admin/queues/api/queues?activeQueue=maintenance&status=completed&page=1').set('cookie', cookie.split(';')[0]);
    expect(api.status).toBe(200);
    expect(api.body.queues.map((q: { name: string }) => q.name).sort()).toEqual([...QUEUE_NAMES].sort());
    // The cookie alone does not open the JSON API: it needs the dashboard's CSRF header too (dashboard-auth.test.ts).
    const alone = await request(t.app).get('/api/memory').set('cookie', cookie.split(';')[0]);
    expect(alone.status).toBe(403);
    expect(alone.body.error.code).toBe('csrf_header_required');
  });
});

describe('when Redis is unreachable', () => {
  it('the job routes answer 503 fast and enqueue goes to the outbox', async () => {
    const t = buildTestApi(testEnv({ REDIS_URL: 'redis://127.0.0.1:1' }));
    try {
      const started = Date.now();
      const r = await request(t.app).get('/api/jobs').set(t.auth);
      expect(r.status).toBe(503);
      expect(r.body.error.code).toBe('dependency_unavailable');
      const res = await t.ctx.queues.enqueue('repair-sweep', { reason: 'manual' });
      expect(res.via).toBe('outbox');
      expect(Date.now() - started).toBeLessThan(2000);
      expect(t.ctx.queues.outboxCount()).toBe(1);
      const ready = await request(t.app).get('/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body.checks.redis.ok).toBe(false);
    } finally {
      await t.close();
    }
  });
});
