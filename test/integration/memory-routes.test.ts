import request from 'supertest';
import { buildTestApi, type TestApi } from '../helpers/api';

describe('/api/memory', () => {
  let t: TestApi;
  beforeAll(() => {
    t = buildTestApi();
  });
  afterAll(() => t.close());

  const counts = () =>
    ['memories', 'memory_events', 'outbox'].map((tb) => (t.ctx.db.db.prepare(`SELECT COUNT(*) AS n FROM ${tb}`).get() as { n: number }).n);
  const post = (body: object) => request(t.app).post('/api/memory').set(t.auth).send(body);

  it('POST answers {success, id:<uuid>, memory} and upserts on key', async () => {
    const r = await post({ key: 'pref:lang', content: 'prefers TypeScript', apiKeyId: 'k1', sessionId: 's', metadata: { a: 1 } });
    expect(r.status).toBe(201);
    expect(r.body.success).toBe(true);
    expect(typeof r.body.id).toBe('string');
    expect(r.body.id).toBe(r.body.memory.id);
    expect(r.body.memory).toMatchObject({ apiKeyId: 'k1', sessionId: 's', type: 'factual', key: 'pref:lang', metadata: { a: 1 }, expiresAt: null });
    expect(r.headers['x-request-id']).toBeTruthy();
    const again = await post({ key: 'pref:lang', content: 'prefers Rust', apiKeyId: 'k1', metadata: { b: 2 }, expiresAt: '2099-01-01T00:00:00Z' });
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(r.body.id);
    expect(again.body.memory.metadata).toEqual({ a: 1, b: 2 });
    expect(again.body.memory.expiresAt).toBe('2099-01-01T00:00:00.000Z');
  });

  it('GET /:id, PUT, history, DELETE and 404s', async () => {
    const id = (await post({ key: 'x', content: 'one', apiKeyId: 'k2' })).body.id;
    expect((await request(t.app).get(`/api/memory/${id}`).set(t.auth)).body.memory.content).toBe('one');
    const put = await request(t.app).put(`/api/memory/${id}`).set(t.auth).send({ content: 'two', type: 'semantic' });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ success: true, memory: { content: 'two', type: 'semantic' } });
    const hist = await request(t.app).get(`/api/memory/${id}/history`).set(t.auth);
    expect(hist.body.events.map((e: { op: string }) => e.op)).toEqual(['create', 'update']);
    expect((await request(t.app).delete(`/api/memory/${id}`).set(t.auth)).body).toEqual({ success: true });
    expect((await request(t.app).get(`/api/memory/${id}`).set(t.auth)).status).toBe(404);
    expect((await request(t.app).delete(`/api/memory/${id}`).set(t.auth)).status).toBe(404);
    const put404 = await request(t.app).put(`/api/memory/${id}`).set(t.auth).send({ content: 'x' });
    expect(put404.status).toBe(404);
    expect(put404.body).toMatchObject({ error: { code: 'not_found' }, requestId: expect.any(String) });
    // History outlives the row.
    expect((await request(t.app).get(`/api/memory/${id}/history`).set(t.auth)).body.events.map((e: { op: string }) => e.op)).toEqual([
      'create',
      'update',
      'delete',
    ]);
  });

  it('PUT that changes nothing writes nothing (no history row, updated_at unchanged); one real change still does', async () => {
    const created = (await post({ key: 'same', content: 'likes tea', apiKeyId: 'k4', sessionId: 's4', metadata: { a: 1, b: [2, 3] }, expiresAt: '2099-01-01T00:00:00Z' })).body.memory;
    const before = counts();
    const same = [
      { content: 'likes tea' },
      { content: 'likes tea', type: 'factual', key: 'same' },
      { metadata: { b: [2, 3], a: 1 } },
      { expiresAt: '2099-01-01T00:00:00.000Z' },
      { expiresAt: Date.parse('2099-01-01T00:00:00Z') },
    ];
    for (const body of same) {
      const r = await request(t.app).put(`/api/memory/${created.id}`).set(t.auth).send(body);
      expect({ body, status: r.status }).toEqual({ body, status: 200 });
      expect(r.body.memory).toEqual(created);
    }
    expect(counts()).toEqual(before);
    const hist = async () => (await request(t.app).get(`/api/memory/${created.id}/history`).set(t.auth)).body.events.map((e: { op: string }) => e.op);
    expect(await hist()).toEqual(['create']);
    // Metadata is replaced by a PUT: a subset is a change.
    const changed = await request(t.app).put(`/api/memory/${created.id}`).set(t.auth).send({ metadata: { a: 1 } });
    expect(changed.body.memory.metadata).toEqual({ a: 1 });
    expect(await hist()).toEqual(['create', 'update']);
  });

  it('PUT that takes another memory’s key is a 409 and changes nothing', async () => {
    await post({ key: 'a', content: 'A', apiKeyId: 'k3' });
    const b = (await post({ key: 'b', content: 'B', apiKeyId: 'k3' })).body.id;
    const before = counts();
    const r = await request(t.app).put(`/api/memory/${b}`).set(t.auth).send({ key: 'a' });
    expect(r.status).toBe(409);
    expect(r.body.error.code).toBe('conflict');
    expect(counts()).toEqual(before);
  });

  it('every validation failure is a 400 with the zod path and changes nothing', async () => {
    const id = (await post({ key: 'v', content: 'valid', apiKeyId: 'k4' })).body.id;
    const before = counts();
    const cases: [string, () => request.Test, string][] = [
      ['missing content', () => post({ key: 'k' }), 'body.content'],
      ['empty content', () => post({ key: 'k', content: '   ' }), 'body.content'],
      ['missing key', () => post({ content: 'c' }), 'body.key'],
      ['bad type', () => post({ key: 'k', content: 'c', type: 'gossip' }), 'body.type'],
      ['metadata not an object', () => post({ key: 'k', content: 'c', metadata: [1] }), 'body.metadata'],
      ['bad expiry', () => post({ key: 'k', content: 'c', expiresAt: 'tomorrow' }), 'body.expiresAt'],
      ['content too long', () => post({ key: 'k', content: 'x'.repeat(70_000) }), 'body.content'],
      ['PUT unknown field', () => request(t.app).put(`/api/memory/${id}`).set(t.auth).send({ content: 'x', apiKeyId: 'steal' }), 'body'],
      ['PUT empty body', () => request(t.app).put(`/api/memory/${id}`).set(t.auth).send({}), 'body'],
      ['PUT bad type', () => request(t.app).put(`/api/memory/${id}`).set(t.auth).send({ type: 1 }), 'body.type'],
      ['list limit 0', () => request(t.app).get('/api/memory?limit=0').set(t.auth), 'query.limit'],
      ['list limit 201', () => request(t.app).get('/api/memory?limit=201').set(t.auth), 'query.limit'],
      ['list page 0', () => request(t.app).get('/api/memory?page=0').set(t.auth), 'query.page'],
      ['list offset -1', () => request(t.app).get('/api/memory?offset=-1').set(t.auth), 'query.offset'],
      ['list page abc', () => request(t.app).get('/api/memory?page=abc').set(t.auth), 'query.page'],
      ['list bad type', () => request(t.app).get('/api/memory?type=x').set(t.auth), 'query.type'],
    ];
    for (const [name, call, path] of cases) {
      const r = await call();
      expect({ name, status: r.status }).toEqual({ name, status: 400 });
      expect(r.body.error.code).toBe('validation_failed');
      expect(r.body.error.details.map((d: { path: string }) => d.path)).toContain(path);
      expect(r.body.requestId).toEqual(expect.any(String));
      expect(JSON.stringify(r.body)).not.toMatch(/at .*\.ts:\d+/);
    }
    expect(counts()).toEqual(before);
  });

  it('malformed JSON is a 400 and an oversized body a 413', async () => {
    const bad = await request(t.app).post('/api/memory').set(t.auth).set('content-type', 'application/json').send('{"key": ');
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_json');
    const big = await request(t.app)
      .post('/api/memory')
      .set(t.auth)
      .send({ key: 'k', content: 'x'.repeat(t.env.BODY_LIMIT_BYTES + 10) });
    expect(big.status).toBe(413);
    expect(big.body.error.code).toBe('payload_too_large');
  });

  it('lists with pagination: offset wins over page, page derived, totals and stats', async () => {
    for (let i = 0; i < 12; i++) await post({ key: `p${i}`, content: `item ${i}`, apiKeyId: 'page', type: i < 4 ? 'episodic' : 'factual' });
    const p2 = await request(t.app).get('/api/memory?apiKeyId=page&limit=5&page=2').set(t.auth);
    expect(p2.body).toMatchObject({ total: 12, page: 2, limit: 5, totalPages: 3 });
    expect(p2.body.data.map((m: { key: string }) => m.key)).toEqual(['p6', 'p5', 'p4', 'p3', 'p2']);
    const off = await request(t.app).get('/api/memory?apiKeyId=page&limit=5&page=1&offset=10').set(t.auth);
    expect(off.body.page).toBe(3);
    expect(off.body.data.map((m: { key: string }) => m.key)).toEqual(['p1', 'p0']);
    const past = await request(t.app).get('/api/memory?apiKeyId=page&limit=5&page=9').set(t.auth);
    expect(past.body.data).toEqual([]);
    expect(past.body.total).toBe(12);
    expect(p2.body.stats).toMatchObject({ total: 12, byType: { episodic: 4, factual: 8 }, tokensUsed: expect.any(Number), hitRate: expect.any(Number) });
    expect(p2.body.stats.cacheStats).toMatchObject({ hits: expect.any(Number), misses: expect.any(Number) });
    const q = await request(t.app).get('/api/memory?apiKeyId=page&q=ITEM%2011').set(t.auth);
    expect(q.body.data.map((m: { key: string }) => m.key)).toEqual(['p11']);
    const typed = await request(t.app).get('/api/memory?apiKeyId=page&type=episodic').set(t.auth);
    expect(typed.body.total).toBe(4);
    // The read cache is real: a repeated GET is a hit, reported in the stats.
    const id = q.body.data[0].id;
    await request(t.app).get(`/api/memory/${id}`).set(t.auth);
    await request(t.app).get(`/api/memory/${id}`).set(t.auth);
    const stats = (await request(t.app).get('/api/memory?limit=1').set(t.auth)).body.stats;
    expect(stats.cacheStats.hits).toBeGreaterThanOrEqual(1);
    expect(stats.hitRate).toBeGreaterThan(0);
  });

  it('stats describe exactly the filtered set: total, byType and tokensUsed follow q, type, sessionId and apiKeyId', async () => {
    // tokens = ceil(chars / 4)
    await post({ key: 's1', content: 'alpha one', apiKeyId: 'stats', type: 'factual', sessionId: 'x' }); // 3
    await post({ key: 's2', content: 'beta two two', apiKeyId: 'stats', type: 'episodic' }); // 3
    await post({ key: 's3', content: 'gamma three three', apiKeyId: 'stats', type: 'factual', sessionId: 'y' }); // 5
    await post({ key: 's4', content: 'alpha elsewhere', apiKeyId: 'stats-other', type: 'factual' }); // 4
    const stats = async (qs: string) => {
      const r = await request(t.app).get(`/api/memory?${qs}`).set(t.auth);
      expect(r.status).toBe(200);
      // Every case fits one page: the stats must add up to exactly what is listed.
      expect(r.body.stats.tokensUsed).toBe(r.body.data.reduce((a: number, m: { content: string }) => a + Math.ceil(m.content.length / 4), 0));
      return { total: r.body.total, ...r.body.stats, hitRate: undefined, cacheStats: undefined };
    };
    expect(await stats('q=OR%20AND')).toEqual({ total: 0, byType: {}, tokensUsed: 0 });
    expect(await stats('apiKeyId=stats')).toEqual({ total: 3, byType: { factual: 2, episodic: 1 }, tokensUsed: 11 });
    expect(await stats('apiKeyId=stats&type=factual')).toEqual({ total: 2, byType: { factual: 2 }, tokensUsed: 8 });
    expect(await stats('apiKeyId=stats&sessionId=y')).toEqual({ total: 1, byType: { factual: 1 }, tokensUsed: 5 });
    expect(await stats('q=ALPHA')).toEqual({ total: 2, byType: { factual: 2 }, tokensUsed: 7 });
    expect(await stats('apiKeyId=stats&q=alpha')).toEqual({ total: 1, byType: { factual: 1 }, tokensUsed: 3 });
  });

  it('health round-trips the store and cleans up after itself', async () => {
    const before = counts();
    const r = await request(t.app).get('/api/memory/health').set(t.auth);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ working: true, latencyMs: expect.any(Number) });
    expect(counts()).toEqual(before);
  });
});

