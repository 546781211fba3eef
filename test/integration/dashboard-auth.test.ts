import fs from 'node:fs';
import path from 'node:path';
import { UnrecoverableError, Worker } from 'bullmq';
import request from 'supertest';
import { buildApiContext } from '../../src/api';
import { createApp } from '../../src/http/app';
import { CSRF_HEADER } from '../../src/http/auth';
import { Metrics } from '../../src/metrics';
import { bullConnectionOptions } from '../../src/queue/redis';
import { buildTestApi, type TestApi } from '../helpers/api';
import { TEST_TOKEN, silentLog, tempDir, testEnv } from '../helpers/env';
import { waitUntil } from '../helpers/wait';

type App = Parameters<typeof request>[0];

/** Signs in as the dashboard does (fetch, JSON) and returns the cookie as a browser would send it back. */
async function dashboardLogin(app: App, token = TEST_TOKEN): Promise<string> {
  const r = await request(app).post('/admin/login').set('accept', 'application/json').send({ token });
  expect(r.status).toBe(200);
  expect(r.body).toEqual({ success: true, expiresAt: expect.any(String) });
  const line = (r.headers['set-cookie'] as unknown as string[]).find((c) => c.startsWith('engram_mgmt=') && !/Expires=Thu, 01 Jan 1970/.test(c))!;
  expect(line).toMatch(/HttpOnly; SameSite=Strict$/);
  return line.split(';')[0];
}

const memoryCount = (t: TestApi) => (t.ctx.db.db.prepare('SELECT COUNT(*) AS n FROM memories').get() as { n: number }).n;

describe('the dashboard session on /api: cookie + CSRF header', () => {
  let t: TestApi;
  beforeAll(() => {
    t = buildTestApi();
  });
  afterAll(() => t.close());

  it('a JSON sign-in with a wrong token is a 403 in JSON and sets no cookie', async () => {
    const r = await request(t.app).post('/admin/login').set('accept', 'application/json').send({ token: 'not-the-token' });
    expect(r.status).toBe(403);
    expect(r.body.error).toMatchObject({ code: 'forbidden', message: 'That token is not valid' });
    expect(r.headers['set-cookie']).toBeUndefined();
  });

  it('the cookie opens /api only together with the header; without it a write is refused and changes nothing', async () => {
    const cookie = await dashboardLogin(t.app);
    const before = memoryCount(t);
    const body = { key: 'csrf', content: 'a forged write' };

    const noHeader = await request(t.app).post('/api/memory').set('cookie', cookie).send(body);
    expect(noHeader.status).toBe(403);
    expect(noHeader.body.error.code).toBe('csrf_header_required');
    expect(noHeader.body.error.message).toContain(CSRF_HEADER);
    // A cross-site HTML form (urlencoded, cookie only) fares no better.
    const form = await request(t.app).post('/api/memory').set('cookie', cookie).type('form').send(body);
    expect(form.status).toBe(403);
    expect(memoryCount(t)).toBe(before);

    // A browser that says the request is cross-site is refused even with the header.
    const crossSite = await request(t.app).post('/api/memory').set('cookie', cookie).set(CSRF_HEADER, '1').set('sec-fetch-site', 'cross-site').send(body);
    expect(crossSite.status).toBe(403);
    expect(crossSite.body.error.code).toBe('cross_site_refused');
    expect(memoryCount(t)).toBe(before);

    const ok = await request(t.app).post('/api/memory').set('cookie', cookie).set(CSRF_HEADER, '1').set('sec-fetch-site', 'same-origin').send(body);
    expect(ok.status).toBe(201);
    expect(memoryCount(t)).toBe(before + 1);
    expect((await request(t.app).get('/api/memory').set('cookie', cookie).set(CSRF_HEADER, '1')).body.total).toBe(before + 1);
  });

  it('the header without a live session is a 401; a revoked session stops working at once', async () => {
    expect((await request(t.app).get('/api/memory').set(CSRF_HEADER, '1')).status).toBe(401);
    const forged = await request(t.app).get('/api/memory').set('cookie', `engram_mgmt=${'A'.repeat(43)}`).set(CSRF_HEADER, '1');
    expect(forged.status).toBe(401);
    const cookie = await dashboardLogin(t.app);
    expect((await request(t.app).get('/api/keys').set('cookie', cookie).set(CSRF_HEADER, '1')).status).toBe(200);
    const out = await request(t.app).post('/admin/logout').set('cookie', cookie).set('accept', 'application/json');
    expect(out.body).toEqual({ success: true });
    expect((await request(t.app).get('/api/keys').set('cookie', cookie).set(CSRF_HEADER, '1')).status).toBe(401);
  });

  it('the bearer token works unchanged, needs no header, and a wrong bearer is refused even beside a live cookie', async () => {
    expect((await request(t.app).get('/api/memory').set(t.auth)).status).toBe(200);
    const cookie = await dashboardLogin(t.app);
    const wrong = await request(t.app).get('/api/memory').set('authorization', 'Bearer wrong-token-wrong-token').set('cookie', cookie).set(CSRF_HEADER, '1');
    expect(wrong.status).toBe(403);
  });

  it('the same session opens bull-board; the HTML form honours a safe `next` only', async () => {
    const cookie = await dashboardLogin(t.app);
    expect((await request(t.app).get('/admin/queues/api/queues').set('cookie', cookie).set('accept', 'application/json')).status).toBe(200);
    const toDashboard = await request(t.app).post('/admin/login').type('form').send({ token: TEST_TOKEN, next: '/dashboard/' });
    expect(toDashboard.status).toBe(303);
    expect(toDashboard.headers.location).toBe('/dashboard/');
    for (const next of ['https://evil.example/', '//evil.example/', '/api/memory', '/dashboard/../api']) {
      const r = await request(t.app).post('/admin/login').type('form').send({ token: TEST_TOKEN, next });
      expect({ next, location: r.headers.location }).toEqual({ next, location: '/admin/queues' });
    }
    // The login page escapes what it echoes.
    const page = await request(t.app).get('/admin/login?next=%22%3E%3Cscript%3E');
    expect(page.text).not.toContain('<script>');
  });
});

