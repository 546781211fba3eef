import crypto from 'node:crypto';
import { EventEmitter } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Writable } from 'node:stream';
import OpenAI from 'openai';
import request from 'supertest';
import { createLogger } from '../../src/logger';
import type { RetrievalResult, RetrieveMode, RetrieveOptions, Retriever } from '../../src/memory/retrieval.types';
import type { Memory } from '../../src/memory/types';
import { estimateTokens } from '../../src/memory/tokens';
import { ClientGone } from '../../src/proxy/client-gone';
import { applyMemory, memoryPlan } from '../../src/proxy/memory-phase';
import { SseDeltaCollector } from '../../src/proxy/stream-tee';
import { JOBS } from '../../src/queue/jobs';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, testEnv } from '../helpers/env';
import { startFakeEmbeddingsServer, type FakeEmbeddingsServer } from '../helpers/fake-embeddings-server';
import { startFakeRerankServer, type FakeRerankServer } from '../helpers/fake-rerank-server';
import { FAKE_MODELS, FAKE_REPLY, startFakeUpstream, type FakeUpstream, type FakeUpstreamRequest } from '../helpers/fake-upstream';
import { waitUntil } from '../helpers/wait';
import { startWorker, type RunningWorker } from '../../workers/main';

/**
 * Flip to `describe.skip` only while src/memory/retrieval.service.ts is not wired into
 * buildApiContext: the end-to-end block below uses the real retrieval as built.
 */
const describeWithRealRetrieval = describe;

const UPSTREAM_KEY = 'upstream-secret';
const marker = () => `m${crypto.randomBytes(5).toString('hex')}`;

/** A Retriever double: answers with the memories it is given, throws, or hangs until its signal fires. */
class FakeRetriever implements Retriever {
  calls: { apiKeyId: string | null; opts: RetrieveOptions; mode?: RetrieveMode }[] = [];
  memories: string[] = [];
  behaviour: 'ok' | 'throw' | 'hang' = 'ok';
  /** Hung calls whose signal fired (the proxy gave up on them and said so). */
  cancelled = 0;

  async retrieve(apiKeyId: string | null, opts: RetrieveOptions, mode?: RetrieveMode): Promise<RetrievalResult> {
    this.calls.push({ apiKeyId, opts, mode });
    // The message quotes user text, as a storage error might: the proxy must not log it.
    if (this.behaviour === 'throw') throw new Error(`fts5: syntax error near "${opts.query ?? ''} SECRET-USER-TEXT"`);
    if (this.behaviour === 'hang') {
      // Never answers: only the memory phase's signal ends it (no signal → the request would hang).
      await new Promise<never>((_, reject) =>
        mode?.signal?.addEventListener('abort', () => {
          this.cancelled++;
          reject(mode.signal!.reason);
        }),
      );
    }
    const now = new Date().toISOString();
    const items = this.memories.map((content, i) => {
      const memory: Memory = {
        id: crypto.randomUUID(),
        apiKeyId: apiKeyId ?? '',
        sessionId: '',
        type: 'factual',
        key: `fact:${i}`,
        content,
        metadata: {},
        createdAt: now,
        updatedAt: now,
        expiresAt: null,
        accessCount: 0,
        lastAccessedAt: null,
      };
      return { memory, score: 1 / (i + 1), tokens: estimateTokens(content), tier: 'fts5' as const, vecScore: null, ftsScore: 1, truncated: false };
    });
    return {
      items,
      resolution: {
        embeddingSource: null,
        embeddingModel: null,
        vectorStore: 'none',
        strategyUsed: opts.strategy,
        rerankApplied: false,
        rerankReason: null,
        fallbackReason: null,
        fusion: null,
      },
      totalTokens: items.reduce((s, i) => s + i.tokens, 0),
      budgetMaxTokens: opts.maxTokens,
    };
  }
}

