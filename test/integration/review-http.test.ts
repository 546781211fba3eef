import http from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { buildTestApi, type TestApi } from '../helpers/api';
import { testEnv } from '../helpers/env';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream';

/**
 * Review of the HTTP layer merged for issues 14/15: the brute-force brake under pipelining, the client bytes
 * forwarded upstream (BOM, malformed UTF-8), and bodies left unread by a refusal.
 */

const LIMIT = 3;
const BAD_KEY = 'egk_not-a-real-key-000000000000000000';

async function listen(t: TestApi): Promise<{ server: http.Server; port: number }> {
  const server = http.createServer(t.app);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port };
}

async function stop(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
}

/** Sends `requests` pipelined in ONE write on one connection; resolves with the status of each answer, in order. */
function pipelined(port: number, requests: string[], timeoutMs = 10_000): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let raw = '';
    const statuses = () => [...raw.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`only ${statuses().length} of ${requests.length} answers in ${timeoutMs} ms`));
    }, timeoutMs);
    s.on('error', reject);
    s.on('data', (d: Buffer) => {
      raw += d.toString('latin1');
      if (statuses().length >= requests.length) {
        clearTimeout(timer);
        s.destroy();
        resolve(statuses());
      }
    });
    s.on('connect', () => s.write(requests.join('')));
  });
}

const getModels = (key: string) => `GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n\r\n`;

describe('the brute-force brake counts every guess, also pipelined on one connection', () => {
  let t: TestApi;
  let fake: FakeUpstream;
  let server: http.Server;
  let port: number;
  let clientKey: string;

  beforeAll(async () => {
    fake = await startFakeUpstream();
    t = buildTestApi(testEnv({ UPSTREAM_BASE_URL: `${fake.url}/v1`, AUTH_FAILURE_LIMIT: String(LIMIT), AUTH_FAILURE_WINDOW_MS: '600000', AUTH_BLOCK_MS: '600000' }));
    clientKey = t.ctx.apiKeys.create('pipelined').key;
    ({ server, port } = await listen(t));
  });
  afterAll(async () => {
    await stop(server);
    await t.close();
    await fake.close();
  });

  it('20 wrong keys in one write: LIMIT are checked (401), the rest refused (429) — and a right key among them is refused too', async () => {
    const batch = Array.from({ length: 20 }, () => getModels(BAD_KEY));
    // The right key, never used from this address, as guess number 15: the block must not let it through.
    batch[14] = getModels(clientKey);
    const statuses = await pipelined(port, batch);
    expect(statuses.filter((s) => s === 401)).toHaveLength(LIMIT);
    expect(statuses.slice(LIMIT)).toEqual(Array.from({ length: 20 - LIMIT }, () => 429));
  });
});

describe('client bytes go upstream only when they say what Engram parsed', () => {
  let t: TestApi;
  let fake: FakeUpstream;
  let server: http.Server;
  let port: number;
  let key: string;

  beforeAll(async () => {
    fake = await startFakeUpstream();
    t = buildTestApi(testEnv({ UPSTREAM_BASE_URL: `${fake.url}/v1` }));
    key = t.ctx.apiKeys.create('raw').key;
    t.ctx.settings.updateMemory({ enabled: false });
    ({ server, port } = await listen(t));
  });
  afterAll(async () => {
    await stop(server);
    await t.close();
    await fake.close();
  });
  beforeEach(() => fake.reset());

  /** POSTs these exact bytes (supertest would not send a Buffer as a JSON body unchanged). */
  const chat = (body: Buffer) =>
    new Promise<{ status: number }>((resolve, reject) => {
      const req = http.request(
        { host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': body.length } },
        (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  const lastChat = () => {
    const r = fake.requests.filter((x) => x.path.endsWith('/chat/completions'));
    expect(r).toHaveLength(1);
    return r[0];
  };

  it('a body with a UTF-8 BOM (accepted by the JSON parser) reaches the upstream without it', async () => {
    const json = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"bom"}]}';
    const res = await chat(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(json)]));
    expect(res.status).toBe(200);
    const up = lastChat();
    expect(up.raw.charCodeAt(0)).not.toBe(0xfeff);
    expect(JSON.parse(up.raw)).toEqual(JSON.parse(json));
  });

  it('malformed UTF-8 (read by Engram as U+FFFD) is not forwarded as is: the upstream gets valid UTF-8, the text Engram saw', async () => {
    const body = Buffer.concat([Buffer.from('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"bad '), Buffer.from([0xff, 0xfe]), Buffer.from(' bytes"}]}')]);
    const res = await chat(body);
    expect(res.status).toBe(200);
    const up = lastChat();
    // The fake decodes what it got as UTF-8: the byte count it was sent equals its text's only when that was valid UTF-8.
    expect(Number(up.headers['content-length'])).toBe(Buffer.byteLength(up.raw, 'utf8'));
    expect((JSON.parse(up.raw) as { messages: { content: string }[] }).messages[0].content).toBe('bad \ufffd\ufffd bytes');
  });
});

describe('a refusal that leaves the body unread closes the connection (Node would read all of it)', () => {
  let t: TestApi;
  let server: http.Server;
  let port: number;

  beforeAll(async () => {
    t = buildTestApi();
    ({ server, port } = await listen(t));
  });
  afterAll(async () => {
    await stop(server);
    await t.close();
  });

  /** Declares a huge body, sends a little of it and keeps the connection open; resolves once the server has answered AND closed it. */
  const answeredAndClosed = (head: string[]) =>
    new Promise<{ status: number; closed: boolean }>((resolve, reject) => {
      const s = net.connect(port, '127.0.0.1');
      let raw = '';
      let status = 0;
      const timer = setTimeout(() => {
        s.destroy();
        resolve({ status, closed: false });
      }, 3000);
      s.on('error', reject);
      s.on('data', (d: Buffer) => {
        raw += d.toString('latin1');
        status = Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0);
      });
      s.on('end', () => {
        clearTimeout(timer);
        s.destroy();
        resolve({ status, closed: true });
      });
      s.on('connect', () => {
        s.write([...head, 'Host: 127.0.0.1', `Content-Length: ${500 * 1_048_576}`, '', ''].join('\r\n'));
        s.write(Buffer.alloc(64 * 1024, 0x7b));
      });
    });

  it.each([
    ['no credentials on /v1', ['POST /v1/chat/completions HTTP/1.1', 'Content-Type: application/json'], 401],
    ['a wrong key on /v1', ['POST /v1/chat/completions HTTP/1.1', 'Content-Type: application/json', `Authorization: Bearer ${BAD_KEY}`], 401],
    ['no credentials on /api', ['POST /api/memory HTTP/1.1', 'Content-Type: application/json'], 401],
    ['a text body on /admin/login', ['POST /admin/login HTTP/1.1', 'Content-Type: text/plain'], 403],
  ])('%s', async (_name, head, expected) => {
    const r = await answeredAndClosed(head);
    expect(r.status).toBe(expected);
    expect(r.closed).toBe(true);
  });
});
