import http from 'node:http';
import net from 'node:net';
import IORedis from 'ioredis';
import OpenAI from 'openai';
import request from 'supertest';
import { buildTestApi, type TestApi } from '../helpers/api';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream';
import { TEST_TOKEN, testEnv } from '../helpers/env';
import { listenLoopback } from '../helpers/loopback';
import { mulberry32 } from '../helpers/prng';
import { TestRedis } from '../helpers/redis-server';
import { waitUntil } from '../helpers/wait';

/** Status, code and requestId of an /api error answer, for one readable assertion. */
const apiError = (r: request.Response) => ({ status: r.status, code: r.body?.error?.code, requestId: typeof r.body?.requestId });

describe('malformed percent-escapes in path parameters (P4)', () => {
  let t: TestApi;
  beforeAll(() => {
    t = buildTestApi();
  });
  afterAll(() => t.close());

  it.each([
    ['get', '/api/memory/%ZZ'],
    ['get', '/api/memory/%ZZ/history'],
    ['put', '/api/memory/%ZZ'],
    ['delete', '/api/memory/%ZZ'],
    ['delete', '/api/keys/%ZZ'],
    ['get', '/api/jobs/%ZZ/1'],
    ['get', '/api/jobs/extraction/%ZZ'],
    ['delete', '/api/jobs/extraction/%E0%A4%A'],
  ] as const)('%s %s is a 400 in the error shape, not a 500', async (method, path) => {
    const r = await request(t.app)[method](path).set(t.auth).send({ content: 'x' });
    expect(apiError(r)).toEqual({ status: 400, code: 'invalid_path', requestId: 'string' });
    // The message names the problem without echoing the raw value.
    expect(r.body.error.message).not.toContain('%ZZ');
  });
});

