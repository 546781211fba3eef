import { EventEmitter } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildTestApi, type TestApi } from '../../test/helpers/api';
import { testEnv } from '../../test/helpers/env';
import { startFakeUpstream, type FakeUpstream } from '../../test/helpers/fake-upstream';
import { waitUntil } from '../../test/helpers/wait';
import { ClientGone } from './client-gone';

/** Counts AbortControllers made from now until restore(). */
function countAbortControllers() {
  const Original = globalThis.AbortController;
  let made = 0;
  globalThis.AbortController = class extends Original {
    constructor() {
      super();
      made++;
    }
  };
  return { made: () => made, restore: () => void (globalThis.AbortController = Original) };
}

function pair(opts: { destroyed?: boolean } = {}) {
  const res = Object.assign(new EventEmitter(), { writableFinished: false });
  const req = { socket: { destroyed: opts.destroyed ?? false } };
  return { req, res };
}

describe('ClientGone', () => {
  it('fires once when the response closes unfinished: abort event and aborted', () => {
    const { req, res } = pair();
    const gone = new ClientGone({ req, res });
    const fired = jest.fn();
    gone.on('abort', fired);
    expect(gone.aborted).toBe(false);
    res.emit('close');
    res.emit('close');
    gone.fire();
    expect(fired).toHaveBeenCalledTimes(1);
    expect(gone.aborted).toBe(true);
  });

  it('does not fire when the response finished, and fires at once when the socket is already gone', () => {
    const done = pair();
    const gone = new ClientGone(done);
    done.res.writableFinished = true;
    done.res.emit('close');
    expect(gone.aborted).toBe(false);

    const left = pair({ destroyed: true });
    const late = new ClientGone(left);
    expect(late.aborted).toBe(true);
  });

  it('makes no AbortController', () => {
    const count = countAbortControllers();
    try {
      const gone = new ClientGone(pair());
      gone.fire();
      expect(gone.aborted).toBe(true);
      expect(count.made()).toBe(0);
    } finally {
      count.restore();
    }
  });
});

describe('ClientGone on the chat proxy (memory off)', () => {
  let fake: FakeUpstream;
  let t: TestApi;
  let server: http.Server;
  let key: string;

  beforeAll(async () => {
    fake = await startFakeUpstream();
    t = buildTestApi(testEnv({ UPSTREAM_BASE_URL: `${fake.url}/v1`, UPSTREAM_API_KEY: 'upstream-secret' }));
    t.ctx.settings.updateMemory({ enabled: false });
    key = t.ctx.apiKeys.create('client-gone').key;
    server = http.createServer(t.app);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await t.close();
    await fake.close();
  });

  const post = (body: unknown) => {
    const text = JSON.stringify(body);
    return http.request({
      host: '127.0.0.1',
      port: (server.address() as AddressInfo).port,
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) },
    }).end(text);
  };

  it('a client that disconnects while the upstream is still thinking gets the upstream request cut', async () => {
    fake.reset();
    fake.plan({ delayMs: 3000 });
    const client = post({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'slow one' }] });
    client.on('error', () => undefined);
    await waitUntil(() => fake.requests.length === 1, 5000, 'the chat to reach the upstream');
    client.destroy();
    await waitUntil(() => fake.requests[0].closedEarly, 5000, 'the upstream connection to close');
    expect(fake.requests[0].finishedAt).toBeNull();
  });

  it('a proxied chat without memory makes no AbortController', async () => {
    fake.reset();
    const count = countAbortControllers();
    try {
      const status = await new Promise<number>((resolve, reject) => {
        const client = post({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hello' }] });
        client.on('error', reject);
        client.on('response', (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
      });
      expect(status).toBe(200);
      expect(count.made()).toBe(0);
    } finally {
      count.restore();
    }
  });
});
