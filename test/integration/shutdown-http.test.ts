import http from 'node:http';
import net from 'node:net';
import { startApi, type RunningApi } from '../../src/api';
import { silentLog, TEST_TOKEN, testEnv } from '../helpers/env';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream';
import { waitUntil } from '../helpers/wait';

const GRACE_MS = 20_000;

/** A request over `agent`; resolves with the status and body once the response has ended. */
function send(agent: http.Agent, port: number, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('api shutdown with keep-alive clients (P6)', () => {
  let fake: FakeUpstream;
  let api: RunningApi | null = null;
  const exit = jest.fn();
  beforeAll(async () => {
    fake = await startFakeUpstream();
  });
  afterAll(async () => {
    await api?.stop();
    await fake.close();
  });

  it('stop() lets the in-flight request finish, then closes the idle keep-alive sockets at once instead of waiting SHUTDOWN_GRACE_MS', async () => {
    api = await startApi(testEnv({ PORT: '0', SHUTDOWN_GRACE_MS: String(GRACE_MS), UPSTREAM_BASE_URL: `${fake.url}/v1` }), silentLog(), { exit });
    const { port } = api;
    const key = api.ctx.apiKeys.create('shutdown').key;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    try {
      // Several keep-alive sockets, idle once these are answered.
      const warm = await Promise.all(Array.from({ length: 4 }, () => send(agent, port, 'GET', '/healthz')));
      expect(warm.map((r) => r.status)).toEqual([200, 200, 200, 200]);

      fake.plan({ delayMs: 1500 });
      const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'slow one' }] });
      const slow = send(agent, port, 'POST', '/v1/chat/completions', { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body);
      await waitUntil(() => fake.requests.length === 1, 5000, 'the slow request to reach the upstream');

      let stopped = false;
      const stopping = api.stop().then(() => {
        stopped = true;
      });
      // The in-flight request is answered in full.
      const r = await slow;
      expect(r.status).toBe(200);
      expect(JSON.parse(r.body).choices[0].message.content).toEqual(expect.any(String));
      // Shortly after, not at the end of the grace period (bounded wait: half the grace).
      await waitUntil(() => stopped, GRACE_MS / 2, 'stop() to resolve after the last request finished');
      await stopping;
      expect(exit).not.toHaveBeenCalled();
      api = null;
      // Its keep-alive connection to the upstream is closed too, not left to the upstream's idle timeout (node's 5 s).
      await waitUntil(async () => (await fake.openConnections()) === 0, 2000, 'the api to close its connection to the upstream');
    } finally {
      agent.destroy();
    }
  });
});

describe('api shutdown with a job event stream open', () => {
  it('ends the stream (a comment saying why) instead of holding close() until SHUTDOWN_GRACE_MS', async () => {
    const exit = jest.fn();
    const api = await startApi(testEnv({ PORT: '0', SHUTDOWN_GRACE_MS: String(GRACE_MS) }), silentLog(), { exit });
    const mgmt = { authorization: `Bearer ${TEST_TOKEN}` };
    const agent = new http.Agent({ keepAlive: false });
    try {
      // No worker runs here: the reindex job waits, so its stream would stay open until the job ends.
      const started = await send(agent, api.port, 'POST', '/api/memory/reindex', { ...mgmt, 'content-type': 'application/json' }, '{}');
      expect(started.status).toBe(202);
      const { jobId, queue } = JSON.parse(started.body) as { jobId: string; queue: string };
      let text = '';
      let ended = false;
      const stream = new Promise<number>((resolve, reject) => {
        const req = http.get({ host: '127.0.0.1', port: api.port, path: `/api/jobs/${queue}/${jobId}/events`, headers: mgmt, agent }, (res) => {
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => {
            ended = true;
            resolve(res.statusCode ?? 0);
          });
          res.on('error', reject);
        });
        req.on('error', reject);
      });
      await waitUntil(() => text.includes('event: state'), 10_000, 'the stream to send the job state');
      expect(api.ctx.jobEvents.streamCount()).toBe(1);

      const t0 = Date.now();
      const stopping = api.stop();
      expect(await stream).toBe(200);
      expect(ended).toBe(true);
      expect(text).toMatch(/\n: the server is shutting down; reopen this stream\n\n$/);
      expect(text).not.toMatch(/event: (completed|failed)/);
      await stopping;
      // Not the grace timer's cut (it would have taken 20 s).
      expect(Date.now() - t0).toBeLessThan(GRACE_MS / 2);
      expect(exit).not.toHaveBeenCalled();
      expect(api.ctx.jobEvents.streamCount()).toBe(0);
      expect(api.ctx.jobEvents.heartbeatCount()).toBe(0);
    } finally {
      agent.destroy();
      await api.stop();
    }
  });
});

describe('api shutdown with a job event stream still starting', () => {
  it('answers it 503 at once instead of holding close() while it waits on Redis', async () => {
    const exit = jest.fn();
    const api = await startApi(testEnv({ PORT: '0', SHUTDOWN_GRACE_MS: String(GRACE_MS) }), silentLog(), { exit });
    // Redis slow to start the event reader: the subscription hangs until released.
    let release: (off: () => void) => void = () => undefined;
    jest.spyOn(api.ctx.jobEvents, 'subscribe').mockImplementation(() => new Promise((r) => (release = r)));
    const agent = new http.Agent({ keepAlive: false });
    try {
      await waitUntil(() => api.ctx.queues.isReady(), 10_000, 'the api connected to Redis');
      const stream = send(agent, api.port, 'GET', '/api/jobs/reindex/some-job/events', { authorization: `Bearer ${TEST_TOKEN}` });
      await waitUntil(() => api.ctx.jobEvents.streamCount() === 1, 10_000, 'the stream to be registered');
      const t0 = Date.now();
      const stopping = api.stop();
      const r = await stream;
      expect(r.status).toBe(503);
      expect(JSON.parse(r.body).error.code).toBe('shutting_down');
      await stopping;
      expect(Date.now() - t0).toBeLessThan(GRACE_MS / 2);
      expect(exit).not.toHaveBeenCalled();
      release(() => undefined);
    } finally {
      agent.destroy();
      await api.stop();
    }
  });
});

describe('api start on a port that is taken', () => {
  it('rejects with EADDRINUSE (instead of resolving with a server that never listened) and closes what it opened', async () => {
    const squatter = net.createServer();
    await new Promise<void>((r) => squatter.listen(0, '127.0.0.1', r));
    const port = (squatter.address() as net.AddressInfo).port;
    const exit = jest.fn();
    const sockets = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;
    await new Promise((r) => setTimeout(r, 300));
    const before = sockets();
    try {
      await expect(startApi(testEnv({ PORT: String(port), HOST: '127.0.0.1' }), silentLog(), { exit })).rejects.toMatchObject({ code: 'EADDRINUSE' });
      expect(exit).not.toHaveBeenCalled();
      // Its Redis connections are closed: once a started connection would have opened, no socket is left
      // beyond those open before (without the close, its ioredis connection stays and keeps jest alive).
      await new Promise((r) => setTimeout(r, 500));
      expect(sockets()).toBeLessThanOrEqual(before);
    } finally {
      await new Promise<void>((r) => squatter.close(() => r()));
    }
  });
});
