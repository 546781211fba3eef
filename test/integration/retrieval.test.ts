import path from 'node:path';
import request from 'supertest';
import { AccessRecorder } from '../../src/memory/access-recorder';
import { Reranker } from '../../src/memory/rerank';
import { RetrievalService } from '../../src/memory/retrieval.service';
import { startFakeRerankServer } from '../helpers/fake-rerank-server';
import type { RetrievalStrategy, RetrieveOptions } from '../../src/memory/retrieval.types';
import { startWorker, type RunningWorker } from '../../workers/main';
import { memoryInput } from '../factories';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, tempDir, testEnv } from '../helpers/env';
import { topicModelSpec, writeModel2VecFolder } from '../helpers/model-fixtures';
import { waitUntil } from '../helpers/wait';

const api = { source: 'api' as const };
const opts = (o: Partial<RetrieveOptions> = {}): RetrieveOptions => ({ strategy: 'hybrid', maxTokens: 2000, retentionDays: 30, ...o });

const SPECIAL = [
  '"quoted phrase"',
  'C++ language',
  'Johnson & Johnson',
  'dash-separated-query',
  'parens(test)',
  'asterisk*wildcard',
  "single'quote",
  'hello OR (world) AND "quoted"',
  'NEAR(cat dog)',
  'content:cat',
  '^cat',
  '*',
  '"',
  '(((',
  'cat" OR "1"="1',
  '',
  '   ',
  '\u0000\u001f',
];

