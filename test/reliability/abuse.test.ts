import http from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import request from 'supertest';
import { DASHBOARD_CSP } from '../../src/http/routes/dashboard.routes';
import { buildTestApi, type TestApi } from '../helpers/api';
import { TEST_TOKEN, testEnv } from '../helpers/env';
import { concretePath, walkRoutes } from '../helpers/routes';

/**
 * Issue #15, item 4 (abuse), parts a–c: the brute-force brake on every credential check, the
 * security headers on every route of the router table, and no request body read before
 * authentication. Part d (job payloads and retention in Redis) is in jobs-in-redis.test.ts.
 */

const LIMIT = 3;
const BAD_TOKEN = 'not-the-management-token-000000';
const BAD_KEY = 'egk_not-a-real-key-000000000000000000';
const mgmt = { authorization: `Bearer ${TEST_TOKEN}` };
const from = (ip: string) => ({ 'x-forwarded-for': ip });

describe('brute force on credentials is slowed per IP (AUTH_FAILURE_LIMIT)', () => {
  let t: TestApi;
  let clientKey: string;

  beforeAll(() => {
    // supertest connects from loopback, which `trust proxy` trusts: X-Forwarded-For picks the client IP.
    t = buildTestApi(testEnv({ AUTH_FAILURE_LIMIT: String(LIMIT), AUTH_FAILURE_WINDOW_MS: '600000', AUTH_BLOCK_MS: '600000' }));
    clientKey = t.ctx.apiKeys.create('abuse').key;
  });
  afterAll(() => t.close());

  const expect429 = (res: request.Response, openAi = false) => {
    expect(res.status).toBe(429);
    const retryAfter = Number(res.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(600);
    if (openAi) expect(res.body.error).toMatchObject({ type: 'rate_limit_error', code: 'too_many_failed_attempts' });
    else expect(res.body).toMatchObject({ error: { code: 'too_many_failed_attempts', details: { retryAfterSeconds: retryAfter } } });
    // Never echoes what was presented.
    expect(JSON.stringify(res.body)).not.toContain(BAD_TOKEN);
  };

  it('management token on /api: N wrong tokens answer 403, then 429; the right token from another IP still works', async () => {
    const ip = '203.0.113.10';
    for (let i = 0; i < LIMIT; i++) expect((await request(t.app).get('/api/keys').set({ authorization: `Bearer ${BAD_TOKEN}`, ...from(ip) })).status).toBe(403);
    expect429(await request(t.app).get('/api/keys').set({ authorization: `Bearer ${BAD_TOKEN}`, ...from(ip) }));
    // Blocked: even the right token is not checked for a credential this IP never used successfully (the attacker learns nothing).
    expect429(await request(t.app).get('/api/keys').set({ ...mgmt, ...from(ip) }));
    // Another address (the operator) is not affected.
    expect((await request(t.app).get('/api/keys').set({ ...mgmt, ...from('203.0.113.11') })).status).toBe(200);
  });

  it('a credential that already worked from an IP keeps working there while something else at that IP guesses', async () => {
    const ip = '203.0.113.20';
    expect((await request(t.app).get('/api/keys').set({ ...mgmt, ...from(ip) })).status).toBe(200);
    for (let i = 0; i < LIMIT; i++) await request(t.app).get('/api/keys').set({ authorization: `Bearer ${BAD_TOKEN}`, ...from(ip) });
    expect429(await request(t.app).get('/api/keys').set({ authorization: `Bearer ${BAD_TOKEN}`, ...from(ip) }));
    expect((await request(t.app).get('/api/keys').set({ ...mgmt, ...from(ip) })).status).toBe(200);
    // …and a success does not reset the count: the next guess is still refused.
    expect429(await request(t.app).get('/api/keys').set({ authorization: `Bearer ${BAD_TOKEN}`, ...from(ip) }));
  });

  it('client keys on /v1: 401 then 429 in the OpenAI error shape; a real key from another IP is served', async () => {
    const ip = '203.0.113.30';
    const chat = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] };
    for (let i = 0; i < LIMIT; i++) expect((await request(t.app).post('/v1/chat/completions').set({ authorization: `Bearer ${BAD_KEY}`, ...from(ip) }).send(chat)).status).toBe(401);
    expect429(await request(t.app).post('/v1/chat/completions').set({ authorization: `Bearer ${BAD_KEY}`, ...from(ip) }).send(chat), true);
    expect429(await request(t.app).get('/v1/models').set({ 'x-api-key': BAD_KEY, ...from(ip) }), true);
    // The real key from elsewhere passes authentication (the models list needs no upstream call to be reached: anything but 401/429).
    const other = await request(t.app).get('/v1/models').set({ authorization: `Bearer ${clientKey}`, ...from('203.0.113.31') });
    expect([401, 429]).not.toContain(other.status);
  });

  it('/mcp counts wrong client keys and management tokens alike', async () => {
    const ip = '203.0.113.40';
    const rpc = { jsonrpc: '2.0', id: 1, method: 'tools/list' };
    const headers = { accept: 'application/json, text/event-stream', ...from(ip) };
    for (let i = 0; i < LIMIT; i++) expect((await request(t.app).post('/mcp').set({ ...headers, authorization: `Bearer ${i % 2 ? BAD_KEY : BAD_TOKEN}` }).send(rpc)).status).toBe(401);
    expect429(await request(t.app).post('/mcp').set({ ...headers, authorization: `Bearer ${BAD_TOKEN}` }).send(rpc));
    expect((await request(t.app).post('/mcp').set({ ...headers, ...from('203.0.113.41'), ...mgmt }).send(rpc)).status).toBe(200);
  });

  it('failures on different surfaces add up for one IP', async () => {
    const ip = '203.0.113.50';
    await request(t.app).get('/api/keys').set({ authorization: `Bearer ${BAD_TOKEN}`, ...from(ip) });
    await request(t.app).get('/v1/models').set({ authorization: `Bearer ${BAD_KEY}`, ...from(ip) });
    await request(t.app).post('/admin/login').set({ accept: 'application/json', ...from(ip) }).send({ token: BAD_TOKEN });
    expect429(await request(t.app).get('/api/keys').set({ authorization: `Bearer ${BAD_TOKEN}`, ...from(ip) }));
  });

  it('/admin/login: wrong tokens answer 403, then 429 (JSON: the error shape; the form: the page again with Retry-After); the operator elsewhere signs in', async () => {
    const ip = '203.0.113.60';
    for (let i = 0; i < LIMIT; i++) expect((await request(t.app).post('/admin/login').set({ accept: 'application/json', ...from(ip) }).send({ token: BAD_TOKEN })).status).toBe(403);
    expect429(await request(t.app).post('/admin/login').set({ accept: 'application/json', ...from(ip) }).send({ token: BAD_TOKEN }));
    const form = await request(t.app).post('/admin/login').set(from(ip)).type('form').send({ token: TEST_TOKEN });
    expect(form.status).toBe(429);
    expect(Number(form.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(form.text).toContain('Too many failed sign-ins');
    expect(form.headers['set-cookie']).toBeUndefined();
    const ok = await request(t.app).post('/admin/login').set({ accept: 'application/json', ...from('203.0.113.61') }).send({ token: TEST_TOKEN });
    expect(ok.status).toBe(200);
    expect(String(ok.headers['set-cookie'])).toContain('engram_mgmt=');
  });

  it('missing credentials are not guesses: they never count towards a block', async () => {
    const ip = '203.0.113.70';
    for (let i = 0; i < LIMIT * 3; i++) expect((await request(t.app).get('/api/keys').set(from(ip))).status).toBe(401);
    for (let i = 0; i < LIMIT * 3; i++) expect((await request(t.app).get('/v1/models').set(from(ip))).status).toBe(401);
    expect((await request(t.app).get('/api/keys').set({ ...mgmt, ...from(ip) })).status).toBe(200);
  });

  it('an IPv6 client is counted by its /64: rotating addresses inside it buys no more guesses; the next /64 is not affected', async () => {
    for (let i = 0; i < LIMIT; i++) expect((await request(t.app).get('/api/keys').set({ authorization: `Bearer ${BAD_TOKEN}`, ...from(`2001:db8:77:1::${i + 1}`) })).status).toBe(403);
    expect429(await request(t.app).get('/api/keys').set({ authorization: `Bearer ${BAD_TOKEN}`, ...from('2001:db8:77:1:ffff:ffff:ffff:fffe') }));
    expect429(await request(t.app).get('/api/keys').set({ ...mgmt, ...from('2001:0db8:0077:0001:0::9') }));
    expect((await request(t.app).get('/api/keys').set({ ...mgmt, ...from('2001:db8:77:2::1') })).status).toBe(200);
    // An IPv4 client written IPv4-mapped is the same client as written plainly.
    for (let i = 0; i < LIMIT; i++) await request(t.app).get('/api/keys').set({ authorization: `Bearer ${BAD_TOKEN}`, ...from('::ffff:203.0.113.80') });
    expect429(await request(t.app).get('/api/keys').set({ authorization: `Bearer ${BAD_TOKEN}`, ...from('203.0.113.80') }));
  });

  it('TRUST_PROXY=false: X-Forwarded-For is nobody\'s word, the peer address is the client', async () => {
    const direct = buildTestApi(testEnv({ AUTH_FAILURE_LIMIT: String(LIMIT), AUTH_BLOCK_MS: '600000', TRUST_PROXY: 'false' }));
    try {
      // Each guess claims another address; all come from this test's loopback peer, which is what is counted.
      for (let i = 0; i < LIMIT; i++) expect((await request(direct.app).get('/api/keys').set({ authorization: `Bearer ${BAD_TOKEN}`, ...from(`198.51.100.${i}`) })).status).toBe(403);
      expect429(await request(direct.app).get('/api/keys').set({ authorization: `Bearer ${BAD_TOKEN}`, ...from('198.51.100.99') }));
    } finally {
      await direct.close();
    }
  });

  it('AUTH_FAILURE_LIMIT=0 turns the brake off', async () => {
    const off = buildTestApi(testEnv({ AUTH_FAILURE_LIMIT: '0' }));
    try {
      for (let i = 0; i < 30; i++) expect((await request(off.app).get('/api/keys').set({ authorization: `Bearer ${BAD_TOKEN}` })).status).toBe(403);
    } finally {
      await off.close();
    }
  });
});

/** The status and headers of one request; the body is not waited for (some routes stream). */
function headersOf(port: number, method: string, path: string, headers: Record<string, string>, body?: string): Promise<{ status: number; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers: { ...headers, ...(body ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } : {}) } }, (res) => {
      resolve({ status: res.statusCode ?? 0, headers: res.headers });
      res.destroy();
    });
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error(`${method} ${path}: no answer in 10 s`)));
    req.end(body);
  });
}

