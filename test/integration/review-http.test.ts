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