async function listen(app: http.RequestListener): Promise<{ server: http.Server; baseURL: string }> {
  const server = http.createServer(app);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` };
}

async function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
}

const client = (baseURL: string, apiKey: string) => new OpenAI({ apiKey, baseURL, maxRetries: 0, timeout: 20_000 });

/** Every extract-facts job (queued in Redis or parked in the outbox) whose user text carries the marker. */
async function extractJobsFor(t: TestApi, m: string): Promise<{ jobId: string; data: Record<string, unknown> }[]> {
  const out: { jobId: string; data: Record<string, unknown> }[] = [];
  if (t.ctx.queues.isReady()) {
    const q = t.ctx.queues.queue(JOBS['extract-facts'].queue);
    const jobs = await q.getJobs(['waiting', 'prioritized', 'delayed', 'active', 'completed', 'failed', 'paused']);
    for (const j of jobs) if (j && j.name === 'extract-facts' && String(j.data?.userText).includes(m)) out.push({ jobId: String(j.id), data: j.data });
  }
  // Parked = never taken by Redis; a queued job's durable record (queued_at set) is the same job as the one above.
  const rows = t.ctx.db.db.prepare("SELECT job_id, payload FROM outbox WHERE job_name = 'extract-facts' AND queued_at IS NULL AND done_at IS NULL").all() as { job_id: string; payload: string }[];
  for (const r of rows) {
    const data = JSON.parse(r.payload) as Record<string, unknown>;
    if (String(data.userText).includes(m)) out.push({ jobId: r.job_id, data });
  }
  return out;
}

describe('/v1 chat proxy (retrieval test double)', () => {
  let fake: FakeUpstream;
  let t: TestApi;
  let server: http.Server;
  let baseURL: string;
  let key: { id: string; key: string };
  let retriever: FakeRetriever;
  let openai: OpenAI;

  beforeAll(async () => {
    fake = await startFakeUpstream();
    t = buildTestApi(testEnv({ UPSTREAM_BASE_URL: `${fake.url}/v1`, UPSTREAM_API_KEY: UPSTREAM_KEY }));
    key = t.ctx.apiKeys.create('test');
    ({ server, baseURL } = await listen(t.app));
    openai = client(baseURL, key.key);
  });
  afterAll(async () => {
    await closeServer(server);
    await fake.close();
    await t.close();
  });
  beforeEach(() => {
    retriever = new FakeRetriever();
    retriever.memories = ['The user likes green tea', 'The user lives in Lisbon'];
    t.ctx.retrieval = retriever;
    t.ctx.settings.updateMemory({ enabled: true, maxTokens: 2000, strategy: 'hybrid', extractFromAssistant: false });
  });

  const chatRecords = () => fake.requests.filter((r) => r.path === '/v1/chat/completions');
  const upstreamFor = (m: string): FakeUpstreamRequest => {
    const found = chatRecords().filter((r) => JSON.stringify(r.body).includes(m));
    expect(found).toHaveLength(1);
    return found[0];
  };
  const memoryText = 'Memory context: The user likes green tea\nThe user lives in Lisbon';

  /** Asserts no extract-facts job for `m`: a later, extracted request is seen first, so an earlier enqueue would have landed too. */
  async function expectNoExtraction(m: string): Promise<void> {
    const control = marker();
    await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `control ${control}` }] });
    await waitUntil(async () => (await extractJobsFor(t, control)).length === 1, 5000, 'the control extraction');
    expect(await extractJobsFor(t, m)).toEqual([]);
  }

  it('non-stream and stream calls work through the openai client; memory lands in the right place; upstream sees its own key', async () => {
    const m1 = marker();
    const res = await openai.chat.completions.create(
      { model: 'gpt-4o-mini', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: `What do I drink? ${m1}` }] },
      { headers: { 'x-omniroute-session-id': 'sess-1' } },
    );
    expect(res.choices[0].message.content).toBe(FAKE_REPLY);
    const up1 = upstreamFor(m1);
    expect(up1.body!.messages).toEqual([
      { role: 'system', content: memoryText },
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: `What do I drink? ${m1}` },
    ]);
    expect(up1.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(JSON.stringify(up1.headers)).not.toContain(key.key);
    expect(retriever.calls.at(-1)).toEqual({
      apiKeyId: key.id,
      opts: { query: `What do I drink? ${m1}`, strategy: 'hybrid', maxTokens: 2000, retentionDays: 30, sessionId: 'sess-1', scope: 'apiKey' },
      mode: { requestId: expect.stringMatching(/^[0-9a-f-]{36}$/), signal: expect.any(AbortSignal), contentOnly: true },
    });
    // Extraction: the user's words (not the injected memory), the session, a fresh request id; no assistant text by default.
    const [job] = await waitUntil(async () => {
      const jobs = await extractJobsFor(t, m1);
      return jobs.length ? jobs : null;
    }, 5000, 'extract-facts');
    expect(job.data).toEqual({ apiKeyId: key.id, sessionId: 'sess-1', userText: `What do I drink? ${m1}`, requestId: expect.any(String) });
    expect(job.jobId).toBe(`extract-${job.data.requestId}`);
    expect(job.data.requestId).toBe(retriever.calls.at(-1)!.mode!.requestId);

    // Streaming, with assistant extraction on: the tee captures the streamed reply.
    t.ctx.settings.updateMemory({ extractFromAssistant: true });
    const m2 = marker();
    const stream = await openai.chat.completions.create({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: `Stream please ${m2}` }] });
    let text = '';
    for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
    expect(text).toBe(FAKE_REPLY);
    const up2 = upstreamFor(m2);
    expect(up2.body!.stream).toBe(true);
    expect(up2.body!.messages).toEqual([{ role: 'system', content: memoryText }, { role: 'user', content: `Stream please ${m2}` }]);
    expect(up2.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    const [job2] = await waitUntil(async () => {
      const jobs = await extractJobsFor(t, m2);
      return jobs.length ? jobs : null;
    }, 5000, 'extract-facts (stream)');
    expect(job2.data).toMatchObject({ apiKeyId: key.id, sessionId: null, userText: `Stream please ${m2}`, assistantText: FAKE_REPLY });

    // Prompt-cache markers: memory goes just before the last user turn, the cached prefix stays byte-identical.
    const m3 = marker();
    const cached = [
      { role: 'system', content: [{ type: 'text', text: 'A long cached system prompt.', cache_control: { type: 'ephemeral' } }] },
      { role: 'user', content: 'first turn' },
      { role: 'assistant', content: 'first answer' },
      { role: 'user', content: `second turn ${m3}` },
    ];
    await openai.chat.completions.create({ model: 'claude-sonnet-4', messages: cached } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(upstreamFor(m3).body!.messages).toEqual([...cached.slice(0, 3), { role: 'system', content: memoryText }, cached[3]]);

    // o1-mini rejects the system role: the memory goes in as a user message.
    const m4 = marker();
    await openai.chat.completions.create({ model: 'o1-mini', messages: [{ role: 'user', content: `Think ${m4}` }] });
    expect(upstreamFor(m4).body!.messages).toEqual([{ role: 'user', content: memoryText }, { role: 'user', content: `Think ${m4}` }]);
  });

  it('unknown request fields and their order reach the upstream untouched; SSE lines split across chunks are joined', async () => {
    const m = marker();
    const sent = {
      temperature: 0.2,
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: `Hi ${m}`, name: 'ana' }],
      response_format: { type: 'json_object' },
      metadata: { nested: { a: [1, 2, { b: null }] } },
      user: 'end-user-7',
    };
    const r = await request(t.app).post('/v1/chat/completions').set('authorization', `Bearer ${key.key}`).send(sent);
    expect(r.status).toBe(200);
    const up = upstreamFor(m);
    expect(Object.keys(up.body!)).toEqual(Object.keys(sent));
    expect({ ...up.body, messages: undefined }).toEqual({ ...sent, messages: undefined });
    expect((up.body!.messages as unknown[])[1]).toEqual(sent.messages[0]);

    // Every event arrives in two writes cut mid-line and mid-character: the tee must still capture the text.
    t.ctx.settings.updateMemory({ extractFromAssistant: true });
    const reply = 'Olá — café ☕ em 東京, 🎉 done';
    fake.plan({ splitLines: true, reply, chunks: 4 });
    const m2 = marker();
    const stream = await openai.chat.completions.create({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: `Split ${m2}` }] });
    let text = '';
    for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
    expect(text).toBe(reply);
    const [job] = await waitUntil(async () => {
      const jobs = await extractJobsFor(t, m2);
      return jobs.length ? jobs : null;
    }, 5000, 'extract-facts (split stream)');
    expect(job.data.assistantText).toBe(reply);
  });

  it('a JSON reply is extracted from only with extractFromAssistant on', async () => {
    const chat = async (on: boolean) => {
      t.ctx.settings.updateMemory({ extractFromAssistant: on });
      const m = marker();
      const r = await request(t.app).post('/v1/chat/completions').set('authorization', `Bearer ${key.key}`).send({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `Reply ${m}` }] });
      expect(r.status).toBe(200);
      expect(r.body.choices[0].message.content).toBe(FAKE_REPLY);
      const [job] = await waitUntil(async () => {
        const jobs = await extractJobsFor(t, m);
        return jobs.length ? jobs : null;
      }, 5000, 'extract-facts');
      return job.data as { userText: string; assistantText?: string };
    };
    expect(await chat(true)).toMatchObject({ assistantText: FAKE_REPLY });
    const off = await chat(false);
    expect(off.userText).toMatch(/^Reply /);
    expect(off).not.toHaveProperty('assistantText');
  });

  it('streaming passes each chunk through as it arrives (no buffering, early first byte)', async () => {
    const m = marker();
    fake.plan({ chunks: 5, chunkDelayMs: 150 });
    const { data: stream, response } = await openai.chat.completions
      .create({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: `Slow ${m}` }] })
      .withResponse();
    const headersAt = performance.now();
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const arrivals: number[] = [];
    for await (const c of stream) if (c.choices[0]?.delta?.content) arrivals.push(performance.now());
    const up = upstreamFor(m);
    expect(up.chunkTimes).toHaveLength(5);
    expect(arrivals).toHaveLength(5);
    // The status line reached the client before the upstream had even written its second chunk.
    expect(headersAt).toBeLessThan(up.chunkTimes[1]);
    // Each chunk reached the client before the upstream wrote the next one, and the first long before the upstream finished.
    for (let i = 0; i < 4; i++) expect(arrivals[i]).toBeLessThan(up.chunkTimes[i + 1]);
    expect(arrivals[0]).toBeLessThan(up.finishedAt!);
  });

  it('x-memory-* headers say what was done (injected, empty, recent → exact), on streams too', async () => {
    const withHeaders = async (body: Record<string, unknown>) =>
      request(t.app).post('/v1/chat/completions').set('authorization', `Bearer ${key.key}`).send(body).buffer(true);
    const tokens = estimateTokens('The user likes green tea') + estimateTokens('The user lives in Lisbon');

    const a = await withHeaders({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `one ${marker()}` }] });
    expect(a.status).toBe(200);
    expect(a.headers).toMatchObject({ 'x-memory-injected': '2', 'x-memory-tokens': String(tokens), 'x-memory-strategy': 'hybrid', 'x-memory-status': 'injected' });

    const s = await withHeaders({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: `two ${marker()}` }] });
    expect(s.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(s.text).toContain('data: [DONE]');
    expect(s.headers).toMatchObject({ 'x-memory-injected': '2', 'x-memory-status': 'injected' });

    retriever.memories = [];
    const m = marker();
    const e = await withHeaders({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `three ${m}` }] });
    expect(e.headers).toMatchObject({ 'x-memory-injected': '0', 'x-memory-tokens': '0', 'x-memory-strategy': 'hybrid', 'x-memory-status': 'empty' });
    expect(upstreamFor(m).body!.messages).toEqual([{ role: 'user', content: `three ${m}` }]);

    // `recent` is recency: strategy exact, and no query so nothing is relevance-filtered away.
    t.ctx.settings.updateMemory({ strategy: 'recent' });
    retriever.memories = ['The user likes green tea'];
    const r = await withHeaders({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `four ${marker()}` }] });
    expect(r.headers).toMatchObject({ 'x-memory-injected': '1', 'x-memory-strategy': 'exact', 'x-memory-status': 'injected' });
    expect(retriever.calls.at(-1)!.opts).toMatchObject({ strategy: 'exact', query: null });
  });

  it('x-omniroute-no-memory / x-no-memory skip both phases', async () => {
    for (const [name, value] of [
      ['x-omniroute-no-memory', 'true'],
      ['x-no-memory', '1'],
    ]) {
      const m = marker();
      const before = retriever.calls.length;
      const { data, response } = await openai.chat.completions
        .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `private ${m}` }] }, { headers: { [name]: value } })
        .withResponse();
      expect(data.choices[0].message.content).toBe(FAKE_REPLY);
      expect(response.headers.get('x-memory-status')).toBe('opted-out');
      expect(response.headers.get('x-memory-injected')).toBe('0');
      expect(response.headers.get('x-memory-strategy')).toBe('none');
      expect(retriever.calls.length).toBe(before);
      expect(upstreamFor(m).body!.messages).toEqual([{ role: 'user', content: `private ${m}` }]);
      await expectNoExtraction(m);
    }
  });

  it('memory disabled in settings: transparent pass-through, no retrieval, no extraction', async () => {
    t.ctx.settings.updateMemory({ enabled: false });
    try {
      const m = marker();
      const sent = { model: 'gpt-4o-mini', messages: [{ role: 'system', content: 'sys' }, { role: 'user', content: `plain ${m}` }] };
      const { response } = await openai.chat.completions.create(sent as OpenAI.ChatCompletionCreateParamsNonStreaming).withResponse();
      expect(response.headers.get('x-memory-status')).toBe('disabled');
      expect(response.headers.get('x-memory-strategy')).toBe('none');
      expect(retriever.calls).toHaveLength(0);
      expect(upstreamFor(m).body).toEqual(sent);
      const m2 = marker();
      const stream = await openai.chat.completions.create({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: `plain ${m2}` }] });
      for await (const _c of stream) void _c;
      expect(retriever.calls).toHaveLength(0);
      // A zero budget is "disabled" too.
      t.ctx.settings.updateMemory({ enabled: true, maxTokens: 0 });
      const m3 = marker();
      const { response: r3 } = await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `plain ${m3}` }] }).withResponse();
      expect(r3.headers.get('x-memory-status')).toBe('disabled');
      expect(retriever.calls).toHaveLength(0);
      t.ctx.settings.updateMemory({ maxTokens: 2000 });
      await expectNoExtraction(m);
      expect(await extractJobsFor(t, m2)).toEqual([]);
      expect(await extractJobsFor(t, m3)).toEqual([]);
    } finally {
      t.ctx.settings.updateMemory({ enabled: true, maxTokens: 2000 });
    }
  });

  it('a body the proxy does not change reaches the upstream byte for byte (no re-serialisation); an injected one is re-encoded', async () => {
    const m = marker();
    // Spellings JSON.stringify would change: spaces, 1.0, 1e0, \u escapes, an integer past 2^53, a "/" escape.
    const raw = `{ "model" : "gpt-4o-mini",\n  "temperature": 1.0, "n": 1e0, "seed": 12345678901234567890,\n  "messages": [ {"role":"user", "content":"caf\\u00e9 \\/ ${m}"} ] }`;
    const send = (headers: Record<string, string>) =>
      request(t.app).post('/v1/chat/completions').set('authorization', `Bearer ${key.key}`).set('content-type', 'application/json').set(headers).send(raw);

    t.ctx.settings.updateMemory({ enabled: false });
    try {
      const off = await send({});
      expect(off.status).toBe(200);
      expect(off.headers['x-memory-status']).toBe('disabled');
      expect(upstreamFor(m).raw).toBe(raw);
    } finally {
      t.ctx.settings.updateMemory({ enabled: true });
    }
    fake.reset();
    const optedOut = await send({ 'x-no-memory': 'true' });
    expect(optedOut.headers['x-memory-status']).toBe('opted-out');
    expect(upstreamFor(m).raw).toBe(raw);

    fake.reset();
    retriever.behaviour = 'throw';
    const degraded = await send({});
    expect(degraded.headers['x-memory-status']).toBe('degraded');
    expect(upstreamFor(m).raw).toBe(raw);

    // With memory injected the body is a new JSON text: same fields, the memory message added.
    fake.reset();
    retriever.behaviour = 'ok';
    const injected = await send({});
    expect(injected.headers['x-memory-status']).toBe('injected');
    const up = upstreamFor(m);
    expect(up.raw).not.toBe(raw);
    expect(up.body!.messages).toEqual([{ role: 'system', content: memoryText }, { role: 'user', content: `café / ${m}` }]);
    expect(up.body!.temperature).toBe(1);
  });

  it('a JSON answer leaves in one piece with a content-length, byte-identical to the upstream’s', async () => {
    const reply = `ünïcödé ${marker()} ${'x'.repeat(50_000)}`;
    fake.plan({ reply });
    const r = await request(t.app)
      .post('/v1/chat/completions')
      .set('authorization', `Bearer ${key.key}`)
      .buffer(true)
      .parse((res, cb) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => cb(null, Buffer.concat(chunks)));
      })
      .send({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hello' }] });
    expect(r.status).toBe(200);
    const body = r.body as Buffer;
    expect(r.headers['content-length']).toBe(String(body.length));
    expect(r.headers['transfer-encoding']).toBeUndefined();
    expect(JSON.parse(body.toString('utf8')).choices[0].message.content).toBe(reply);
  });

  it('one access log line per request: method, path without the query, status, time; never the key or the body', async () => {
    const lines: string[] = [];
    const realLog = t.ctx.log;
    t.ctx.log = createLogger('info', 'test', new Writable({ write(chunk, _enc, cb) { lines.push(String(chunk)); cb(); } }));
    try {
      const m = marker();
      const ok = await request(t.app).post(`/v1/chat/completions?secret=${m}`).set('authorization', `Bearer ${key.key}`).send({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `log ${m}` }] });
      expect(ok.status).toBe(200);
      const refused = await request(t.app).post('/v1/chat/completions').set('authorization', 'Bearer egk_wrong').send({ messages: [] });
      expect(refused.status).toBe(401);
      await waitUntil(() => lines.filter((l) => l.includes('"req":')).length >= 2 || null, 2000, 'access log lines');
      const access = lines.filter((l) => l.includes('"req":')).map((l) => JSON.parse(l) as { level: number; msg: string; req: Record<string, unknown>; res: { statusCode: number }; responseTime: number });
      expect(access).toHaveLength(2);
      expect(access[0]).toMatchObject({ level: 30, msg: 'request completed', req: { id: ok.headers['x-request-id'], method: 'POST', path: '/v1/chat/completions' }, res: { statusCode: 200 } });
      expect(typeof access[0].responseTime).toBe('number');
      expect(access[1]).toMatchObject({ level: 40, req: { id: refused.headers['x-request-id'], path: '/v1/chat/completions' }, res: { statusCode: 401 } });
      for (const secret of [m, key.key, UPSTREAM_KEY, 'egk_wrong']) expect(lines.join('')).not.toContain(secret);
    } finally {
      t.ctx.log = realLog;
    }
  });

  it('retrieval that throws or hangs fails open: the request goes upstream unmodified, x-memory-status degraded, nothing logged but the fact', async () => {
    const lines: string[] = [];
    const realLog = t.ctx.log;
    t.ctx.log = createLogger(
      'info',
      'test',
      new Writable({
        write(chunk, _enc, cb) {
          lines.push(String(chunk));
          cb();
        },
      }),
    );
    try {
      retriever.behaviour = 'throw';
      const m = marker();
      const { data, response } = await openai.chat.completions
        .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `fragile ${m}` }] })
        .withResponse();
      expect(data.choices[0].message.content).toBe(FAKE_REPLY);
      expect(response.headers.get('x-memory-status')).toBe('degraded');
      expect(response.headers.get('x-memory-injected')).toBe('0');
      expect(response.headers.get('x-memory-strategy')).toBe('none');
      expect(upstreamFor(m).body!.messages).toEqual([{ role: 'user', content: `fragile ${m}` }]);
      const logged = lines.join('');
      expect(logged).toContain('memory retrieval failed');
      for (const secret of ['SECRET-USER-TEXT', m, key.key, UPSTREAM_KEY]) expect(logged).not.toContain(secret);

      // A retrieval that never answers: past the bound the request goes on without it, and the retrieval is told to stop.
      retriever.behaviour = 'hang';
      const m2 = marker();
      const slow = await request(t.app)
        .post('/v1/chat/completions')
        .set('authorization', `Bearer ${key.key}`)
        .send({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `slow memory ${m2}` }] });
      expect(slow.status).toBe(200);
      expect(slow.headers['x-memory-status']).toBe('degraded');
      expect(retriever.cancelled).toBe(1);
      expect(upstreamFor(m2).body!.messages).toEqual([{ role: 'user', content: `slow memory ${m2}` }]);
      expect(lines.join('')).toContain('"reason":"timeout"');
    } finally {
      t.ctx.log = realLog;
    }
  });

  it('an upstream dying mid-stream ends the client stream with an error, and nothing is extracted', async () => {
    const m = marker();
    fake.plan({ chunks: 5, dieAfterChunks: 2, chunkDelayMs: 20 });
    const stream = await openai.chat.completions.create({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: `fragile ${m}` }] });
    const got: string[] = [];
    const iterate = async () => {
      for await (const c of stream) got.push(c.choices[0]?.delta?.content ?? '');
    };
    const err = await iterate().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as Error).message).toBe('upstream stream ended unexpectedly');
    // What arrived before the break was passed through.
    expect(got.join('')).not.toBe('');
    expect(upstreamFor(m).died).toBe(true);
    await expectNoExtraction(m);
  });

  it('upstream error statuses, headers and bodies pass through; the openai client raises the matching class', async () => {
    const rateBody = { error: { message: 'Rate limit reached for gpt-4o-mini', type: 'requests', param: null, code: 'rate_limit_exceeded' } };
    fake.plan({ status: 429, headers: { 'retry-after': '7', 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-limit-requests': '500' }, body: rateBody });
    const m = marker();
    const e429 = await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `x ${m}` }] }).catch((e: unknown) => e);
    expect(e429).toBeInstanceOf(OpenAI.RateLimitError);
    const rl = e429 as InstanceType<typeof OpenAI.RateLimitError>;
    expect(rl.status).toBe(429);
    expect(rl.error).toEqual(rateBody.error);
    expect(rl.headers?.get('retry-after')).toBe('7');
    expect(rl.headers?.get('x-ratelimit-remaining-requests')).toBe('0');
    expect(rl.headers?.get('x-ratelimit-limit-requests')).toBe('500');
    expect(rl.headers?.get('x-memory-status')).toBe('injected');

    const badBody = { error: { message: "Invalid value for 'temperature'", type: 'invalid_request_error', param: 'temperature', code: 'invalid_value' } };
    fake.plan({ status: 400, body: badBody });
    const raw = await request(t.app)
      .post('/v1/chat/completions')
      .set('authorization', `Bearer ${key.key}`)
      .send({ model: 'gpt-4o-mini', temperature: 9, messages: [{ role: 'user', content: `x ${marker()}` }] });
    expect(raw.status).toBe(400);
    expect(raw.headers['content-type']).toMatch(/^application\/json/);
    expect(raw.text).toBe(JSON.stringify(badBody));

    // A streaming request refused before the stream starts is a plain error too.
    fake.plan({ status: 400, body: badBody });
    const e400 = await openai.chat.completions
      .create({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: `x ${marker()}` }] })
      .catch((e: unknown) => e);
    expect(e400).toBeInstanceOf(OpenAI.BadRequestError);
    expect((e400 as InstanceType<typeof OpenAI.BadRequestError>).error).toEqual(badBody.error);

    fake.plan({ status: 503, body: { error: { message: 'overloaded', type: 'server_error' } } });
    const e503 = await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `x ${marker()}` }] }).catch((e: unknown) => e);
    expect(e503).toBeInstanceOf(OpenAI.InternalServerError);
    expect((e503 as InstanceType<typeof OpenAI.InternalServerError>).status).toBe(503);
    // Failed exchanges are not mined.
    await expectNoExtraction(m);
  });

  it('a client disconnect aborts the upstream request', async () => {
    const m = marker();
    fake.plan({ chunks: 10, chunkDelayMs: 200 });
    const stream = await openai.chat.completions.create({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: `bye ${m}` }] });
    for await (const c of stream) if (c.choices[0]?.delta?.content) break; // breaking aborts the client's request
    const up = await waitUntil(() => {
      const r = upstreamFor(m);
      return r.closedEarly ? r : null;
    }, 3000, 'the upstream connection to close');
    expect(up.finishedAt).toBeNull();
    expect(up.chunkTimes.length).toBeLessThan(10);
    await expectNoExtraction(m);
  });

  it('unknown or revoked Engram keys are refused (401 invalid_api_key, as OpenAI answers) and never reach the upstream', async () => {
    const before = fake.requests.length;
    const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] };
    const none = await request(t.app).post('/v1/chat/completions').send(body);
    expect(none.status).toBe(401);
    expect(none.body).toEqual({ error: { message: expect.any(String), type: 'invalid_request_error', param: null, code: 'invalid_api_key' } });
    expect((await request(t.app).get('/v1/models')).status).toBe(401);
    const unknown = await client(baseURL, `egk_${crypto.randomBytes(32).toString('base64url')}`)
      .chat.completions.create(body as OpenAI.ChatCompletionCreateParamsNonStreaming)
      .catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(OpenAI.AuthenticationError);
    const revoked = t.ctx.apiKeys.create('revoked');
    t.ctx.apiKeys.revoke(revoked.id);
    const r = await request(t.app).post('/v1/chat/completions').set('authorization', `Bearer ${revoked.key}`).send(body);
    expect(r.status).toBe(401);
    expect(fake.requests.length).toBe(before);
    expect(retriever.calls).toHaveLength(0);
  });

  it('malformed bodies are 400 invalid_request_error with the zod path as param, and never reach the upstream', async () => {
    const before = fake.requests.length;
    const auth = { authorization: `Bearer ${key.key}` };
    const r = await request(t.app).post('/v1/chat/completions').set(auth).send({ model: 'gpt-4o-mini', messages: 'hello' });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request_error', code: 'validation_failed', param: 'messages' });
    const noRole = await request(t.app).post('/v1/chat/completions').set(auth).send({ messages: [{ content: 'x' }] });
    expect(noRole.status).toBe(400);
    expect(noRole.body.error.param).toBe('messages.0.role');
    const notJson = await request(t.app).post('/v1/chat/completions').set(auth).set('content-type', 'application/json').send('{"messages": [');
    expect(notJson.status).toBe(400);
    expect((await request(t.app).post('/v1/memory/inject').set(auth).send({ messages: 3 })).status).toBe(400);
    expect((await request(t.app).post('/v1/memory/observe').set(auth).send({ messages: [{ role: 'user', content: 'x' }], assistantText: 5 })).status).toBe(400);
    expect(fake.requests.length).toBe(before);
  });

  it("an unreachable upstream is a 502 and a silent one a 504, in OpenAI's error shape", async () => {
    const slow = await startFakeUpstream();
    const t2 = buildTestApi(testEnv({ UPSTREAM_BASE_URL: `${slow.url}/v1`, UPSTREAM_API_KEY: UPSTREAM_KEY, UPSTREAM_TIMEOUT_MS: '1000' }));
    try {
      const k = t2.ctx.apiKeys.create('t2');
      const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] };
      slow.plan({ delayMs: 2500 });
      const timedOut = await request(t2.app).post('/v1/chat/completions').set('authorization', `Bearer ${k.key}`).send(body);
      expect(timedOut.status).toBe(504);
      expect(timedOut.body).toEqual({ error: { message: expect.any(String), type: 'server_error', param: null, code: 'upstream_timeout' } });
      expect(timedOut.headers['x-memory-status']).toBe('disabled');
      // The proxy hung up on the silent upstream rather than waiting for its late answer.
      await waitUntil(() => slow.requests.at(-1)?.closedEarly, 5000, 'the upstream request to be closed');
      await slow.close();
      const down = await request(t2.app).post('/v1/chat/completions').set('authorization', `Bearer ${k.key}`).send(body);
      expect(down.status).toBe(502);
      expect(down.body).toEqual({ error: { message: expect.any(String), type: 'server_error', param: null, code: 'upstream_unreachable' } });
      expect(JSON.stringify(down.body)).not.toContain(UPSTREAM_KEY);
      expect((await request(t2.app).get('/v1/models').set('authorization', `Bearer ${k.key}`)).status).toBe(502);
    } finally {
      await slow.close().catch(() => undefined);
      await t2.close();
    }
  });

  it('GET /v1/models passes through', async () => {
    const list = await openai.models.list();
    expect(list.data.map((x) => x.id)).toEqual(FAKE_MODELS);
    const rec = fake.requests.at(-1)!;
    expect(rec).toMatchObject({ method: 'GET', path: '/v1/models' });
    expect(rec.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
  });

  it('POST /v1/memory/inject answers the injected body and what was done, honouring opt-out and session headers', async () => {
    const auth = { authorization: `Bearer ${key.key}` };
    const sent = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'What do I drink?' }], temperature: 0 };
    const before = fake.requests.length;
    const r = await request(t.app).post('/v1/memory/inject').set(auth).set('x-session-id', 'gw-1').send(sent);
    expect(r.status).toBe(200);
    const tokens = estimateTokens('The user likes green tea') + estimateTokens('The user lives in Lisbon');
    expect(r.body).toEqual({
      body: { model: 'gpt-4o-mini', messages: [{ role: 'system', content: memoryText }, sent.messages[0]], temperature: 0 },
      memory: { injected: 2, tokens, strategy: 'hybrid', status: 'injected' },
    });
    expect(r.headers).toMatchObject({ 'x-memory-injected': '2', 'x-memory-status': 'injected' });
    expect(retriever.calls.at(-1)).toMatchObject({ apiKeyId: key.id, opts: { sessionId: 'gw-1', query: 'What do I drink?' } });

    const out = await request(t.app).post('/v1/memory/inject').set(auth).set('x-omniroute-no-memory', 'yes').send(sent);
    expect(out.body).toEqual({ body: sent, memory: { injected: 0, tokens: 0, strategy: 'none', status: 'opted-out' } });
    expect(retriever.calls).toHaveLength(1);
    // Inject never calls the upstream.
    expect(fake.requests.length).toBe(before);
  });

  it('POST /v1/memory/observe enqueues extract-facts (202), or says why not (200)', async () => {
    const auth = { authorization: `Bearer ${key.key}` };
    const m = marker();
    const r = await request(t.app)
      .post('/v1/memory/observe')
      .set(auth)
      .set('x-omniroute-session-id', 'hdr-session')
      .send({ messages: [{ role: 'user', content: `I live in Porto ${m}` }], response: { choices: [{ message: { role: 'assistant', content: 'Nice city.' } }] } });
    expect(r.status).toBe(202);
    expect(r.body).toEqual({ jobId: expect.stringMatching(/^extract-/), queue: 'extraction', accepted: true });
    const job = await t.ctx.queues.queue('extraction').getJob(r.body.jobId);
    // Assistant text only when extractFromAssistant is on.
    expect(job?.data).toEqual({ apiKeyId: key.id, sessionId: 'hdr-session', userText: `I live in Porto ${m}`, requestId: expect.any(String) });

    t.ctx.settings.updateMemory({ extractFromAssistant: true });
    const claude = await request(t.app)
      .post('/v1/memory/observe')
      .set(auth)
      .send({ messages: [{ role: 'user', content: `Call me Ana ${m}` }], response: { content: [{ type: 'text', text: 'Hi Ana.' }] }, sessionId: 'body-session' });
    expect(claude.status).toBe(202);
    expect((await t.ctx.queues.queue('extraction').getJob(claude.body.jobId))?.data).toMatchObject({ sessionId: 'body-session', assistantText: 'Hi Ana.' });
    const text = await request(t.app).post('/v1/memory/observe').set(auth).send({ messages: [{ role: 'user', content: `x ${m}` }], assistantText: ' plain reply ' });
    expect((await t.ctx.queues.queue('extraction').getJob(text.body.jobId))?.data).toMatchObject({ assistantText: 'plain reply' });

    const empty = await request(t.app).post('/v1/memory/observe').set(auth).send({ messages: [{ role: 'assistant', content: 'only me' }] });
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual({ accepted: false, reason: 'no_user_text' });
    const opted = await request(t.app).post('/v1/memory/observe').set(auth).set('x-no-memory', 'true').send({ messages: [{ role: 'user', content: 'x' }] });
    expect(opted.body).toEqual({ accepted: false, reason: 'opted_out' });
    t.ctx.settings.updateMemory({ enabled: false });
    const off = await request(t.app).post('/v1/memory/observe').set(auth).send({ messages: [{ role: 'user', content: 'x' }] });
    expect(off.status).toBe(200);
    expect(off.body).toEqual({ accepted: false, reason: 'memory_disabled' });
  });
});

describe('/v1 chat proxy with Redis down', () => {
  it('still answers, and extraction goes to the SQLite outbox', async () => {
    const fake = await startFakeUpstream();
    const t = buildTestApi(testEnv({ REDIS_URL: 'redis://127.0.0.1:1', UPSTREAM_BASE_URL: `${fake.url}/v1`, UPSTREAM_API_KEY: UPSTREAM_KEY }));
    const { server, baseURL } = await listen(t.app);
    try {
      const key = t.ctx.apiKeys.create('test');
      t.ctx.settings.updateMemory({ enabled: true });
      const retriever = new FakeRetriever();
      retriever.memories = ['The user likes green tea'];
      t.ctx.retrieval = retriever;
      const openai = client(baseURL, key.key);
      const before = t.ctx.queues.outboxCount();
      const started = Date.now();
      const { data, response } = await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'I like tea' }] }).withResponse();
      expect(data.choices[0].message.content).toBe(FAKE_REPLY);
      expect(response.headers.get('x-memory-status')).toBe('injected');
      const stream = await openai.chat.completions.create({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'I like coffee' }] });
      for await (const _c of stream) void _c;
      expect(Date.now() - started).toBeLessThan(3000);
      await waitUntil(() => t.ctx.queues.outboxCount() === before + 2, 5000, 'two outbox rows');
      const rows = t.ctx.db.db.prepare('SELECT job_name, job_id FROM outbox').all() as { job_name: string; job_id: string }[];
      expect(rows.map((r) => r.job_name)).toEqual(['extract-facts', 'extract-facts']);
      for (const r of rows) expect(r.job_id).toMatch(/^extract-[0-9a-f-]{36}$/);
    } finally {
      await closeServer(server);
      await fake.close();
      await t.close();
    }
  });
});

describe('/v1 chat proxy with Redis down, real retrieval', () => {
  it('50 chats inject memories and write no record-access outbox row (access counts are dropped, not written per request)', async () => {
    const fake = await startFakeUpstream();
    const t = buildTestApi(testEnv({ REDIS_URL: 'redis://127.0.0.1:1', UPSTREAM_BASE_URL: `${fake.url}/v1`, UPSTREAM_API_KEY: UPSTREAM_KEY }));
    try {
      const key = t.ctx.apiKeys.create('down');
      await request(t.app).post('/api/memory').set(t.auth).send({ apiKeyId: key.id, key: 'pref:drink', content: 'The user drinks green tea every morning' }).expect(201);
      await request(t.app).put('/api/settings/memory').set(t.auth).send({ enabled: true, strategy: 'hybrid' }).expect(200);
      const outboxOf = (job: string) => (t.ctx.db.db.prepare('SELECT COUNT(*) AS n FROM outbox WHERE job_name = ?').get(job) as { n: number }).n;
      const before = t.ctx.queues.outboxCount();
      for (let i = 0; i < 50; i++) {
        const r = await request(t.app)
          .post('/v1/chat/completions')
          .set('authorization', `Bearer ${key.key}`)
          .send({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `Which tea do I drink? (${i})` }] });
        expect(r.status).toBe(200);
        expect(r.headers['x-memory-status']).toBe('injected');
      }
      // Each chat's extraction job is parked in the outbox (that one must not be lost); once all 50 are, and
      // whatever access counts were pending have been handed on, nothing else may be there.
      await waitUntil(() => outboxOf('extract-facts') === 50, 5000, '50 extract-facts outbox rows');
      await t.ctx.retrieval.close?.();
      expect(outboxOf('record-access')).toBe(0);
      expect(t.ctx.queues.outboxCount()).toBe(before + 50);
    } finally {
      await fake.close();
      await t.close();
    }
  });
});

describe('SseDeltaCollector', () => {
  it('joins lines and characters split across chunks, any line ending, and notices [DONE] and in-band errors', () => {
    const events = ['Olá', ' 東京', ' 🎉'].map((c) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: c } }] })}\r\n\r\n`).join('') + ': keep-alive\n\ndata: [DONE]\n\n';
    const bytes = Buffer.from(events, 'utf8');
    // Every possible single cut, including inside a multi-byte character and between \r and \n.
    for (let at = 0; at <= bytes.length; at++) {
      const c = new SseDeltaCollector();
      c.push(bytes.subarray(0, at));
      c.push(bytes.subarray(at));
      c.end();
      expect({ at, text: c.text(), done: c.sawDone }).toEqual({ at, text: 'Olá 東京 🎉', done: true });
    }
    const e = new SseDeltaCollector();
    e.push(Buffer.from('data: {"error":{"message":"boom"}}\n\n'));
    e.end();
    expect(e.sawError).toBe(true);
    expect(e.sawDone).toBe(false);
  });
});