/** helmet's headers for documents: on every answer but /v1's (an API called by programs with a key in a header). */
const DOCUMENT_HEADERS: Record<string, string> = {
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'origin-agent-cluster': '?1',
  'referrer-policy': 'no-referrer',
  'x-dns-prefetch-control': 'off',
  'x-download-options': 'noopen',
  'x-permitted-cross-domain-policies': 'none',
  'x-xss-protection': '0',
};

/** What is wrong with an answer's header set for its path: /v1 (as express matches it, any case) or not. */
function headerSetProblems(where: string, path: string, h: http.IncomingHttpHeaders): string[] {
  const out: string[] = [];
  if (/^\/v1(\/|\?|$)/i.test(path)) {
    if (h['content-security-policy'] !== "frame-ancestors 'none'") out.push(`${where}: csp ${h['content-security-policy']}`);
    if (h['cache-control'] !== 'no-store') out.push(`${where}: cache-control ${h['cache-control']}`);
    for (const name of Object.keys(DOCUMENT_HEADERS)) if (h[name] !== undefined) out.push(`${where}: ${name} ${h[name]} on /v1`);
  } else {
    for (const [name, value] of Object.entries(DOCUMENT_HEADERS)) {
      // The dashboard's static files set their own Referrer-Policy, the same value.
      if (h[name] !== value) out.push(`${where}: ${name} ${h[name]}`);
    }
  }
  return out;
}

