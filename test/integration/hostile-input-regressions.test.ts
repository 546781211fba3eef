/**
 * Regressions found by the hostile-input fuzzer (test/reliability/hostile-input.test.ts), each as its failing case.
 */
import http from 'node:http';
import net from 'node:net';
import request from 'supertest';
import { answerClientErrors } from '../../src/http/client-error';
import { buildTestApi, type TestApi } from '../helpers/api';
import { testEnv } from '../helpers/env';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream';
import { listenLoopback } from '../helpers/loopback';
import { rawRequest } from '../helpers/raw-http';

describe('hostile-input regressions', () => {
  let t: TestApi;
  let fake: FakeUpstream;
  let server: http.Server;
  let port: number;
  let close: () => Promise<void>;
  let clientKey: string;
  const memories = () => (t.ctx.db.db.prepare('SELECT count(*) AS n FROM memories').get() as { n: number }).n;

  beforeAll(async () => {
    fake = await startFakeUpstream();
    t = buildTestApi(testEnv({ UPSTREAM_BASE_URL: `${fake.url}/v1`, UPSTREAM_API_KEY: 'sk-fake' }));
    server = http.createServer(t.app);
    answerClientErrors(server, t.ctx.log);
    ({ port, close } = await listenLoopback(server));
    clientKey = t.ctx.apiKeys.create('c').key;
  });
  afterAll(async () => {
    await close();
    await t.close();
    await fake.close();
  });

  it('a form or text body on a JSON route is a 415 in the error shape and creates nothing (it used to be parsed into a valid body)', async () => {
    const before = memories();
    const form = await request(t.app).post('/api/memory').set(t.auth).type('form').send({ key: 'k', content: 'from a form' });
    expect(form.status).toBe(415);
    expect(form.body).toMatchObject({ error: { code: 'unsupported_media_type', message: expect.stringContaining('application/json'), details: null } });
    const text = await request(t.app).post('/api/keys').set(t.auth).set('content-type', 'text/plain').send('{"name":"x"}');
    expect(text.status).toBe(415);
    expect(memories()).toBe(before);
    // /v1 answers in OpenAI's shape.
    const chat = await request(t.app).post('/v1/chat/completions').set('authorization', `Bearer ${clientKey}`).set('content-type', 'text/plain').send('{"messages":[]}');
    expect(chat.status).toBe(415);
    expect(chat.body).toEqual({ error: { message: expect.any(String), type: 'invalid_request_error', param: null, code: 'unsupported_media_type' } });
    // No body at all is still a body of {} (POST /api/memory/reindex takes none), and JSON still works.
    expect((await request(t.app).post('/api/memory/reindex').set(t.auth)).status).toBeLessThan(400);
    expect((await request(t.app).post('/api/memory').set(t.auth).send({ key: 'k', content: 'json' })).status).toBe(201);
    // The login form keeps its urlencoded body.
    expect((await request(t.app).post('/admin/login').type('form').send({ token: 'wrong' })).status).toBe(403);
  });

  it('a request Node refuses (header overflow, bytes not allowed in the path) is answered in the error shape, also as the second request of a keep-alive connection', async () => {
    const huge = await rawRequest(port, { method: 'GET', path: `/api/memory?q=${'x'.repeat(20_000)}`, headers: { authorization: t.auth.authorization } });
    expect(huge.status).toBe(431);
    expect(JSON.parse(huge.body.toString())).toMatchObject({ error: { code: 'headers_too_large', message: expect.any(String), type: 'invalid_request_error', param: null }, requestId: null });

    // The second request on one connection: the old handler only answered while the socket had written nothing yet.
    const answer = await new Promise<string>((resolve, reject) => {
      const s = net.connect(port, '127.0.0.1');
      let got = '';
      s.on('error', reject);
      s.on('data', (d) => (got += d.toString('latin1')));
      s.on('close', () => resolve(got));
      s.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      setTimeout(() => s.write('GET /docs/assets/\xfb\xb4 HTTP/1.1\r\nHost: x\r\n\r\n', 'latin1'), 100);
    });
    const responses = answer.split(/(?=HTTP\/1\.1 )/);
    expect(responses).toHaveLength(2);
    expect(responses[1]).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(responses[1].split('\r\n\r\n')[1])).toMatchObject({ error: { code: 'bad_request' } });
  });

  it("GET /v1/models/.. is a 400, not a call to another upstream path (the URL resolved /v1/models/.. to /v1/)", async () => {
    fake.reset();
    for (const id of ['..', '.', '%2e%2e']) {
      const r = await request(t.app).get(`/v1/models/${id}`).set('authorization', `Bearer ${clientKey}`);
      expect({ id, status: r.status }).toEqual({ id, status: 400 });
      expect(r.body.error).toMatchObject({ type: 'invalid_request_error', param: 'id' });
    }
    expect(fake.requests).toHaveLength(0);
    expect((await request(t.app).get('/v1/models/gpt-4o-mini').set('authorization', `Bearer ${clientKey}`)).body).toMatchObject({ id: 'gpt-4o-mini' });
  });
});