describe('/dashboard static files', () => {
  const dir = tempDir('dashboard');
  fs.mkdirSync(path.join(dir, 'assets'));
  fs.writeFileSync(path.join(dir, 'index.html'), '<!doctype html><title>Memory Studio</title><script type="module" src="./assets/app-abc123.js"></script>');
  fs.writeFileSync(path.join(dir, 'assets', 'app-abc123.js'), 'console.log("studio")');
  fs.writeFileSync(path.join(tempDir('outside'), 'secret.txt'), 'not for the web');
  let app: App;
  let close: () => Promise<void>;
  beforeAll(() => {
    const ctx = buildApiContext(testEnv(), silentLog(), { dashboardDir: dir });
    app = createApp(ctx, new Metrics('api'));
    close = async () => {
      await ctx.jobEvents.close();
      await ctx.queues.close();
      ctx.db.close();
    };
  });
  afterAll(() => close());

  it('serves index.html without credentials, with a strict CSP, and redirects /dashboard to /dashboard/', async () => {
    const bare = await request(app).get('/dashboard?x=1');
    expect(bare.status).toBe(301);
    expect(bare.headers.location).toBe('/dashboard/?x=1');
    const page = await request(app).get('/dashboard/');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    expect(page.text).toContain('Memory Studio');
    expect(page.headers['cache-control']).toBe('no-cache');
    const csp = page.headers['content-security-policy'];
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(page.headers['x-content-type-options']).toBe('nosniff');
  });

  it('serves hashed assets as immutable; unknown files, dotfiles and traversal are 404s', async () => {
    const js = await request(app).get('/dashboard/assets/app-abc123.js');
    expect(js.status).toBe(200);
    expect(js.headers['content-type']).toMatch(/javascript/);
    expect(js.headers['cache-control']).toMatch(/max-age=31536000.*immutable/);
    for (const p of ['/dashboard/assets/nope.js', '/dashboard/assets/..%2F..%2Foutside%2Fsecret.txt', '/dashboard/assets/../index.html/..', '/dashboard/other']) {
      const r = await request(app).get(p);
      expect({ p, status: r.status }).toEqual({ p, status: 404 });
      expect(r.text).not.toContain('not for the web');
    }
  });

  it('answers 503 with the build command when the dashboard is not built', async () => {
    const ctx = buildApiContext(testEnv(), silentLog(), { dashboardDir: path.join(tempDir('empty'), 'missing') });
    try {
      const r = await request(createApp(ctx, new Metrics('api'))).get('/dashboard/');
      expect(r.status).toBe(503);
      expect(r.body.error).toMatchObject({ code: 'dashboard_not_built', message: expect.stringContaining('npm run build') });
    } finally {
      await ctx.jobEvents.close();
      await ctx.queues.close();
      ctx.db.close();
    }
  });
});