describe('security headers on every route of the router table', () => {
  let t: TestApi;
  let server: http.Server;
  let port: number;
  let clientKey: string;

  beforeAll(async () => {
    t = buildTestApi();
    clientKey = t.ctx.apiKeys.create('headers').key;
    server = http.createServer(t.app);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await t.close();
  });

  it('nosniff and frame protection everywhere; no-store on /api, /admin, /v1 and /mcp; the strict CSP on /dashboard', async () => {
    const routes = walkRoutes(t.app);
    expect(routes.length).toBeGreaterThan(30);
    const problems: string[] = [];
    for (const route of routes) {
      const path = concretePath(route.path);
      const creds = path.startsWith('/v1') ? { authorization: `Bearer ${clientKey}` } : mgmt;
      // Without credentials (the refusal) and with them (the route itself): both answers carry the headers.
      for (const headers of [{}, creds]) {
        const body = ['POST', 'PUT', 'PATCH'].includes(route.method) ? '{}' : undefined;
        const r = await headersOf(port, route.method, path, { accept: 'application/json', ...headers }, body);
        const h = r.headers;
        const where = `${route.method} ${path} (${Object.keys(headers).length ? 'with' : 'without'} credentials, ${r.status})`;
        if (h['x-content-type-options'] !== 'nosniff') problems.push(`${where}: x-content-type-options ${h['x-content-type-options']}`);
        if (h['x-frame-options'] !== 'DENY') problems.push(`${where}: x-frame-options ${h['x-frame-options']}`);
        if (/^\/(api|admin|v1|mcp)(\/|$)/.test(path) && !/\bno-store\b/.test(String(h['cache-control']))) problems.push(`${where}: cache-control ${h['cache-control']}`);
        if (/^\/(admin|dashboard)(\/|$)/.test(path) && !/frame-ancestors 'none'/.test(String(h['content-security-policy']))) problems.push(`${where}: csp ${h['content-security-policy']}`);
        if (/^\/dashboard(\/|$)/.test(path) && h['content-security-policy'] !== DASHBOARD_CSP) problems.push(`${where}: dashboard csp ${h['content-security-policy']}`);
        if (h['x-powered-by'] !== undefined) problems.push(`${where}: x-powered-by ${h['x-powered-by']}`);
        problems.push(...headerSetProblems(where, path, h));
      }
    }
    expect(problems).toEqual([]);
  });

  it("/v1 answers carry OWASP's API set and no document headers, under any case of the prefix; every other path helmet's set", async () => {
    const auth = { authorization: `Bearer ${clientKey}` };
    const problems: string[] = [];
    const cases: Array<[string, string, Record<string, string>, string | undefined]> = [
      ['GET', '/V1/models', auth, undefined],
      ['GET', '/v1', auth, undefined],
      ['GET', '/v1?x=1', {}, undefined],
      ['POST', '/v1/chat/completions', auth, '{"model":1}'],
      ['POST', '/V1/Chat/Completions', {}, '{}'],
      ['GET', '/v1x', {}, undefined],
      ['GET', '/v10/models', {}, undefined],
      ['GET', '/nothing-here', {}, undefined],
    ];
    for (const [method, path, headers, body] of cases) {
      const r = await headersOf(port, method, path, { accept: 'application/json', ...headers }, body);
      const where = `${method} ${path} (${r.status})`;
      if (r.headers['x-content-type-options'] !== 'nosniff') problems.push(`${where}: x-content-type-options ${r.headers['x-content-type-options']}`);
      if (r.headers['x-frame-options'] !== 'DENY') problems.push(`${where}: x-frame-options ${r.headers['x-frame-options']}`);
      problems.push(...headerSetProblems(where, path, r.headers));
    }
    expect(problems).toEqual([]);
  });

  it("the dashboard's CSP allows no inline script, no other origin and no framing", () => {
    const directives = Object.fromEntries(DASHBOARD_CSP.split(';').map((d) => d.trim().split(/\s+/)).map(([k, ...v]) => [k, v]));
    expect(directives['default-src']).toEqual(["'self'"]);
    expect(directives['script-src']).toEqual(["'self'"]);
    expect(directives['object-src']).toEqual(["'none'"]);
    expect(directives['frame-ancestors']).toEqual(["'none'"]);
    expect(DASHBOARD_CSP).not.toMatch(/unsafe-inline|unsafe-eval|\*/);
  });
});