describe('Redis failures during a request (D7)', () => {
  let redis: TestRedis;
  let t: TestApi;
  beforeAll(async () => {
    redis = await TestRedis.start({ persist: false });
    t = buildTestApi(testEnv({ REDIS_URL: redis.url, REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0' }));
    await waitUntil(() => t.ctx.queues.isReady(), 10_000, 'api connected to its Redis');
  });
  afterAll(async () => {
    jest.restoreAllMocks();
    await t.close();
    await redis.remove();
  });

  const expect503 = (r: request.Response) => {
    expect(apiError(r)).toEqual({ status: 503, code: 'dependency_unavailable', requestId: 'string' });
    expect(r.headers['retry-after']).toBe('5');
    // Our words, not ioredis' (no "enableOfflineQueue", no host:port).
    expect(r.body.error.message).not.toMatch(/enableOfflineQueue|Command timed out|127\.0\.0\.1/);
  };

  it('a Redis that stops answering mid-request (command timeout) is a 503 with Retry-After, not a 500', async () => {
    expect((await request(t.app).get('/api/jobs').set(t.auth)).status).toBe(200);
    const admin = new IORedis(redis.url, { maxRetriesPerRequest: 0 });
    admin.on('error', () => undefined);
    try {
      // Every client's commands wait 2 s: the api's 500 ms command timeout fires first.
      await admin.call('CLIENT', 'PAUSE', '2000', 'ALL');
      expect503(await request(t.app).get('/api/jobs').set(t.auth));
    } finally {
      await admin.call('CLIENT', 'UNPAUSE').catch(() => undefined);
      admin.disconnect();
    }
  });

  it('a connection that drops between the readiness check and the command is a 503 too; every 503 carries Retry-After', async () => {
    await waitUntil(() => t.ctx.queues.isReady(), 10_000, 'api reconnected');
    // Warm the queue objects while Redis is up, as a running api has them.
    expect((await request(t.app).get('/api/jobs').set(t.auth)).status).toBe(200);
    await redis.stop(true);
    await waitUntil(() => !t.ctx.queues.isReady(), 5000, 'api noticed the outage');
    // The 503 the route sends itself when it sees Redis down.
    expect503(await request(t.app).get('/api/jobs').set(t.auth));
    const ready = await request(t.app).get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.headers['retry-after']).toBe('5');
    // The race: ready when checked, gone when the command runs ("Stream isn't writeable…").
    jest.spyOn(t.ctx.queues, 'isReady').mockReturnValue(true);
    expect503(await request(t.app).get('/api/jobs').set(t.auth));
    expect503(await request(t.app).get('/api/jobs/extraction/1').set(t.auth));
    jest.restoreAllMocks();
  });

  it("bull-board's API answers 503 in our shape while Redis is down (P5), after auth, for any case of the path", async () => {
    expect(t.ctx.queues.isReady()).toBe(false);
    for (const path of ['/admin/queues/api/queues', '/admin/queues/api/queues?activeQueue=extraction&page=1', '/Admin/Queues/API/queues']) {
      const r = await request(t.app).get(path).set(t.auth).set('accept', 'application/json');
      expect503(r);
      expect(JSON.stringify(r.body)).not.toMatch(/ioredis|stream|ECONNREFUSED/i);
    }
    // Without credentials it is still a 401: the check never tells an anonymous caller about Redis.
    expect((await request(t.app).get('/admin/queues/api/queues').set('accept', 'application/json')).status).toBe(401);
    // The board's page itself is served (it shows its own error state).
    expect((await request(t.app).get('/admin/queues').set(t.auth).set('accept', 'text/html')).status).toBe(200);
  });
});

/** `{"a":{"a":…1…}}` nested `depth` objects deep. */
const deepObject = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
/** `[[[…"x"…]]]` nested `depth` arrays deep. */
const deepArray = (depth: number) => '['.repeat(depth) + '"x"' + ']'.repeat(depth);

describe('deeply nested JSON (P3)', () => {
  let t: TestApi;
  let fake: FakeUpstream;
  let clientKey: string;
  beforeAll(async () => {
    fake = await startFakeUpstream();
    t = buildTestApi(testEnv({ UPSTREAM_BASE_URL: `${fake.url}/v1` }));
    clientKey = t.ctx.apiKeys.create('deep').key;
  });
  afterAll(async () => {
    await t.close();
    await fake.close();
  });

  const json = (r: request.Test, body: string) => r.set('content-type', 'application/json').send(body);

  it('10,000-deep metadata on POST and PUT /api/memory is a 400 in the error shape (no stack overflow, nothing stored)', async () => {
    const created = await json(request(t.app).post('/api/memory').set(t.auth), `{"apiKeyId":"k","key":"shallow","content":"x","metadata":${deepObject(50)}}`);
    expect(created.status).toBe(201);
    const id = created.body.id as string;

    const post = await json(request(t.app).post('/api/memory').set(t.auth), `{"apiKeyId":"k","key":"deep","content":"x","metadata":${deepObject(10_000)}}`);
    expect(apiError(post)).toEqual({ status: 400, code: 'json_too_deep', requestId: 'string' });
    expect(t.ctx.memory.findByKey('k', 'deep')).toBeNull();
    const put = await json(request(t.app).put(`/api/memory/${id}`).set(t.auth), `{"metadata":${deepArray(10_000)}}`);
    expect(apiError(put)).toEqual({ status: 400, code: 'json_too_deep', requestId: 'string' });
    // Brackets inside strings are text, not nesting, also after escaped quotes and backslashes.
    const text = `a \\ b "quoted" c\\"${'[{'.repeat(1000)}`;
    const inString = await json(request(t.app).post('/api/memory').set(t.auth), JSON.stringify({ apiKeyId: 'k', key: 'brackets', content: text }));
    expect(inString.status).toBe(201);
    expect(inString.body.memory.content).toBe(text);
  });

  it('10,000-deep bodies on /v1/memory/inject and /v1/chat/completions are a 400, and nothing goes upstream', async () => {
    const auth = { authorization: `Bearer ${clientKey}` };
    const before = fake.requests.length;
    const inject = await json(request(t.app).post('/v1/memory/inject').set(auth), `{"messages":[{"role":"user","content":${deepObject(10_000)}}]}`);
    expect(inject.status).toBe(400);
    expect(inject.body.error).toBeDefined();
    const chat = await json(request(t.app).post('/v1/chat/completions').set(auth), `{"model":"m","messages":[{"role":"user","content":${deepArray(10_000)}}]}`);
    expect(chat.status).toBe(400);
    expect(chat.body.error).toBeDefined();
    expect(fake.requests.length).toBe(before);
    // /v1 allows deeper structures than /api (tool schemas nest): 200 levels are fine.
    const ok = await json(request(t.app).post('/v1/chat/completions').set(auth), `{"model":"m","messages":[{"role":"user","content":"hi","x":${deepObject(200)}}]}`);
    expect(ok.status).toBe(200);
    expect(fake.requests.length).toBe(before + 1);
  });
});

/**
 * Sends a request's head announcing `contentLength` bytes plus only `sent` of them, then waits (bounded) for
 * the status line: a server that reads the body before answering never answers.
 */
function statusBeforeBodyEnds(port: number, path: string, headers: Record<string, string>, contentLength: number, sent: string, waitMs = 5000): Promise<number | 'no answer'> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let got = '';
    const timer = setTimeout(() => finish('no answer'), waitMs);
    const finish = (v: number | 'no answer') => {
      clearTimeout(timer);
      sock.destroy();
      resolve(v);
    };
    sock.on('error', reject);
    sock.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(got);
      if (m) finish(Number(m[1]));
    });
    const head = [`POST ${path} HTTP/1.1`, 'host: 127.0.0.1', 'content-type: application/json', `content-length: ${contentLength}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
    sock.write(head.join('\r\n') + '\r\n\r\n' + sent);
  });
}

describe('authentication before body parsing (D11)', () => {
  let t: TestApi;
  let server: http.Server;
  let port: number;
  let close: () => Promise<void>;
  beforeAll(async () => {
    t = buildTestApi();
    server = http.createServer(t.app);
    ({ port, close } = await listenLoopback(server));
  });
  afterAll(async () => {
    await close();
    await t.close();
  });

  it('an unauthenticated truncated JSON body is a 401 (not a 400) on /v1 and /api; a wrong token is refused the same way', async () => {
    const truncated = '{"messages": [';
    const v1 = await request(t.app).post('/v1/chat/completions').set('content-type', 'application/json').send(truncated);
    expect(v1.status).toBe(401);
    const v1Wrong = await request(t.app).post('/v1/memory/inject').set('authorization', 'Bearer egk_wrong').set('content-type', 'application/json').send(truncated);
    expect(v1Wrong.status).not.toBe(400);
    expect([401, 403]).toContain(v1Wrong.status);
    const api = await request(t.app).post('/api/memory').set('content-type', 'application/json').send(truncated);
    expect(apiError(api)).toEqual({ status: 401, code: 'unauthorized', requestId: 'string' });
    const apiWrong = await request(t.app).post('/api/keys').set('authorization', 'Bearer wrong-token-wrong-token').set('content-type', 'application/json').send(truncated);
    expect(apiError(apiWrong)).toEqual({ status: 403, code: 'forbidden', requestId: 'string' });
    // With credentials, the same body is the client's JSON mistake.
    const authed = await request(t.app).post('/api/memory').set(t.auth).set('content-type', 'application/json').send(truncated);
    expect(apiError(authed)).toEqual({ status: 400, code: 'invalid_json', requestId: 'string' });
  });

  it('a large unauthenticated body is refused before it is read: the answer comes while the client is still sending', async () => {
    const start = '{"model":"m","messages":[{"role":"user","content":"' + 'x'.repeat(1000);
    expect(await statusBeforeBodyEnds(port, '/v1/chat/completions', {}, 15_000_000, start)).toBe(401);
    expect(await statusBeforeBodyEnds(port, '/v1/chat/completions', { authorization: 'Bearer egk_not-a-key' }, 15_000_000, start)).not.toBe('no answer');
    expect(await statusBeforeBodyEnds(port, '/api/memory', {}, 900_000, start)).toBe(401);
    expect(await statusBeforeBodyEnds(port, '/api/memory', { authorization: 'Bearer wrong-token-wrong-token' }, 900_000, start)).toBe(403);
    // Control: an authenticated request does wait for its body (the parser needs all of it).
    expect(await statusBeforeBodyEnds(port, '/api/memory', { authorization: `Bearer ${TEST_TOKEN}` }, 900_000, start, 500)).toBe('no answer');
  });
});

describe('/metrics route labels (P1)', () => {
  let t: TestApi;
  beforeAll(() => {
    t = buildTestApi();
  });
  afterAll(() => t.close());

  /** The `route` label of every request-duration series in the exposition. */
  const routeLabels = async (): Promise<string[]> => {
    const text = (await request(t.app).get('/metrics').set(t.auth)).text;
    return text
      .split('\n')
      .filter((l) => l.startsWith('engram_http_request_duration_seconds_count{'))
      .map((l) => /route="([^"]*)"/.exec(l)?.[1] ?? '?');
  };

  it('300 random-case requests (unauthenticated, authenticated, unknown paths) add a bounded number of series, labelled with declared routes', async () => {
    const rnd = mulberry32(20240601);
    const scramble = (p: string) => Array.from(p, (c) => (rnd() < 0.5 ? c.toUpperCase() : c.toLowerCase())).join('');
    const before = (await routeLabels()).length;
    for (let i = 0; i < 300; i++) {
      const kind = i % 3;
      if (kind === 0) await request(t.app).get(scramble('/api/settings/memory'));
      else if (kind === 1) await request(t.app).get(scramble('/api/settings/memory')).set(t.auth);
      else await request(t.app).get(scramble(`/api/nope-${i}/x`)).set(t.auth);
    }
    const labels = await routeLabels();
    expect(labels.length - before).toBeLessThan(15);
    expect(labels).toContain('/api/settings/memory');
    expect(labels).toContain('unmatched');
    // Every label is a declared pattern (lower case) or `unmatched`.
    for (const l of labels) expect(l === 'unmatched' || l === l.toLowerCase()).toBe(true);
    // A parameterised route is labelled by its pattern, not the id.
    await request(t.app).get('/api/memory/00000000-0000-4000-8000-000000000001').set(t.auth);
    await request(t.app).get('/API/Memory/00000000-0000-4000-8000-000000000002').set(t.auth);
    expect((await routeLabels()).filter((l) => l.includes('/api/memory/'))).toEqual(['/api/memory/:id']);
  });
});

describe('PUT /api/settings/memory vectorStore: "qdrant"', () => {
  let t: TestApi;
  beforeAll(() => {
    t = buildTestApi();
  });
  afterAll(() => t.close());

  it('is accepted now that the Qdrant tier exists (retrieval falls back with a reason while Qdrant is not configured)', async () => {
    const r = await request(t.app).put('/api/settings/memory').set(t.auth).send({ vectorStore: 'qdrant', maxTokens: 1234 });
    expect({ status: r.status, vectorStore: r.body.vectorStore, maxTokens: r.body.maxTokens }).toEqual({ status: 200, vectorStore: 'qdrant', maxTokens: 1234 });
    for (const v of ['sqlite-vec', 'auto']) {
      const ok = await request(t.app).put('/api/settings/memory').set(t.auth).send({ vectorStore: v });
      expect({ v, status: ok.status, vectorStore: ok.body.vectorStore }).toEqual({ v, status: 200, vectorStore: v });
    }
    const bad = await request(t.app).put('/api/settings/memory').set(t.auth).send({ vectorStore: 'pinecone' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details).toEqual([expect.objectContaining({ path: 'body.vectorStore' })]);
  });
});

describe('/v1 speaks OpenAI errors to the official client (P9)', () => {
  let t: TestApi;
  let upstream: { port: number; close: () => Promise<void> };
  const seen: { method: string; url: string; authorization?: string }[] = [];
  let server: http.Server;
  let close: () => Promise<void>;
  let baseURL: string;
  let key: string;
  const client = (apiKey: string) => new OpenAI({ apiKey, baseURL, maxRetries: 0, timeout: 10_000 });
  const OPENAI_ERROR_KEYS = ['code', 'message', 'param', 'type'];

  beforeAll(async () => {
    // An upstream with GET /v1/models/:id (the shared fake has only the list).
    upstream = await listenLoopback(
      http.createServer((req, res) => {
        seen.push({ method: req.method ?? '', url: req.url ?? '', authorization: req.headers.authorization });
        const m = /^\/v1\/models\/([^/?]+)$/.exec(req.url ?? '');
        const found = m && m[1] !== 'missing';
        const body = found
          ? { id: decodeURIComponent(m[1]), object: 'model', created: 1_700_000_000, owned_by: 'fake' }
          : { error: { message: 'The model `missing` does not exist', type: 'invalid_request_error', param: null, code: 'model_not_found' } };
        res.writeHead(found ? 200 : 404, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      }),
    );
    t = buildTestApi(testEnv({ UPSTREAM_BASE_URL: `http://127.0.0.1:${upstream.port}/v1`, UPSTREAM_API_KEY: 'upstream-secret', PROXY_BODY_LIMIT_BYTES: '65536' }));
    key = t.ctx.apiKeys.create('p9').key;
    server = http.createServer(t.app);
    let port: number;
    ({ port, close } = await listenLoopback(server));
    baseURL = `http://127.0.0.1:${port}/v1`;
  });
  afterAll(async () => {
    await close();
    await upstream.close();
    await t.close();
  });

  it('a wrong, revoked or missing client key is a 401 invalid_api_key (the SDK raises AuthenticationError), and nothing goes upstream', async () => {
    const before = seen.length;
    const wrong = await client(`egk_${'x'.repeat(43)}`).models.list().catch((e: unknown) => e);
    expect(wrong).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((wrong as InstanceType<typeof OpenAI.AuthenticationError>).status).toBe(401);
    expect((wrong as InstanceType<typeof OpenAI.AuthenticationError>).code).toBe('invalid_api_key');
    const revoked = t.ctx.apiKeys.create('revoked');
    t.ctx.apiKeys.revoke(revoked.id);
    const chat = await client(revoked.key)
      .chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(chat).toBeInstanceOf(OpenAI.AuthenticationError);

    const none = await request(t.app).post('/v1/chat/completions').send({ model: 'm', messages: [] });
    expect(none.status).toBe(401);
    expect(Object.keys(none.body)).toEqual(['error']);
    expect(Object.keys(none.body.error).sort()).toEqual(OPENAI_ERROR_KEYS);
    expect(none.body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_api_key', param: null });
    // The request id is still there, as a header.
    expect(none.headers['x-request-id']).toEqual(expect.any(String));
    expect(seen.length).toBe(before);
  });

  it('models.retrieve passes through to the upstream (GET /v1/models/:id)', async () => {
    const model = await client(key).models.retrieve('ft:gpt-4o-mini:org:custom');
    expect(model).toMatchObject({ id: 'ft:gpt-4o-mini:org:custom', object: 'model' });
    expect(seen.at(-1)).toEqual({ method: 'GET', url: `/v1/models/${encodeURIComponent('ft:gpt-4o-mini:org:custom')}`, authorization: 'Bearer upstream-secret' });
    // The upstream's 404 for an unknown model reaches the client unchanged (NotFoundError in the SDK).
    const missing = await client(key).models.retrieve('missing').catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect((missing as InstanceType<typeof OpenAI.NotFoundError>).code).toBe('model_not_found');
    // A path under it that is no route is our 404, in OpenAI's shape.
    const deeper = await request(t.app).get('/v1/models/a/b').set('authorization', `Bearer ${key}`);
    expect(deeper.status).toBe(404);
    expect(Object.keys(deeper.body)).toEqual(['error']);
    expect(Object.keys(deeper.body.error).sort()).toEqual(OPENAI_ERROR_KEYS);
  });

  it('invalid bodies are 400 invalid_request_error (BadRequestError), with param; 413 and 404 use the same shape; /api keeps ours', async () => {
    const bad = await client(key)
      .chat.completions.create({ model: 'm', messages: 'hello' } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming)
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    const err = bad as InstanceType<typeof OpenAI.BadRequestError>;
    expect(err.status).toBe(400);
    expect(err.type).toBe('invalid_request_error');
    expect(err.param).toBe('messages');
    const auth = { authorization: `Bearer ${key}` };

    const notJson = await request(t.app).post('/v1/chat/completions').set(auth).set('content-type', 'application/json').send('{"messages": [');
    expect(notJson.status).toBe(400);
    expect(notJson.body).toEqual({ error: { message: expect.any(String), type: 'invalid_request_error', param: null, code: 'invalid_json' } });

    const big = await request(t.app).post('/v1/chat/completions').set(auth).send({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(100_000) }] });
    expect(big.status).toBe(413);
    expect(big.body.error).toMatchObject({ type: 'invalid_request_error', code: 'payload_too_large' });

    const unknown = await request(t.app).get('/v1/nope').set(auth);
    expect(unknown.status).toBe(404);
    expect(Object.keys(unknown.body)).toEqual(['error']);
    expect(unknown.body.error).toMatchObject({ type: 'invalid_request_error' });

    const pct = await request(t.app).get('/v1/models/%ZZ').set(auth);
    expect(pct.status).toBe(400);
    expect(Object.keys(pct.body)).toEqual(['error']);

    const api = await request(t.app).get('/api/keys');
    expect(apiError(api)).toEqual({ status: 401, code: 'unauthorized', requestId: 'string' });
  });
});