describe('jobs the dashboard lists and retries', () => {
  let t: TestApi;
  let worker: Worker<unknown, unknown> | null = null;
  beforeAll(() => {
    t = buildTestApi();
  });
  afterAll(async () => {
    await worker?.close();
    await t.close();
  });

  it('lists failed jobs across queues with their reason, retries a failed one, refuses to retry anything else', async () => {
    const q = t.ctx.queues.queue('maintenance');
    const job = await q.add('repair-sweep', { reason: 'manual', batchSize: 10 }, { attempts: 1 });
    const waiting = await request(t.app).post(`/api/jobs/maintenance/${job.id}/retry`).set(t.auth);
    expect(waiting.status).toBe(409);
    expect(waiting.body.error.message).toMatch(/only a failed job/i);

    // A real BullMQ worker on the test's queue fails it for good.
    const failing = new Worker<unknown, unknown>(
      'maintenance',
      async () => {
        throw new UnrecoverableError('the disk is full');
      },
      { connection: bullConnectionOptions(t.env.REDIS_URL!, 'test-failing-worker'), prefix: t.env.QUEUE_PREFIX, autorun: true },
    );
    worker = failing;
    failing.on('error', () => undefined);
    await waitUntil(async () => (await job.getState()) === 'failed', 10_000, 'job failed');
    await failing.close();
    worker = null;

    const list = await request(t.app).get('/api/jobs/list?states=active,failed&limit=5').set(t.auth);
    expect(list.status).toBe(200);
    expect(list.body.states).toEqual(['active', 'failed']);
    expect(list.body.jobs).toEqual([expect.objectContaining({ id: job.id, queue: 'maintenance', name: 'repair-sweep', state: 'failed', failedReason: 'the disk is full' })]);
    // Job data (it may carry user text) is not part of the listing.
    expect(list.body.jobs[0].data).toBeUndefined();

    const retried = await request(t.app).post(`/api/jobs/maintenance/${job.id}/retry`).set(t.auth);
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ success: true, id: job.id, state: 'waiting' });
    expect((await request(t.app).get('/api/jobs/list?states=failed').set(t.auth)).body.jobs).toEqual([]);
    expect((await request(t.app).get('/api/jobs/list?states=waiting').set(t.auth)).body.jobs.map((j: { id: string }) => j.id)).toEqual([job.id]);
  });

  it('rejects an unknown state with the zod path', async () => {
    const r = await request(t.app).get('/api/jobs/list?states=active,exploded').set(t.auth);
    expect(r.status).toBe(400);
    expect(JSON.stringify(r.body.error.details)).toContain('query.states');
    expect((await request(t.app).post('/api/jobs/maintenance/no-such-job/retry').set(t.auth)).status).toBe(404);
  });
});