/**
 * Sends the head of a request declaring a large body plus a first slice of it, and never the rest:
 * a server that read the body before authenticating would wait for ever (the test then times out).
 * Resolves with the status line and the bytes of the body that were written when the answer came.
 */
function partialBodyRequest(port: number, method: string, path: string, headers: Record<string, string>, declared: number | 'chunked', sent: number): Promise<{ status: number; raw: string }> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let raw = '';
    s.on('error', reject);
    s.setTimeout(10_000, () => {
      s.destroy();
      reject(new Error(`${method} ${path}: no answer in 10 s while the body was incomplete`));
    });
    s.on('data', (d: Buffer) => {
      raw += d.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(raw);
      if (m && raw.includes('\r\n\r\n')) {
        s.destroy();
        resolve({ status: Number(m[1]), raw });
      }
    });
    s.on('connect', () => {
      const length = declared === 'chunked' ? 'Transfer-Encoding: chunked' : `Content-Length: ${declared}`;
      const head = [`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1', length, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), '', ''].join('\r\n');
      s.write(head);
      // '{{{{…': not even valid JSON, so a parser that had run would say 400. Chunked: one chunk, and no last chunk.
      const data = Buffer.alloc(sent, 0x7b);
      s.write(declared === 'chunked' ? Buffer.concat([Buffer.from(`${sent.toString(16)}\r\n`), data, Buffer.from('\r\n')]) : data);
    });
  });
}

describe('request bodies are never read before authentication', () => {
  let t: TestApi;
  let server: http.Server;
  let port: number;
  let clientKey: string;
  const HUGE = 200 * 1_048_576;

  beforeAll(async () => {
    t = buildTestApi();
    clientKey = t.ctx.apiKeys.create('bodies').key;
    server = http.createServer(t.app);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await t.close();
  });

  const json = { 'Content-Type': 'application/json' };
  const cases: [string, string, Record<string, string>, number][] = [
    ['POST', '/api/memory', json, 401],
    ['POST', '/api/memory/import', { 'Content-Type': 'application/x-ndjson' }, 401],
    ['PUT', '/api/settings/memory', json, 401],
    ['POST', '/v1/chat/completions', json, 401],
    ['POST', '/mcp', { ...json, Accept: 'application/json, text/event-stream' }, 401],
  ];

  it.each(cases)('%s %s without credentials: refused (401) while the body is still arriving', async (method, path, headers, status) => {
    const r = await partialBodyRequest(port, method, path, headers, HUGE, 64 * 1024);
    expect(r.status).toBe(status);
  });

  it.each(cases)('%s %s with a wrong credential: refused while the body is still arriving', async (method, path, headers) => {
    const bad = path.startsWith('/v1') || path === '/mcp' ? BAD_KEY : BAD_TOKEN;
    const r = await partialBodyRequest(port, method, path, { ...headers, Authorization: `Bearer ${bad}` }, HUGE, 64 * 1024);
    expect([401, 403]).toContain(r.status);
  });

  it('with credentials, a body over the limit is refused from its Content-Length (413), still unread', async () => {
    expect((await partialBodyRequest(port, 'POST', '/api/memory', { ...json, Authorization: `Bearer ${TEST_TOKEN}` }, HUGE, 1024)).status).toBe(413);
    expect((await partialBodyRequest(port, 'POST', '/v1/chat/completions', { ...json, Authorization: `Bearer ${clientKey}` }, 300 * 1_048_576, 1024)).status).toBe(413);
  });

  it('the JSON limit is not applied to bodies the JSON parser does not read: an import upload over it is taken', async () => {
    const small = buildTestApi(testEnv({ BODY_LIMIT_BYTES: '1024' }));
    try {
      const line = (i: number) => JSON.stringify({ id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, apiKeyId: 'k-import', type: 'factual', key: `k:${i}`, content: `Imported fact number ${i} about the garden.`, metadata: {} });
      const ndjson = Array.from({ length: 100 }, (_, i) => line(i)).join('\n');
      expect(Buffer.byteLength(ndjson)).toBeGreaterThan(4 * 1024);
      const r = await request(small.app).post('/api/memory/import').set({ ...mgmt, 'content-type': 'application/x-ndjson' }).send(ndjson);
      expect(r.status).toBe(202);
      // …while a JSON body over it is still refused.
      expect((await request(small.app).post('/api/memory').set(mgmt).send({ key: 'k', content: 'x'.repeat(2000) })).status).toBe(413);
    } finally {
      await small.close();
    }
  });

  it('/admin/login reads its body before the token is known, but only 4 KB of it: a larger one is refused unread', async () => {
    const r = await partialBodyRequest(port, 'POST', '/admin/login', { 'Content-Type': 'application/x-www-form-urlencoded' }, HUGE, 1024);
    expect(r.status).toBe(413);
  });

  it('a chunked body (no Content-Length) is cut off at the limit too: 413 and the connection closes, the rest never read', async () => {
    const login = await partialBodyRequest(port, 'POST', '/admin/login', { 'Content-Type': 'application/x-www-form-urlencoded' }, 'chunked', 16 * 1024);
    expect(login.status).toBe(413);
    expect(login.raw.toLowerCase()).toContain('connection: close');
    const api = await partialBodyRequest(port, 'POST', '/api/memory', { ...json, Authorization: `Bearer ${TEST_TOKEN}` }, 'chunked', 2 * 1_048_576);
    expect(api.status).toBe(413);
  });
});
