/**
 * Issue #10: the keyword tier ranks by FTS5 bm25 with every filter applied before the ranking, and
 * hybrid fuses by the configured fusion (convex by default, RRF on request), validated with zod paths.
 */
import path from 'node:path';
import request from 'supertest';
import { RetrievalRepository } from '../../src/memory/retrieval.repository';
import { RetrievalService } from '../../src/memory/retrieval.service';
import type { RetrievalStrategy, RetrieveOptions } from '../../src/memory/retrieval.types';
import { startWorker, type RunningWorker } from '../../workers/main';
import { memoryInput } from '../factories';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, tempDir, testEnv } from '../helpers/env';
import { topicModelSpec, writeModel2VecFolder } from '../helpers/model-fixtures';
import { waitUntil } from '../helpers/wait';

const api = { source: 'api' as const };
const opts = (o: Partial<RetrieveOptions> = {}): RetrieveOptions => ({ strategy: 'hybrid', maxTokens: 16000, retentionDays: 30, ...o });
const PAST = () => new Date(Date.now() - 1000).toISOString();

describe('retrieval ranking (issue #10)', () => {
  let t: TestApi;
  let w: RunningWorker;
  /** The same service with no embedding source: every strategy but exact is the keyword tier alone. */
  let keywordOnly: RetrievalService;
  const folder = writeModel2VecFolder(path.join(tempDir('models'), 'topics'), topicModelSpec(16, 40));

  beforeAll(async () => {
    const env = testEnv({ MEMORY_STATIC_MODEL: folder, REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0' });
    t = buildTestApi(env);
    w = await startWorker(env, silentLog());
    t.ctx.memory.create(memoryInput({ apiKeyId: 'V', key: 'cat', content: 'my cat sleeps on the sofa' }), api);
    t.ctx.memory.create(memoryInput({ apiKeyId: 'V', key: 'pizza', content: 'pizza with cheese for lunch' }), api);
    t.ctx.memory.create(memoryInput({ apiKeyId: 'V', key: 'storm', content: 'snow and storm expected tomorrow' }), api);
    t.ctx.settings.updateMemory({ embeddingSource: 'static', staticEnabled: true });
    await t.ctx.queues.enqueue('reindex', { force: false, trigger: 'api' });
    await waitUntil(() => t.ctx.vectors.stats().needsReindex === 0 && t.ctx.vectors.stats().rowCount === 3, 20_000, 'index built');
    keywordOnly = new RetrievalService({
      ...(t.ctx.retrieval as unknown as { d: ConstructorParameters<typeof RetrievalService>[0] }).d,
      settings: { memory: () => ({ ...t.ctx.settings.memory(), embeddingSource: 'auto', staticEnabled: false }) } as never,
    });
  });
  afterAll(async () => {
    await w.stop();
    await t.close();
  });

  const kw = async (apiKeyId: string, o: Partial<RetrieveOptions>) => (await keywordOnly.retrieve(apiKeyId, opts(o), { preview: true })).items;

  it('a long memory repeating a word does not outrank a short one holding more of the query; the score stays the original relevance', async () => {
    const m = (key: string, content: string) => t.ctx.memory.create(memoryInput({ apiKeyId: 'K', key, content }), api);
    m('long', 'zorbex zorbex zorbex zorbex zorbex came up again in the weekly meeting notes about office plants, parking, the coffee machine and zorbex');
    m('short', 'the zorbex launch moved to friday');
    for (let i = 0; i < 20; i++) m(`other${i}`, `unrelated note number ${i} about the garden`);
    const items = await kw('K', { query: 'launch of zorbex' });
    expect(items.map((i) => i.memory.key)).toEqual(['short', 'long']);
    // The original's relevance (3 per occurrence) would have put "long" first: 18 against 6.
    expect(items.map((i) => i.score)).toEqual([6, 18]);
    expect(items[0].ftsScore!).toBeGreaterThan(items[1].ftsScore!);
    // exact keeps its own meaning: newest first, only rows holding a query word.
    expect((await t.ctx.retrieval.retrieve('K', opts({ strategy: 'exact', query: 'launch of zorbex' }), { preview: true })).items.map((i) => i.memory.key)).toEqual(['short', 'long']);
    const oldest = (await t.ctx.retrieval.retrieve('K', opts({ strategy: 'exact', query: 'zorbex' }), { preview: true })).items.map((i) => i.memory.key);
    expect(oldest).toEqual(['short', 'long']);
  });

  it('exact is the newest rows holding a query word even when more rows match than the keyword tier ranks (the newest is a weak bm25 match)', async () => {
    // 150 strong, short, older matches, then the newest one: long and mentioning the word once.
    for (let i = 0; i < 150; i++) t.ctx.memory.create(memoryInput({ apiKeyId: 'E', key: `old${i}`, content: `wombat wombat ${i}` }), api);
    await new Promise((r) => setTimeout(r, 5));
    t.ctx.memory.create(memoryInput({ apiKeyId: 'E', key: 'newest', content: 'the weekly notes ran long today and somewhere among the many other topics a wombat came up' }), api);
    const items = (await t.ctx.retrieval.retrieve('E', opts({ strategy: 'exact', query: 'wombat', limit: 3 }), { preview: true })).items;
    expect(items[0]!.memory.key).toBe('newest');
    expect(items.map((i) => i.memory.key)).toEqual(['newest', 'old149', 'old148']);
  });

  it('tenant, session, expiry and retention apply before the ranking: 450 better matches elsewhere never crowd out the one that counts', async () => {
    // The caller's only valid match is weak (one mention in a long row)…
    t.ctx.memory.create(memoryInput({ apiKeyId: 'A', key: 'weak', sessionId: 'mine', content: 'a long rambling note that mentions a quokka only once among very many other words about nothing' }), api);
    // …while 150 short rows of another tenant, 150 of the caller's in another session and 150 expired ones all match better,
    // more than the keyword tier's 100 candidates: a filter applied after a global top-N would leave nothing.
    for (let i = 0; i < 150; i++) {
      t.ctx.memory.create(memoryInput({ apiKeyId: 'B', key: `b${i}`, content: `quokka quokka ${i}` }), api);
      t.ctx.memory.create(memoryInput({ apiKeyId: 'A', key: `s${i}`, sessionId: 'other', content: `quokka quokka s${i}` }), api);
      t.ctx.memory.create(memoryInput({ apiKeyId: 'A', key: `x${i}`, sessionId: 'mine', content: `quokka quokka x${i}`, expiresAt: PAST() }), api);
    }
    // bm25's statistics (and the convex fusion's scale) come from the whole index: migration 0005's vocab view counts every row.
    expect(t.ctx.db.db.prepare("SELECT doc FROM memory_fts_vocab WHERE term = 'quokka'").get()).toEqual({ doc: 451 });
    // …and the row count is FTS5's own (its averages record), equal to the rows indexed, across inserts and deletes.
    const repo = new RetrievalRepository(t.ctx.db.db);
    const count = () => (t.ctx.db.db.prepare('SELECT count(*) AS n FROM memories').get() as { n: number }).n;
    expect(count()).toBeGreaterThan(127); // a varint of two bytes or more
    expect(repo.ftsRowCount()).toBe(count());
    expect(t.ctx.memory.delete(t.ctx.memory.findByKey('B', 'b0')!.id, api)).toBe(true);
    expect(repo.ftsRowCount()).toBe(count());
    const scoped = { query: 'quokka', scope: 'session' as const, sessionId: 'mine' };
    for (const strategy of ['exact', 'semantic', 'hybrid'] as RetrievalStrategy[]) {
      expect({ strategy, got: (await kw('A', { ...scoped, strategy })).map((i) => i.memory.key) }).toEqual({ strategy, got: ['weak'] });
      const viaApi = (await t.ctx.retrieval.retrieve('A', opts({ ...scoped, strategy }), { preview: true })).items.map((i) => i.memory.key);
      expect({ strategy, viaApi }).toEqual({ strategy, viaApi: ['weak'] });
    }
    // Without the session scope the caller's own session rows come first, and still never B's.
    const all = await kw('A', { query: 'quokka' });
    expect(all).toHaveLength(100);
    expect(all.every((i) => i.memory.apiKeyId === 'A' && i.memory.key?.startsWith('s'))).toBe(true);
    // Retention: back-date the caller's other-session rows out of a 30-day window; the weak row is found again.
    t.ctx.db.db.prepare("UPDATE memories SET created_at = '2001-01-01T00:00:00.000Z', updated_at = '2001-01-01T00:00:00.000Z' WHERE api_key_id = 'A' AND session_id = 'other'").run();
    expect((await kw('A', { query: 'quokka' })).map((i) => i.memory.key)).toEqual(['weak']);
  });

  it('a question made only of stop-words still matches (they are dropped only when something else is left)', async () => {
    t.ctx.memory.create(memoryInput({ apiKeyId: 'W', key: 'who', content: 'who are you' }), api);
    t.ctx.memory.create(memoryInput({ apiKeyId: 'W', key: 'none', content: 'unrelated words only' }), api);
    expect((await kw('W', { query: 'Who are you?' })).map((i) => i.memory.key)).toEqual(['who']);
  });

  it('hybrid fuses by the setting: convex by default, RRF on request, preview overrides win; resolution.fusion says which', async () => {
    const ask = async (body: Record<string, unknown>) => {
      const r = await request(t.app).post('/api/memory/retrieve-preview').set(t.auth).send({ query: 'kitten', apiKeyId: 'V', limit: 3, ...body });
      expect(r.status).toBe(200);
      return r.body as { memories: { key: string; tier: string }[]; resolution: { fusion: unknown } };
    };
    const def = await ask({});
    expect(def.resolution.fusion).toEqual({ method: 'convex', ftsWeight: 1, vectorWeight: 0.2 });
    expect(def.memories[0]).toMatchObject({ key: 'cat', tier: 'hybrid-convex' });
    // exact and semantic fuse nothing.
    expect((await ask({ strategy: 'semantic' })).resolution.fusion).toBeNull();
    expect((await ask({ strategy: 'exact' })).resolution.fusion).toBeNull();

    const put = await request(t.app).put('/api/settings/memory').set(t.auth).send({ hybridFusion: 'rrf' });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ hybridFusion: 'rrf', hybridFtsWeight: null, hybridVectorWeight: null });
    const rrf = await ask({});
    // Null weights: RRF takes the env's.
    expect(rrf.resolution.fusion).toEqual({ method: 'rrf', ftsWeight: t.env.MEMORY_RRF_FTS_WEIGHT, vectorWeight: t.env.MEMORY_RRF_VECTOR_WEIGHT });
    expect(rrf.memories[0]).toMatchObject({ key: 'cat', tier: 'hybrid-rrf' });
    // A preview override beats the settings; unset fields still come from them.
    expect((await ask({ hybridFusion: 'convex', ftsWeight: 3 })).resolution.fusion).toEqual({ method: 'convex', ftsWeight: 3, vectorWeight: 0.2 });
    expect((await request(t.app).put('/api/settings/memory').set(t.auth).send({ hybridFusion: 'convex', hybridVectorWeight: 2 })).status).toBe(200);
    expect((await ask({})).resolution.fusion).toEqual({ method: 'convex', ftsWeight: 1, vectorWeight: 2 });
    // Weight 0 takes a tier out: keyword only finds nothing for "kitten", vector only finds the cat.
    expect((await ask({ vectorWeight: 0 })).memories).toEqual([]);
    expect((await ask({ ftsWeight: 0 })).memories[0]).toMatchObject({ key: 'cat' });
    // A stored 0 plus an override 0 cannot silence both tiers: the method's defaults apply.
    expect((await request(t.app).put('/api/settings/memory').set(t.auth).send({ hybridFtsWeight: 0, hybridVectorWeight: null })).status).toBe(200);
    expect((await ask({ vectorWeight: 0 })).resolution.fusion).toEqual({ method: 'convex', ftsWeight: 1, vectorWeight: 0.2 });
    expect((await request(t.app).put('/api/settings/memory').set(t.auth).send({ hybridFusion: 'convex', hybridFtsWeight: null })).status).toBe(200);
  });

  it('fusion settings and preview overrides are validated: 400 with the zod path, nothing stored', async () => {
    const before = JSON.stringify(t.ctx.settings.raw());
    for (const [body, where] of [
      [{ hybridFusion: 'bm25' }, 'body.hybridFusion'],
      [{ hybridFusion: null }, 'body.hybridFusion'],
      [{ hybridFtsWeight: -0.5 }, 'body.hybridFtsWeight'],
      [{ hybridVectorWeight: 101 }, 'body.hybridVectorWeight'],
      [{ hybridVectorWeight: '1' }, 'body.hybridVectorWeight'],
      [{ hybridFtsWeight: 0, hybridVectorWeight: 0 }, 'body.hybridVectorWeight'],
    ] as const) {
      const r = await request(t.app).put('/api/settings/memory').set(t.auth).send(body);
      expect({ body, status: r.status }).toEqual({ body, status: 400 });
      expect(r.body.error.details.map((d: { path: string }) => d.path)).toContain(where);
    }
    expect(JSON.stringify(t.ctx.settings.raw())).toBe(before);
    // Both weights 0 is refused also when they meet across two PUTs (the stored one plus the new one).
    expect((await request(t.app).put('/api/settings/memory').set(t.auth).send({ hybridFtsWeight: 0 })).status).toBe(200);
    const stored = JSON.stringify(t.ctx.settings.raw());
    const second = await request(t.app).put('/api/settings/memory').set(t.auth).send({ hybridVectorWeight: 0 });
    expect(second.status).toBe(400);
    expect(second.body.error.details.map((d: { path: string }) => d.path)).toContain('body.hybridVectorWeight');
    expect(JSON.stringify(t.ctx.settings.raw())).toBe(stored);
    expect((await request(t.app).put('/api/settings/memory').set(t.auth).send({ hybridFtsWeight: null })).status).toBe(200);
    for (const [body, where] of [
      [{ hybridFusion: 'linear' }, 'body.hybridFusion'],
      [{ ftsWeight: -1 }, 'body.ftsWeight'],
      [{ vectorWeight: 1000 }, 'body.vectorWeight'],
      [{ ftsWeight: 0, vectorWeight: 0 }, 'body.vectorWeight'],
      [{ fusion: 'rrf' }, 'body'],
    ] as const) {
      const r = await request(t.app).post('/api/memory/retrieve-preview').set(t.auth).send({ query: 'kitten', ...body });
      expect({ body, status: r.status }).toEqual({ body, status: 400 });
      expect(r.body.error.details.map((d: { path: string }) => d.path)).toContain(where);
    }
  });
});