describe('retrieval', () => {
  let t: TestApi;
  let w: RunningWorker;
  const folder = writeModel2VecFolder(path.join(tempDir('models'), 'topics'), topicModelSpec(16, 40));

  beforeAll(async () => {
    const env = testEnv({ MEMORY_STATIC_MODEL: folder, REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0' });
    t = buildTestApi(env);
    w = await startWorker(env, silentLog());
    const m = (apiKeyId: string, key: string, content: string, extra: Partial<Parameters<typeof memoryInput>[0]> = {}) =>
      t.ctx.memory.create(memoryInput({ apiKeyId, key, content, ...extra }), api);
    // The labelled fixture (tenant A).
    m('A', 'cat', 'my cat sleeps on the sofa');
    m('A', 'pizza', 'pizza with cheese for lunch');
    m('A', 'python', 'python compiler bug in the build');
    m('A', 'snow', 'snow and storm expected tomorrow');
    m('A', 'ticket', 'ticket zx81 assigned to the dog team and a big backlog of filler0 filler1 filler2 work');
    m('A', 'order', 'order ab12 contains pasta and many filler3 filler4 filler5 items');
    // Another tenant with look-alike content.
    m('B', 'cat', 'my cat sleeps on the sofa (tenant B)');
    m('B', 'ticket', 'ticket zx81 for tenant B');
    t.ctx.settings.updateMemory({ embeddingSource: 'static', staticEnabled: true });
    await t.ctx.queues.enqueue('reindex', { force: false, trigger: 'api' });
    // 7 vectors: tenant B's ticket has no word the fixture model knows (a zero vector is never stored; keywords serve it).
    await waitUntil(() => t.ctx.vectors.stats().needsReindex === 0 && t.ctx.vectors.stats().rowCount === 7, 20_000, 'index built');
  });
  afterAll(async () => {
    await w.stop();
    await t.close();
  });

  const keys = async (apiKeyId: string | null, o: Partial<RetrieveOptions>) => (await t.ctx.retrieval.retrieve(apiKeyId, opts(o), { preview: true })).items.map((i) => i.memory.key);

  it('semantic and hybrid put the most relevant first, without duplicates, and only the caller’s rows', async () => {
    for (const strategy of ['semantic', 'hybrid'] as RetrievalStrategy[]) {
      const r = await t.ctx.retrieval.retrieve('A', opts({ strategy, query: 'kitten' }), { preview: true });
      expect(r.items[0].memory.key).toBe('cat');
      expect(new Set(r.items.map((i) => i.memory.id)).size).toBe(r.items.length);
      expect(r.items.every((i) => i.memory.apiKeyId === 'A')).toBe(true);
      expect(r.resolution).toMatchObject({ embeddingSource: 'static', vectorStore: 'sqlite-vec', fallbackReason: null });
    }
  });

  it("one key's query never warms the embedding cache for another key (a hit's speed would tell it what was asked)", async () => {
    const query = 'kitten naps in the sun today';
    const hits = () => t.ctx.embedding.cacheStats().hits;
    await t.ctx.retrieval.retrieve('A', opts({ strategy: 'hybrid', query }), { preview: true });
    const before = hits();
    await t.ctx.retrieval.retrieve('B', opts({ strategy: 'hybrid', query }), { preview: true });
    expect(hits()).toBe(before);
    await t.ctx.retrieval.retrieve('A', opts({ strategy: 'hybrid', query }), { preview: true });
    expect(hits()).toBe(before + 1);
  });

  it('hybrid beats both single tiers on a small labelled fixture (mean reciprocal rank)', async () => {
    const labelled: [string, string][] = [
      ['kitten', 'cat'], // vector only: no keyword overlap
      ['zx81 puppy', 'ticket'], // keyword hits the id, vector prefers the plain animal memory
      ['ab12 bread', 'order'], // keyword hits the id, vector prefers the plain food memory
      ['compiler', 'python'],
      ['storm', 'snow'],
    ];
    const mrr = async (run: (q: string) => Promise<string[]>) => {
      let sum = 0;
      for (const [q, rel] of labelled) {
        const ranked = await run(q);
        const pos = ranked.indexOf(rel);
        sum += pos >= 0 ? 1 / (pos + 1) : 0;
      }
      return sum / labelled.length;
    };
    const vector = await mrr((q) => keys('A', { strategy: 'semantic', query: q }));
    // The keyword tier's own ranking: hybrid with the vector tier's weight at 0.
    const keyword = await mrr((q) => keys('A', { strategy: 'hybrid', query: q, fusion: { vectorWeight: 0 } }));
    const hybrid = await mrr((q) => keys('A', { strategy: 'hybrid', query: q }));
    expect(hybrid).toBeGreaterThan(vector);
    expect(hybrid).toBeGreaterThan(keyword);
  });

  it('exact is newest first; with a query only relevant rows, over all rows (not just the newest 100)', async () => {
    const r = await keys('A', { strategy: 'exact' });
    expect(r.slice(0, 2)).toEqual(['order', 'ticket']);
    for (let i = 0; i < 150; i++) t.ctx.memory.create(memoryInput({ apiKeyId: 'C', key: `noise${i}`, content: `noise row ${i}` }), api);
    t.ctx.memory.create(memoryInput({ apiKeyId: 'C', key: 'needle', content: 'the needle is older' }), api);
    t.ctx.db.db.prepare("UPDATE memories SET created_at = '2000-01-01T00:00:00.000Z' WHERE api_key_id = 'C' AND key = 'needle'").run();
    // The premise: by recency the needle is the last of 151 rows, far behind the newest 100.
    const byRecency = await keys('C', { strategy: 'exact', retentionDays: 365 });
    expect(byRecency).toHaveLength(151);
    expect(byRecency.indexOf('needle')).toBe(150);
    expect(await keys('C', { strategy: 'exact', query: 'needle', retentionDays: 365 })).toEqual(['needle']);
  });

  it("exact reports each row's keyword score over its own key's rows: another key's writes never move it", async () => {
    t.ctx.memory.create(memoryInput({ apiKeyId: 'X1', key: 'sky', content: 'the sky is blue over the bay' }), api);
    // Enough rows that a word in one of them weighs something (FTS5's idf is ~0 for a word in half the rows).
    for (const [key, content] of [['sea', 'the sea is green today'], ['tea', 'likes green tea'], ['run', 'runs on sundays'], ['car', 'drives a red car']]) {
      t.ctx.memory.create(memoryInput({ apiKeyId: 'X1', key, content }), api);
    }
    const scoreOf = async (strategy: RetrievalStrategy) =>
      (await t.ctx.retrieval.retrieve('X1', opts({ strategy, query: 'blue bay' }), { preview: true })).items.find((i) => i.memory.key === 'sky')!.ftsScore;
    const before = await scoreOf('exact');
    expect(before).toBeGreaterThan(0);
    // The key's own bm25, as the keyword tier reports it (hybrid with the vector tier at weight 0 ranks by keywords).
    const keywordTier = (await t.ctx.retrieval.retrieve('X1', opts({ strategy: 'hybrid', query: 'blue bay', fusion: { vectorWeight: 0 } }), { preview: true })).items;
    expect(keywordTier.find((i) => i.memory.key === 'sky')!.ftsScore).toBe(before);
    // Another key makes "blue" common: FTS5's global statistics move; this key's must not.
    for (let i = 0; i < 60; i++) t.ctx.memory.create(memoryInput({ apiKeyId: 'X2', key: `b${i}`, content: `blue item ${i}` }), api);
    expect(await scoreOf('exact')).toBe(before);
    // The key's own writes do move it (its statistics changed).
    t.ctx.memory.create(memoryInput({ apiKeyId: 'X1', key: 'blue2', content: 'blue shoes' }), api);
    expect(await scoreOf('exact')).not.toBe(before);
  });

  it('special-character queries never throw and never return another tenant’s rows', async () => {
    // Queries holding the word "cat" match B's cat row and A's look-alike: they must find B's, and only B's.
    const catQueries = new Set(['NEAR(cat dog)', 'content:cat', '^cat', 'cat" OR "1"="1']);
    for (const q of SPECIAL) {
      for (const strategy of ['exact', 'semantic', 'hybrid'] as RetrievalStrategy[]) {
        const r = await t.ctx.retrieval.retrieve('B', opts({ strategy, query: q }), { preview: true });
        const got = { q, strategy, tenants: [...new Set(r.items.map((i) => i.memory.apiKeyId))] };
        expect(got).toEqual({ q, strategy, tenants: r.items.length ? ['B'] : [] });
        if (catQueries.has(q)) expect({ q, strategy, first: r.items[0]?.memory.key }).toEqual({ q, strategy, first: 'cat' });
      }
    }
    // The same queries do reach A's rows when A asks: the tenant filter, not the query, kept them out.
    expect(await keys('A', { strategy: 'exact', query: 'content:cat' })).toEqual(['cat']);
    expect(await keys('B', { strategy: 'hybrid', query: 'cat" OR "1"="1' })).toEqual(['cat']);
  });

  it('a memory past expires_at or outside the retention window is never returned by any tier', async () => {
    const past = new Date(Date.now() - 1000).toISOString();
    t.ctx.memory.create(memoryInput({ apiKeyId: 'D', key: 'expired', content: 'my kitten loves the rain', expiresAt: past }), api);
    const old = t.ctx.memory.create(memoryInput({ apiKeyId: 'D', key: 'old', content: 'my kitten loves the snow' }), api).memory;
    t.ctx.memory.create(memoryInput({ apiKeyId: 'D', key: 'fresh', content: 'my kitten loves the cloud' }), api);
    await t.ctx.queues.enqueue('reindex', { force: false, trigger: 'api' });
    // All three get vectors (the expired one too): the vector tier itself must filter them.
    const vectorsOfD = () => (t.ctx.db.db.prepare("SELECT count(*) AS n FROM vec_memories WHERE api_key_id = 'D'").get() as { n: number }).n;
    await waitUntil(() => vectorsOfD() === 3, 20_000, 'embedded');
    t.ctx.db.db.prepare("UPDATE memories SET created_at = '2001-01-01T00:00:00.000Z', updated_at = '2001-01-01T00:00:00.000Z' WHERE id = ?").run(old.id);
    for (const strategy of ['exact', 'semantic', 'hybrid'] as RetrievalStrategy[]) {
      for (const query of ['kitten', '', 'loves']) {
        const got = await keys('D', { strategy, query, retentionDays: 30 });
        expect({ strategy, query, got }).toEqual({ strategy, query, got: ['fresh'] });
      }
    }
  });

  it('session scope restricts to the session', async () => {
    t.ctx.memory.create(memoryInput({ apiKeyId: 'E', key: 's1', content: 'cat in session one', sessionId: 's1' }), api);
    t.ctx.memory.create(memoryInput({ apiKeyId: 'E', key: 's2', content: 'cat in session two', sessionId: 's2' }), api);
    expect(await keys('E', { strategy: 'hybrid', query: 'cat', scope: 'session', sessionId: 's2' })).toEqual(['s2']);
    expect((await keys('E', { strategy: 'hybrid', query: 'cat' })).sort()).toEqual(['s1', 's2']);
  });

  it('the budget is never exceeded; a single oversize best item is truncated to fit', async () => {
    for (let i = 0; i < 40; i++) t.ctx.memory.create(memoryInput({ apiKeyId: 'F', key: `b${i}`, content: `budget cat ${'x'.repeat((i * 37) % 300)}` }), api);
    t.ctx.memory.create(memoryInput({ apiKeyId: 'G', key: 'huge', content: `huge cat ${'y'.repeat(4000)}` }), api);
    for (const maxTokens of [1, 5, 17, 50, 123, 400, 2000]) {
      for (const strategy of ['exact', 'semantic', 'hybrid'] as RetrievalStrategy[]) {
        const r = await t.ctx.retrieval.retrieve('F', opts({ strategy, query: 'budget cat', maxTokens }), { preview: true });
        expect(r.totalTokens).toBeLessThanOrEqual(maxTokens);
        expect(r.totalTokens).toBe(r.items.reduce((a, i) => a + Math.ceil(i.memory.content.length / 4), 0));
      }
    }
    const huge = await t.ctx.retrieval.retrieve('G', opts({ strategy: 'exact', query: 'huge', maxTokens: 10 }), { preview: true });
    expect(huge.items).toHaveLength(1);
    expect(huge.items[0].truncated).toBe(true);
    expect(huge.totalTokens).toBeLessThanOrEqual(10);
  });

  it('drops a candidate whose normalised content repeats a higher-ranked one, before the budget walk', async () => {
    const m = (key: string, content: string) => t.ctx.memory.create(memoryInput({ apiKeyId: 'P', key, content }), api);
    m('other', 'The user likes black tea'); // 6 tokens, oldest
    m('d1', 'The user likes green tea'); // 6 tokens
    m('d2', '  the user   LIKES green\ttea '); // 8 tokens
    m('d3', 'The USER likes green tea'); // 6 tokens, newest
    // exact ranks newest first: d3 d2 d1 other. A budget of 12 fits two 6-token items: d1 must not take other's place.
    const r = await t.ctx.retrieval.retrieve('P', opts({ strategy: 'exact', query: 'green tea', maxTokens: 12 }), { preview: true });
    expect(r.items.map((i) => i.memory.key)).toEqual(['d3', 'other']);
    expect(r.totalTokens).toBe(12);
    for (const strategy of ['semantic', 'hybrid'] as RetrievalStrategy[]) {
      const all = await t.ctx.retrieval.retrieve('P', opts({ strategy, query: 'green tea' }), { preview: true });
      const texts = all.items.map((i) => i.memory.content.trim().replace(/\s+/g, ' ').toLowerCase());
      expect({ strategy, texts: [...texts].sort() }).toEqual({ strategy, texts: ['the user likes black tea', 'the user likes green tea'] });
    }
  });

  it('keyword relevance uses FTS5’s own tokens: no folding beyond unicode61 (й is not и)', async () => {
    // "иод" (not a word) matches "йод" (iodine) only if something folds й to и as NFKD does; unicode61 does not.
    t.ctx.memory.create(memoryInput({ apiKeyId: 'R', key: 'false', content: 'кот иод иод иод' }), api);
    t.ctx.memory.create(memoryInput({ apiKeyId: 'R', key: 'true', content: 'йод and a кот' }), api);
    const r = await t.ctx.retrieval.retrieve('R', opts({ strategy: 'hybrid', query: 'йод кот' }), { preview: true });
    expect(r.resolution.fallbackReason).toEqual(expect.any(String));
    // bm25 orders the keyword tier: "true" holds both words, "false" only кот (its "иод" is another word).
    expect(r.items.map((i) => i.memory.key)).toEqual(['true', 'false']);
    // Latin diacritics and case still match, as in FTS5 (remove_diacritics 2).
    t.ctx.memory.create(memoryInput({ apiKeyId: 'R', key: 'cafe', content: 'Naïve CAFÉ owner' }), api);
    expect(await keys('R', { strategy: 'exact', query: 'naive cafe' })).toEqual(['cafe']);
  });

  it('falls back to keywords, saying why, when the vector tier is unavailable or empty', async () => {
    t.ctx.memory.create(memoryInput({ apiKeyId: 'H', key: 'h', content: 'storm warning for tonight' }), api);
    // Not embedded yet for this tenant: no vectors → keywords, with a reason.
    const r = await t.ctx.retrieval.retrieve('H', opts({ strategy: 'semantic', query: 'storm' }), { preview: true });
    expect(r.items.map((i) => i.memory.key)).toEqual(['h']);
    const settingsOff = new RetrievalService({
      ...(t.ctx.retrieval as unknown as { d: ConstructorParameters<typeof RetrievalService>[0] }).d,
      settings: { memory: () => ({ ...t.ctx.settings.memory(), embeddingSource: 'auto', staticEnabled: false }) } as never,
    });
    const off = await settingsOff.retrieve('A', opts({ strategy: 'hybrid', query: 'pizza' }), { preview: true });
    expect(off.items[0].memory.key).toBe('pizza');
    expect(off.resolution.fallbackReason).toEqual(expect.any(String));
    expect(off.resolution.embeddingSource).toBeNull();
  });

  it('records access through a job, not on the request path; previews record nothing', async () => {
    const deps = (t.ctx.retrieval as unknown as { d: ConstructorParameters<typeof RetrievalService>[0] }).d;
    // A recorder whose timer never fires here: what it holds is sent only by flush().
    const access = new AccessRecorder({ queues: t.ctx.queues, log: silentLog() }, { flushEveryMs: 600_000 });
    const svc = new RetrievalService({ ...deps, access });
    try {
      const count = () => t.ctx.memory.findByKey('A', 'pizza')!.accessCount;
      const before = count();
      await svc.retrieve('A', opts({ strategy: 'hybrid', query: 'pizza' }), { preview: true });
      expect(access.stats().recordedIds).toBe(0);
      const r = await svc.retrieve('A', opts({ strategy: 'hybrid', query: 'pizza' }));
      expect(r.items[0].memory.key).toBe('pizza');
      expect(access.stats()).toMatchObject({ recordedIds: r.items.length, pendingIds: r.items.length, jobs: 0 });
      // Retrieval only noted it; the row changes when the job runs.
      expect(count()).toBe(before);
      await access.flush();
      expect(access.stats()).toMatchObject({ pendingIds: 0, jobs: 1 });
      await waitUntil(() => count() === before + 1, 10_000, 'access recorded');
    } finally {
      await access.close();
    }
  });

  it('POST /api/memory/retrieve-preview has the original’s shape, no side effects, all tenants without apiKeyId', async () => {
    const r = await request(t.app).post('/api/memory/retrieve-preview').set(t.auth).send({ query: 'zx81', strategy: 'hybrid', limit: 5 });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ resolution: { strategyUsed: 'hybrid', rerankApplied: false, vectorStore: 'sqlite-vec' }, budgetMaxTokens: 2000 });
    expect(r.body.resolution.fallbackReason).toMatch(/per API key/);
    expect(r.body.memories.map((m: { apiKeyId: string }) => m.apiKeyId).sort()).toEqual(['A', 'B']);
    expect(r.body.memories[0]).toEqual(expect.objectContaining({ id: expect.any(String), type: 'factual', key: 'ticket', score: expect.any(Number), tokens: expect.any(Number), tier: 'fts5' }));
    expect(r.body.totalTokensUsed).toBe(r.body.memories.reduce((a: number, m: { tokens: number }) => a + m.tokens, 0));
    const one = await request(t.app).post('/api/memory/retrieve-preview').set(t.auth).send({ query: 'kitten', apiKeyId: 'A', limit: 1 });
    expect(one.body.memories).toHaveLength(1);
    expect(one.body.memories[0]).toMatchObject({ key: 'cat', tier: 'hybrid-convex', vecScore: expect.any(Number) });
    expect((await request(t.app).post('/api/memory/retrieve-preview').set(t.auth).send({ query: '' })).status).toBe(400);
    expect((await request(t.app).post('/api/memory/retrieve-preview').set(t.auth).send({ query: 'x', limit: 101 })).status).toBe(400);
    const bad = await request(t.app).post('/api/memory/retrieve-preview').set(t.auth).send({ query: 'x', extra: 1 });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).not.toMatch(/\.ts:\d+/);
  });

  it('rerank failure keeps the order and says why; an empty query skips it', async () => {
    t.ctx.settings.updateMemory({ rerankEnabled: true, rerankProviderModel: 'cohere/rerank-v3.5' });
    try {
      const plain = await t.ctx.retrieval.retrieve('A', opts({ strategy: 'hybrid', query: 'cat pizza' }), { preview: true });
      expect(plain.items.length).toBeGreaterThan(1);
      const r = await t.ctx.retrieval.retrieve('A', opts({ strategy: 'hybrid', query: 'cat pizza' }), { preview: true });
      expect(r.resolution.rerankApplied).toBe(false);
      expect(r.resolution.rerankReason).toBe('no_key');
      expect(r.items.map((i) => i.memory.id)).toEqual(plain.items.map((i) => i.memory.id));
      const empty = await t.ctx.retrieval.retrieve('A', opts({ strategy: 'hybrid', query: '' }), { preview: true });
      expect(empty.resolution.rerankApplied).toBe(false);
      expect(empty.resolution.rerankReason).toBeNull();
    } finally {
      t.ctx.settings.updateMemory({ rerankEnabled: false, rerankProviderModel: null });
    }
  });

  it('rerank through a local rerank server: reorders before the budget walk; 401 and timeout keep the order and say why', async () => {
    const fake = await startFakeRerankServer();
    const deps = (t.ctx.retrieval as unknown as { d: ConstructorParameters<typeof RetrievalService>[0] }).d;
    const svc = new RetrievalService({
      ...deps,
      reranker: new Reranker({ ...t.env, MEMORY_RERANK_TIMEOUT_MS: 300 }, { baseUrls: { custom: fake.baseUrl } }),
      settings: { memory: () => ({ ...t.ctx.settings.memory(), rerankEnabled: true, rerankProviderModel: 'custom/bge-reranker' }) } as never,
    });
    try {
      const q = opts({ strategy: 'hybrid', query: 'cat pizza' });
      const plain = (await t.ctx.retrieval.retrieve('A', q, { preview: true })).items.map((i) => i.memory.key);
      expect(plain.length).toBeGreaterThan(1);
      // The fake scores by word overlap with "pizza lunch": the pizza memory must come first.
      fake.behave({ kind: 'results', results: plain.map((k, index) => ({ index, relevance_score: k === 'pizza' ? 0.99 : 0.1 / (index + 1) })) });
      const ranked = await svc.retrieve('A', q, { preview: true });
      expect(ranked.resolution).toMatchObject({ rerankApplied: true, rerankReason: null });
      expect(ranked.items[0].memory.key).toBe('pizza');
      expect(ranked.items[0].score).toBeCloseTo(0.99);
      expect(fake.requests.at(-1)?.body).toMatchObject({ model: 'bge-reranker', query: 'cat pizza', top_n: plain.length });

      fake.behave({ kind: 'status', status: 401 });
      const unauth = await svc.retrieve('A', q, { preview: true });
      expect(unauth.resolution).toMatchObject({ rerankApplied: false, rerankReason: 'http_401' });
      expect(unauth.items.map((i) => i.memory.key)).toEqual(plain);

      // A server that never answers: only the reranker's own timeout (300 ms) ends the call, and it hangs up.
      fake.behave({ kind: 'delay', ms: 600_000 });
      const slow = await svc.retrieve('A', q, { preview: true });
      expect(slow.resolution).toMatchObject({ rerankApplied: false, rerankReason: 'timeout' });
      expect(slow.items.map((i) => i.memory.key)).toEqual(plain);
      await waitUntil(() => fake.requests.at(-1)?.closedEarly, 5000, 'the rerank request to be closed');
    } finally {
      await fake.close();
    }
  });
});