describeWithRealRetrieval('with the real retrieval and SQLite store (memories and settings through the API)', () => {
  let fake: FakeUpstream;
  let t: TestApi;
  let w: RunningWorker;
  let auth: { authorization: string };
  let keyId: string;
  const ids: Record<string, string> = {};

  /** Creates a memory through the management API and returns its id. */
  const remember = async (apiKeyId: string, key: string, content: string) => {
    const r = await request(t.app).post('/api/memory').set(t.auth).send({ apiKeyId, key, content }).expect(201);
    return r.body.id as string;
  };
  const settings = (body: Record<string, unknown>) => request(t.app).put('/api/settings/memory').set(t.auth).send(body).expect(200);
  const chat = (content: string) => request(t.app).post('/v1/chat/completions').set(auth).send({ model: 'gpt-4o-mini', messages: [{ role: 'user', content }] });
  const accessCount = async (id: string) => (await request(t.app).get(`/api/memory?apiKeyId=${keyId}&limit=200`).set(t.auth)).body.data.find((m: Memory) => m.id === id)?.accessCount;

  beforeAll(async () => {
    fake = await startFakeUpstream();
    // A worker for the maintenance queue only (record-access); extraction and embedding jobs just wait.
    const env = testEnv({ UPSTREAM_BASE_URL: `${fake.url}/v1`, UPSTREAM_API_KEY: UPSTREAM_KEY, WORKER_QUEUES: 'maintenance', REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0' });
    t = buildTestApi(env);
    w = await startWorker(env, silentLog());
    const key = t.ctx.apiKeys.create('real');
    const other = t.ctx.apiKeys.create('other');
    auth = { authorization: `Bearer ${key.key}` };
    keyId = key.id;
    ids.tea = await remember(key.id, 'pref:drink', 'The user drinks green tea every morning');
    ids.city = await remember(key.id, 'loc:city', 'The user lives in Lisbon');
    // A look-alike under another key: the keyword query below matches it too, so only the tenant filter keeps it out.
    await remember(other.id, 'pref:drink', 'The other user drinks green tea with honey');
    await settings({ enabled: true });
  });
  afterAll(async () => {
    await t.ctx.retrieval.close?.();
    await w.stop();
    await fake.close();
    await t.close();
  });

  const lastUpstreamMessages = () => fake.requests.filter((r) => r.path === '/v1/chat/completions').at(-1)!.body!.messages as { role: string; content: string }[];

  it('recent (exact): the key’s newest memories are injected, never another key’s', async () => {
    await settings({ strategy: 'recent' });
    const r = await chat('Hello there');
    expect(r.status).toBe(200);
    expect(r.headers).toMatchObject({ 'x-memory-status': 'injected', 'x-memory-strategy': 'exact', 'x-memory-injected': '2' });
    expect(lastUpstreamMessages()).toEqual([
      { role: 'system', content: 'Memory context: The user lives in Lisbon\nThe user drinks green tea every morning' },
      { role: 'user', content: 'Hello there' },
    ]);
  });

  it('hybrid without an embedding model falls back to keywords: exactly the relevant memory of this key is injected', async () => {
    await settings({ strategy: 'hybrid' });
    const r = await chat('Which tea do I drink?');
    expect(r.status).toBe(200);
    expect(r.headers).toMatchObject({ 'x-memory-status': 'injected', 'x-memory-strategy': 'hybrid', 'x-memory-injected': '1' });
    const injected = { role: 'system', content: 'Memory context: The user drinks green tea every morning' };
    expect(lastUpstreamMessages()).toEqual([injected, { role: 'user', content: 'Which tea do I drink?' }]);
    const inj = await request(t.app).post('/v1/memory/inject').set(auth).send({ messages: [{ role: 'user', content: 'Which tea do I drink?' }] });
    expect(inj.body).toEqual({
      body: { messages: [injected, { role: 'user', content: 'Which tea do I drink?' }] },
      memory: { injected: 1, tokens: estimateTokens('The user drinks green tea every morning'), strategy: 'hybrid', status: 'injected' },
    });
  });

  it('access counts of 50 chats arrive through record-access jobs, batched: fewer jobs than chats', async () => {
    await settings({ strategy: 'hybrid' });
    const bees = await remember(keyId, 'hobby:bees', 'The user keeps bees on the roof');
    for (let i = 0; i < 50; i++) {
      const r = await chat(`Where are my bees? (${i})`);
      expect(r.headers['x-memory-injected']).toBe('1');
    }
    // Shutdown sends what is still pending.
    await t.ctx.retrieval.close?.();
    const q = t.ctx.queues.queue(JOBS['record-access'].queue);
    const jobs = (await q.getJobs(['waiting', 'prioritized', 'delayed', 'active', 'completed', 'failed', 'paused'])).filter(
      (j) => j?.name === 'record-access' && (j.data.memoryIds as string[]).includes(bees),
    );
    expect(jobs.length).toBeGreaterThan(0);
    expect(jobs.length).toBeLessThan(50);
    // Every access reaches the jobs: an id once per job, with how often it was injected since the last send.
    const sent = jobs.flatMap((j) => {
      const d = j.data as { memoryIds: string[]; counts?: number[] };
      return d.memoryIds.flatMap((id, i) => (id === bees ? [d.counts?.[i] ?? 1] : []));
    });
    expect(sent.length).toBe(jobs.length);
    expect(sent.reduce((a, n) => a + n, 0)).toBe(50);
    // The worker applied every one of them.
    await waitUntil(async () => (await accessCount(bees)) === 50, 10_000, 'the access counts');
    expect(t.ctx.queues.outboxCount()).toBe(0);
  });
});

describe('memory phase: a retrieval it stops waiting for is cancelled (real retrieval)', () => {
  let upstream: FakeUpstream;
  let emb: FakeEmbeddingsServer;
  let rr: FakeRerankServer;
  let t: TestApi;
  let key: { id: string; key: string };
  const mgmtSettings = (body: Record<string, unknown>) => request(t.app).put('/api/settings/memory').set(t.auth).send(body).expect(200);

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    emb = await startFakeEmbeddingsServer();
    rr = await startFakeRerankServer();
    // The outbound calls' own timeouts are far away: only the memory phase can end them early.
    t = buildTestApi(
      testEnv({
        UPSTREAM_BASE_URL: `${upstream.url}/v1`,
        UPSTREAM_API_KEY: UPSTREAM_KEY,
        OLLAMA_BASE_URL: emb.baseUrl.replace(/\/v1$/, ''),
        MEMORY_EMBEDDING_TIMEOUT_MS: '600000',
        MEMORY_RERANK_CUSTOM_BASE_URL: rr.baseUrl,
        MEMORY_RERANK_TIMEOUT_MS: '60000',
      }),
    );
    key = t.ctx.apiKeys.create('cancel');
    for (const [k, content] of [
      ['pref:tea', 'The user drinks green tea every morning'],
      ['pref:tea2', 'The user takes tea with lemon'],
    ]) {
      await request(t.app).post('/api/memory').set(t.auth).send({ apiKeyId: key.id, key: k, content }).expect(201);
    }
    // Neither fake ever answers on its own.
    emb.behave({ kind: 'delay', ms: 600_000 });
    rr.behave({ kind: 'delay', ms: 600_000 });
  });
  afterAll(async () => {
    await upstream.close();
    await emb.close();
    await rr.close();
    await t.close();
  });

  const chat = (content: string) =>
    request(t.app).post('/v1/chat/completions').set('authorization', `Bearer ${key.key}`).send({ model: 'gpt-4o-mini', messages: [{ role: 'user', content }] });
  const upstreamMessagesFor = (m: string) => upstream.requests.filter((r) => r.path === '/v1/chat/completions' && JSON.stringify(r.body).includes(m)).map((r) => r.body!.messages);

  it('a hanging embedding call is aborted when the memory phase times out; the chat goes upstream unmodified, degraded', async () => {
    await mgmtSettings({ enabled: true, strategy: 'hybrid', embeddingSource: 'remote', embeddingProviderModel: 'ollama/all-minilm', rerankEnabled: false });
    const m = marker();
    const r = await chat(`Which tea do I drink? ${m}`);
    expect(r.status).toBe(200);
    expect(r.body.choices[0].message.content).toBe(FAKE_REPLY);
    expect(r.headers['x-memory-status']).toBe('degraded');
    expect(upstreamMessagesFor(m)).toEqual([[{ role: 'user', content: `Which tea do I drink? ${m}` }]]);
    const sent = emb.requests.filter((q) => JSON.stringify(q.body.input).includes(m));
    expect(sent).toHaveLength(1);
    await waitUntil(() => sent[0].closedEarly, 5000, 'the embeddings request to be aborted');
  });

  it('a hanging rerank call is aborted when the memory phase times out; the chat still succeeds, degraded', async () => {
    await mgmtSettings({ enabled: true, strategy: 'hybrid', embeddingSource: 'auto', embeddingProviderModel: null, rerankEnabled: true, rerankProviderModel: 'custom/bge-reranker' });
    const m = marker();
    const r = await chat(`tea ${m}`);
    expect(r.status).toBe(200);
    expect(r.body.choices[0].message.content).toBe(FAKE_REPLY);
    expect(r.headers['x-memory-status']).toBe('degraded');
    expect(upstreamMessagesFor(m)).toEqual([[{ role: 'user', content: `tea ${m}` }]]);
    const sent = rr.requests.filter((q) => q.body.query === `tea ${m}`);
    expect(sent).toHaveLength(1);
    // Both tea memories were candidates: the call was a real rerank, not a skipped one.
    expect(sent[0].body.documents).toHaveLength(2);
    await waitUntil(() => sent[0].closedEarly, 5000, 'the rerank request to be aborted');
  });

  it("the caller's signal (client gone) cancels the retrieval's outbound call and answers degraded at once", async () => {
    await mgmtSettings({ enabled: true, strategy: 'hybrid', embeddingSource: 'remote', embeddingProviderModel: 'ollama/all-minilm', rerankEnabled: false });
    const m = marker();
    const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `Which tea do I drink? ${m}` }] };
    const client = new AbortController();
    const done = applyMemory(
      { retrieval: t.ctx.retrieval, log: t.ctx.log },
      // A bound far past the test's own timeout: only the caller's signal can end this early.
      { apiKeyId: key.id, body, plan: memoryPlan(t.ctx.settings.memory(), {}), requestId: crypto.randomUUID(), timeoutMs: 600_000, signal: client.signal },
    );
    const sent = await waitUntil(() => emb.requests.find((q) => JSON.stringify(q.body.input).includes(m)), 5000, 'the embeddings request');
    client.abort();
    const { body: out, outcome } = await done;
    expect(outcome).toEqual({ injected: 0, tokens: 0, strategy: 'none', status: 'degraded' });
    expect(out).toBe(body);
    await waitUntil(() => sent.closedEarly, 5000, 'the embeddings request to be aborted');
  });

  it("the chat proxy's ClientGone (an emitter, not an AbortSignal) cancels the retrieval the same way", async () => {
    await mgmtSettings({ enabled: true, strategy: 'hybrid', embeddingSource: 'remote', embeddingProviderModel: 'ollama/all-minilm', rerankEnabled: false });
    const m = marker();
    const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `Which tea do I drink? ${m}` }] };
    const res = Object.assign(new EventEmitter(), { writableFinished: false });
    const gone = new ClientGone({ req: { socket: { destroyed: false } }, res });
    const done = applyMemory(
      { retrieval: t.ctx.retrieval, log: t.ctx.log },
      { apiKeyId: key.id, body, plan: memoryPlan(t.ctx.settings.memory(), {}), requestId: crypto.randomUUID(), timeoutMs: 600_000, signal: gone },
    );
    const sent = await waitUntil(() => emb.requests.find((q) => JSON.stringify(q.body.input).includes(m)), 5000, 'the embeddings request');
    // The response closes before it finished: the client left.
    res.emit('close');
    const { body: out, outcome } = await done;
    expect(outcome).toEqual({ injected: 0, tokens: 0, strategy: 'none', status: 'degraded' });
    expect(out).toBe(body);
    await waitUntil(() => sent.closedEarly, 5000, 'the embeddings request to be aborted');
    // Its listener is gone once the phase settled.
    expect(gone.listenerCount('abort')).toBe(0);
  });
});
