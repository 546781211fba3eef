import { TEST_TOKEN, testEnv } from '../helpers/env';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream';
import { childEnv, spawnEngram, type Child } from '../helpers/processes';
import { freePort, TestRedis } from '../helpers/redis-server';
import { waitUntil } from '../helpers/wait';

/**
 * Issue 9 §2 over the real processes: the test's own Redis dies under chat traffic and comes back.
 * Both processes stay up and say so in their logs; the proxy answers throughout (fail open), job
 * routes answer 503; once Redis is back both recover by themselves and every fact stated during
 * the outage (its extraction job went to the outbox) lands exactly once.
 */
describe('Redis stops under chat traffic (real api and worker processes)', () => {
  jest.setTimeout(180_000);
  let redis: TestRedis;
  let upstream: FakeUpstream;
  const children: Child[] = [];

  beforeAll(async () => {
    redis = await TestRedis.start({ persist: true });
    upstream = await startFakeUpstream();
  });
  afterAll(async () => {
    for (const c of children) if (c.proc.exitCode === null) c.proc.kill('SIGKILL');
    await Promise.all(children.map((c) => c.exited));
    await upstream.close();
    await redis.remove();
  });

  it('answers every chat during the outage, 503s job routes, recovers, and runs every outage-time extraction once', async () => {
    const env = testEnv({ REDIS_URL: redis.url });
    const port = await freePort();
    const extra = {
      PORT: String(port),
      UPSTREAM_BASE_URL: `${upstream.url}/v1`,
      UPSTREAM_API_KEY: 'sk-upstream-test',
      REPAIR_SWEEP_EVERY_MS: '1000',
      EXPIRE_EVERY_MS: '0',
      LOG_LEVEL: 'info',
    };
    const api = spawnEngram('api', childEnv(env, extra));
    const worker = spawnEngram('worker', childEnv(env, extra));
    children.push(api, worker);
    const base = `http://127.0.0.1:${port}`;
    const mgmt = { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' };
    await waitUntil(async () => (await fetch(`${base}/readyz`).catch(() => null))?.status === 200, 30_000, `api ready: ${api.output()}`);
    await waitUntil(() => worker.output().includes('worker ready'), 30_000, `worker ready: ${worker.output()}`);

    const key = (await (await fetch(`${base}/api/keys`, { method: 'POST', headers: mgmt, body: JSON.stringify({ name: 'outage' }) })).json()) as { id: string; key: string };
    expect((await fetch(`${base}/api/settings/memory`, { method: 'PUT', headers: mgmt, body: JSON.stringify({ enabled: true, strategy: 'hybrid' }) })).status).toBe(200);

    let n = 0;
    const statuses: number[] = [];
    const chat = async () => {
      const i = n++;
      const r = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `I prefer tool${i} for task${i}.` }] }),
      });
      await r.text();
      statuses.push(r.status);
      return r;
    };

    // Steady traffic before, during and after the outage.
    for (let i = 0; i < 5; i++) await chat();
    await redis.stop(true);
    const during: number[] = [];
    const outageEnds = Date.now() + 4000;
    // Bounded: at most 150 chats, ~40 a second, for 4 s of outage.
    while (Date.now() < outageEnds && during.length < 150) {
      const r = await chat();
      during.push(r.status);
      await new Promise((res) => setTimeout(res, 25));
    }
    const jobs = await fetch(`${base}/api/jobs`, { headers: mgmt });
    expect(jobs.status).toBe(503);
    expect(((await jobs.json()) as { error: { code: string } }).error.code).toBe('dependency_unavailable');
    const readyDuring = await fetch(`${base}/readyz`);
    expect(readyDuring.status).toBe(503);
    expect(api.proc.exitCode).toBeNull();
    expect(worker.proc.exitCode).toBeNull();

    await redis.start();
    for (let i = 0; i < 5; i++) await chat();

    // Every chat was answered by the upstream, none failed because Redis was gone.
    expect(during.length).toBeGreaterThan(0);
    expect(statuses.every((s) => s === 200)).toBe(true);
    // Recovery without a restart: ready again, the outbox drains, and every stated fact exists exactly once.
    await waitUntil(async () => (await fetch(`${base}/readyz`)).status === 200, 30_000, 'api ready again');
    const total = n;
    // Generous on a loaded 2-core machine (two processes, ~100 extraction jobs); a failure says how far
    // extraction got and shows the logs as they were then, so "slow" and "stuck" can be told apart.
    let landed = -1;
    await waitUntil(
      async () => {
        const list = (await (await fetch(`${base}/api/memory?apiKeyId=${key.id}&limit=1`, { headers: mgmt })).json()) as { total: number };
        landed = list.total;
        return list.total === total;
      },
      90_000,
      `all ${total} facts extracted`,
    ).catch((err: Error) => {
      throw new Error(`${err.message} (${landed} landed); api log: ${api.output().slice(-2000)}; worker log: ${worker.output().slice(-3000)}`);
    });
    const page = (await (await fetch(`${base}/api/memory?apiKeyId=${key.id}&limit=200`, { headers: mgmt })).json()) as { data: { content: string }[] };
    const contents = page.data.map((m) => m.content).sort();
    expect(new Set(contents).size).toBe(total);
    expect(contents).toContain(`prefers tool${total - 1} for task${total - 1}`);
    await waitUntil(async () => {
      const r = await fetch(`${base}/api/jobs`, { headers: mgmt });
      return r.status === 200 && ((await r.json()) as { outbox: number }).outbox === 0;
    }, 30_000, 'outbox drained');

    // Both processes lived through it and said what happened.
    expect(api.proc.exitCode).toBeNull();
    expect(worker.proc.exitCode).toBeNull();
    expect(api.output()).toMatch(/redis unreachable/);
    expect(worker.output()).toMatch(/redis unreachable/);
    const metrics = await (await fetch(`${base}/metrics`, { headers: mgmt })).text();
    const unhandled = /^engram_unhandled_rejections_total\{[^}]*role="api"[^}]*\} (\d+)/m.exec(metrics);
    expect(unhandled?.[1] ?? '0').toBe('0');

    api.proc.kill('SIGTERM');
    worker.proc.kill('SIGTERM');
    expect((await api.exited).code).toBe(0);
    expect((await worker.exited).code).toBe(0);
  });
});