describe('/api/settings/memory', () => {
  let t: TestApi;
  beforeAll(() => {
    t = buildTestApi();
  });
  afterAll(() => t.close());

  it('returns the original defaults (memory off)', async () => {
    const r = await request(t.app).get('/api/settings/memory').set(t.auth);
    expect(r.body).toMatchObject({
      enabled: false,
      maxTokens: 2000,
      retentionDays: 30,
      strategy: 'hybrid',
      skillsEnabled: true,
      embeddingSource: 'auto',
      embeddingProviderModel: null,
      vectorStore: 'auto',
      primaryBackend: 'sqlite',
      fallbackBackends: [],
    });
  });

  it('stores under the original keys and normalises what it reads', async () => {
    const r = await request(t.app).put('/api/settings/memory').set(t.auth).send({ enabled: true, maxTokens: 500, strategy: 'recent', skillsEnabled: false, embeddingProviderModel: '' });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ enabled: true, maxTokens: 500, strategy: 'recent', skillsEnabled: false, embeddingProviderModel: null });
    const raw = t.ctx.settings.raw();
    expect(raw).toMatchObject({ memoryEnabled: true, memoryMaxTokens: 500, memoryStrategy: 'recent', skillsEnabled: false });
    // Values written by another tool are clamped on read (the original's normalisation).
    t.ctx.settings.setRaw({ memoryMaxTokens: 20001, memoryRetentionDays: 0, memoryEnabled: 'yes', memoryStrategy: 'weird' });
    const n = (await request(t.app).get('/api/settings/memory').set(t.auth)).body;
    expect(n).toMatchObject({ maxTokens: 16000, retentionDays: 1, enabled: false, strategy: 'hybrid' });
  });

  it('PUT is strict and range-checked: 400 with the path, nothing stored', async () => {
    const before = JSON.stringify(t.ctx.settings.raw());
    for (const [body, path] of [
      [{ maxTokens: 16001 }, 'body.maxTokens'],
      [{ maxTokens: -1 }, 'body.maxTokens'],
      [{ retentionDays: 0 }, 'body.retentionDays'],
      [{ retentionDays: 366 }, 'body.retentionDays'],
      [{ strategy: 'exact' }, 'body.strategy'],
      [{ enabled: 'true' }, 'body.enabled'],
      [{ unknownField: 1 }, 'body'],
      [{ vectorStore: 'pinecone' }, 'body.vectorStore'],
    ] as const) {
      const r = await request(t.app).put('/api/settings/memory').set(t.auth).send(body);
      expect(r.status).toBe(400);
      expect(r.body.error.details.map((d: { path: string }) => d.path)).toContain(path);
    }
    expect(JSON.stringify(t.ctx.settings.raw())).toBe(before);
  });
});
