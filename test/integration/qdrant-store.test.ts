import http from 'node:http';
import { memoryInput } from '../factories';
import { listenLoopback } from '../helpers/loopback';
import { startFakeQdrant, type FakeQdrant } from '../helpers/fake-qdrant';
import { silentLog, testEnv } from '../helpers/env';
import { tempStorage } from '../helpers/storage';
import { waitUntil } from '../helpers/wait';
import { QdrantSyncService } from '../../src/memory/qdrant-sync.service';
import type { CreateMemoryInput, MemoryRecord } from '../../src/memory/types';
import { operatorPolicy } from '../../src/net/url-policy';
import { physicalCollectionName, QDRANT_POINT_KIND, QdrantVectorStore } from '../../src/vector/qdrant.store';
import { VectorUnavailableError } from '../../src/vector/types';

const ctx = { source: 'api' as const };
const DIM = 4;

function vec(...xs: number[]): Float32Array {
  return new Float32Array(xs);
}

type Storage = ReturnType<typeof tempStorage>;

/** Storage with sqlite-vec built for `model` and Qdrant pointed at the fake. */
function setup(fake: FakeQdrant, envOver: Record<string, string> = {}) {
  // Generous deadlines by default (answers, not latency, are checked; the machine may be busy); the timeout test sets its own.
  const s: Storage = tempStorage(testEnv({ QDRANT_SEARCH_TIMEOUT_MS: '10000', QDRANT_TIMEOUT_MS: '10000', ...envOver }));
  s.qdrantSettings.update({ enabled: true, host: fake.url, apiKey: 'qdrant-secret-key-0123456789' });
  const build = (model: string) => {
    const sig = s.vectors.signatureFor({ source: 'static', model, dimensions: DIM })!;
    s.vectors.rebuild(sig, DIM);
    return sig;
  };
  const create = (input: CreateMemoryInput, v: Float32Array): MemoryRecord => {
    const m = s.memory.upsertMany([input], ctx)[0]!.memory;
    s.vectors.upsertOne(m.rowId, m.apiKeyId, v, m.contentHash);
    return m;
  };
  /** A completed backfill (QdrantSyncService.backfill): the only way the alias comes to name a collection. */
  const backfill = () =>
    new QdrantSyncService({ qdrant: s.qdrant, qdrantSettings: s.qdrantSettings, vectors: s.vectors, queues: undefined as never, log: silentLog() }).backfill(
      { reason: 'api', batchSize: 100, afterRowId: 0, done: 0, failed: 0, signature: null },
      { progress: async () => undefined, checkpoint: async () => undefined, saveCursor: async () => undefined },
    );
  return { s, build, create, backfill };
}

const nowIso = () => new Date().toISOString();

describe('QdrantVectorStore against a fake Qdrant checked with Qdrant\'s OpenAPI schemas', () => {
  let fake: FakeQdrant;
  beforeEach(async () => {
    fake = await startFakeQdrant({ apiKey: 'qdrant-secret-key-0123456789' });
  });
  afterEach(async () => {
    expect(fake.schemaErrors).toEqual([]);
    await fake.close();
  });

  it('creates the collection on first use (cosine, measured width, tenant index with is_tenant); only a completed backfill puts it behind the alias', async () => {
    const { s, build, create, backfill } = setup(fake);
    const sig = build('m1');
    const a = create(memoryInput({ apiKeyId: 'tenant-a' }), vec(1, 0, 0, 0));
    const b = create(memoryInput({ apiKeyId: 'tenant-a' }), vec(0, 1, 0, 0));
    await s.qdrant.syncMemories([a.id]);
    const name = physicalCollectionName('engram_memory', sig);
    expect([...fake.collections.keys()]).toEqual([name]);
    // One synced memory of an existing corpus: the collection is not searched (no alias) until a backfill completes.
    expect(fake.aliases.has('engram_memory')).toBe(false);
    expect(s.qdrant.activeSignature()).toBeNull();
    await expect(s.qdrant.search({ apiKeyId: 'tenant-a', vector: vec(1, 0, 0, 0), k: 5, filter: { nowIso: nowIso() } })).rejects.toMatchObject({
      reason: 'index_not_built',
      message: expect.stringMatching(/^qdrant index not built yet \(backfill pending\)/),
    });
    expect(await s.qdrant.details()).toMatchObject({ ok: false, reachable: true, aliasTarget: null, reason: expect.stringMatching(/^qdrant index not built yet \(backfill pending\)/) });
    expect(await backfill()).toMatchObject({ phase: 'done', done: 2, total: 2, switchedFrom: null });
    expect(fake.aliases.get('engram_memory')).toBe(name);
    expect(s.qdrant.activeSignature()).toBe(sig);
    expect((await s.qdrant.search({ apiKeyId: 'tenant-a', vector: vec(1, 0, 0, 0), k: 5, filter: { nowIso: nowIso() } })).map((h) => h.id)).toEqual([a.id, b.id]);
    const c = fake.collections.get(name)!;
    expect({ size: c.size, distance: c.distance }).toEqual({ size: DIM, distance: 'Cosine' });
    expect(c.indexes.get('apiKeyId')).toEqual({ type: 'keyword', is_tenant: true });
    expect(c.indexes.get('expiresAtUnix')).toBe('integer');
    expect(c.indexes.get('sessionId')).toBe('keyword');
    expect(c.indexes.get('kind')).toBe('keyword');
    // The vector is the one sqlite-vec holds, the payload the real memory.
    const p = fake.points(name).find((x) => x.id === a.rowId)!;
    expect(p.id).toBe(a.rowId);
    expect(p.vector).toEqual([1, 0, 0, 0]);
    expect(p.payload).toMatchObject({ kind: QDRANT_POINT_KIND, memoryId: a.id, apiKeyId: 'tenant-a', type: 'factual', key: a.key, content: a.content, expiresAtUnix: null });
    // Every request carried the api key header.
    expect(fake.requests.every((r) => r.apiKey === 'qdrant-secret-key-0123456789')).toBe(true);
    s.close();
  });

  it("never returns tenant B's point to A, even when it is the nearest; session filter applies", async () => {
    const { s, build, create, backfill } = setup(fake);
    build('m1');
    const a1 = create(memoryInput({ apiKeyId: 'tenant-a', sessionId: 's1' }), vec(0.8, 0.6, 0, 0));
    const a2 = create(memoryInput({ apiKeyId: 'tenant-a', sessionId: 's2' }), vec(0, 1, 0, 0));
    const b = create(memoryInput({ apiKeyId: 'tenant-b' }), vec(1, 0, 0, 0));
    await s.qdrant.syncMemories([a1.id, a2.id, b.id]);
    await backfill();
    const hits = await s.qdrant.search({ apiKeyId: 'tenant-a', vector: vec(1, 0, 0, 0), k: 10, filter: { nowIso: nowIso() } });
    expect(hits.map((h) => h.id)).toEqual([a1.id, a2.id]);
    expect(hits[0]!.score).toBeCloseTo(0.8, 5);
    const bHits = await s.qdrant.search({ apiKeyId: 'tenant-b', vector: vec(1, 0, 0, 0), k: 10, filter: { nowIso: nowIso() } });
    expect(bHits.map((h) => h.id)).toEqual([b.id]);
    const session = await s.qdrant.search({ apiKeyId: 'tenant-a', vector: vec(1, 0, 0, 0), k: 10, filter: { nowIso: nowIso(), sessionId: 's2' } });
    expect(session.map((h) => h.id)).toEqual([a2.id]);
    // The tenant and kind were filtered inside Qdrant, not only afterwards.
    const q = fake.requests.filter((r) => r.path.endsWith('/points/query')).map((r) => JSON.stringify(r.body));
    expect(q.every((b2) => b2.includes('"key":"apiKeyId"') && b2.includes(`"value":"${QDRANT_POINT_KIND}"`) && b2.includes('"key":"expiresAtUnix"'))).toBe(true);
    s.close();
  });

  it('expired memories are filtered in Qdrant and re-checked in SQLite; a point whose memory is gone never comes back', async () => {
    const { s, build, create, backfill } = setup(fake);
    build('m1');
    const soon = new Date(Date.now() + 60_000).toISOString();
    const expiring = create(memoryInput({ apiKeyId: 'tenant-a', expiresAt: soon }), vec(1, 0, 0, 0));
    const stays = create(memoryInput({ apiKeyId: 'tenant-a' }), vec(0.5, 0.5, 0, 0));
    const deleted = create(memoryInput({ apiKeyId: 'tenant-a' }), vec(0.9, 0.1, 0, 0));
    await s.qdrant.syncMemories([expiring.id, stays.id, deleted.id]);
    await backfill();
    const later = new Date(Date.now() + 120_000).toISOString();
    const before = await s.qdrant.search({ apiKeyId: 'tenant-a', vector: vec(1, 0, 0, 0), k: 10, filter: { nowIso: nowIso() } });
    expect(before.map((h) => h.id)).toEqual([expiring.id, deleted.id, stays.id]);
    // A memory deleted without a sync (a lost job): its point is still in Qdrant, but SQLite says no.
    s.memory.delete(deleted.id, ctx);
    expect(fake.points('engram_memory').some((p) => p.id === deleted.rowId)).toBe(true);
    const after = await s.qdrant.search({ apiKeyId: 'tenant-a', vector: vec(1, 0, 0, 0), k: 10, filter: { nowIso: later } });
    expect(after.map((h) => h.id)).toEqual([stays.id]);
    // Retention (updated_at window) is re-checked in SQLite too.
    const fresh = await s.qdrant.search({ apiKeyId: 'tenant-a', vector: vec(1, 0, 0, 0), k: 10, filter: { nowIso: nowIso(), freshAfterIso: later } });
    expect(fresh).toEqual([]);
    s.close();
  });

  it('edit → point updated; delete → point gone; syncs run twice or out of order converge to the same state', async () => {
    const { s, build, create, backfill } = setup(fake);
    build('m1');
    const m = create(memoryInput({ apiKeyId: 'tenant-a', content: 'first words' }), vec(1, 0, 0, 0));
    const other = create(memoryInput({ apiKeyId: 'tenant-a', content: 'other' }), vec(0, 1, 0, 0));
    await s.qdrant.syncMemories([m.id, other.id]);
    await backfill();
    const point = () => fake.points('engram_memory').find((p) => p.id === m.rowId);

    s.memory.update(m.id, { content: 'second words', metadata: { v: 2 } }, ctx);
    const m2 = s.memory.getRecord(m.id)!;
    s.vectors.upsertOne(m2.rowId, m2.apiKeyId, vec(0, 0, 1, 0), m2.contentHash);
    s.memory.update(m.id, { type: 'episodic' }, ctx);
    // The jobs of three changes, duplicated and in reverse order: each reads the current row.
    for (const ids of [[m.id], [m.id, other.id], [m.id], [m.id]]) await s.qdrant.syncMemories(ids);
    expect(point()).toMatchObject({ vector: [0, 0, 1, 0], payload: expect.objectContaining({ content: 'second words', type: 'episodic', metadata: { v: 2 } }) });
    const snapshot = JSON.stringify(fake.points('engram_memory').sort((a, b) => Number(a.id) - Number(b.id)));

    s.memory.delete(m.id, ctx);
    await s.qdrant.syncMemories([m.id]);
    expect(point()).toBeUndefined();
    // A late duplicate of an older sync (the edit's) after the delete: still gone.
    await s.qdrant.syncMemories([m.id, other.id]);
    await s.qdrant.syncMemories([m.id]);
    expect(point()).toBeUndefined();
    expect(fake.points('engram_memory').map((p) => p.id)).toEqual([other.rowId]);
    expect(snapshot).toContain('second words');
    s.close();
  });

  it('two syncs racing (the older one writes last) still leave Qdrant matching SQLite: the last writer re-reads and writes again', async () => {
    const { s, build, create, backfill } = setup(fake);
    build('m1');
    const m = create(memoryInput({ apiKeyId: 'tenant-a', content: 'old text' }), vec(1, 0, 0, 0));
    await s.qdrant.syncMemories([m.id]);
    await backfill();
    // Hold the next upsert (the slow, older sync) until a newer edit has been synced.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let holding = true;
    fake.beforeAnswer = async (req) => {
      if (holding && req.method === 'PUT' && req.path.endsWith('/points')) {
        holding = false;
        await held;
      }
    };
    const slow = s.qdrant.syncMemories([m.id]);
    await waitUntil(() => !holding, 5000, 'the old sync is writing');
    s.memory.update(m.id, { content: 'new text' }, ctx);
    const r2 = s.memory.getRecord(m.id)!;
    s.vectors.upsertOne(r2.rowId, r2.apiKeyId, vec(0, 1, 0, 0), r2.contentHash);
    await s.qdrant.syncMemories([m.id]);
    release();
    const slowResult = await slow;
    fake.beforeAnswer = null;
    expect(slowResult.passes).toBe(2);
    expect(fake.points('engram_memory')).toEqual([expect.objectContaining({ id: m.rowId, vector: [0, 1, 0, 0], payload: expect.objectContaining({ content: 'new text' }) })]);
    s.close();
  });

  it('a backfill page that read a row before its vector existed cannot delete the point a racing sync just wrote', async () => {
    const { s, build } = setup(fake);
    const sig = build('m1');
    const m = s.memory.upsertMany([memoryInput({ apiKeyId: 'tenant-a' })], ctx)[0]!.memory;
    const seed = s.memory.upsertMany([memoryInput({ apiKeyId: 'tenant-a' })], ctx)[0]!.memory;
    s.vectors.upsertOne(seed.rowId, seed.apiKeyId, vec(0, 0, 1, 0), seed.contentHash);
    await s.qdrant.syncMemories([seed.id]);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let holding = true;
    fake.beforeAnswer = async (req) => {
      if (holding && req.path.endsWith('/points/delete')) {
        holding = false;
        await held;
      }
    };
    // The page reads m without a vector and asks Qdrant to delete its point; that request is held...
    const page = s.qdrant.backfillPage(sig, 0, 10);
    await waitUntil(() => !holding, 5000, 'the backfill is deleting');
    // ...while the embed writes m's vector and its sync upserts the point.
    s.vectors.upsertOne(m.rowId, m.apiKeyId, vec(1, 0, 0, 0), m.contentHash);
    await s.qdrant.syncMemories([m.id]);
    release();
    await page;
    fake.beforeAnswer = null;
    expect(fake.points(physicalCollectionName('engram_memory', sig)).find((p) => p.id === m.rowId)).toMatchObject({ vector: [1, 0, 0, 0] });
    s.close();
  });

  it('a collection whose width differs from the active embedding makes health fail with a reason that says so; Qdrant refuses wrong-width vectors', async () => {
    const { s, build, create, backfill } = setup(fake);
    const sig = build('m1');
    const a = create(memoryInput({ apiKeyId: 'tenant-a' }), vec(1, 0, 0, 0));
    await s.qdrant.syncMemories([a.id]);
    await backfill();
    expect(await s.qdrant.details()).toMatchObject({ ok: true, dimension: DIM, expectedDimension: DIM, pointCount: 1, collectionExists: true });
    // Someone points the alias at an 8-wide collection.
    const headers = { 'content-type': 'application/json', 'api-key': 'qdrant-secret-key-0123456789' };
    expect((await fetch(`${fake.url}/collections/foreign`, { method: 'PUT', headers, body: JSON.stringify({ vectors: { size: 8, distance: 'Cosine' } }) })).status).toBe(200);
    fake.aliases.set('engram_memory', 'foreign');
    const h = await s.qdrant.details();
    expect(h.ok).toBe(false);
    expect(h.reason).toMatch(/dimension mismatch: collection foreign has 8 dimensions, the active embedding has 4/);
    expect((await s.qdrant.health()).ok).toBe(false);
    // Searching the mismatched alias is refused with a reason (retrieval falls back).
    await expect(s.qdrant.search({ apiKeyId: 'tenant-a', vector: vec(1, 0, 0, 0), k: 5, filter: { nowIso: nowIso(), signature: sig } })).rejects.toMatchObject({
      reason: 'signature_mismatch',
    });
    // The fake enforces Qdrant's own dimension check.
    const res = await fetch(`${fake.url}/collections/foreign/points?wait=true`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', 'api-key': 'qdrant-secret-key-0123456789' },
      body: JSON.stringify({ points: [{ id: 1, vector: [1, 0, 0, 0], payload: {} }] }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { status: { error: string } }).status.error).toMatch(/dimension/i);
    s.close();
  });

  it('a hanging Qdrant times out within the search deadline, an abort cancels at once, a down one is unhealthy — always VectorUnavailableError', async () => {
    const { s, build, create, backfill } = setup(fake, { QDRANT_SEARCH_TIMEOUT_MS: '300' });
    build('m1');
    const a = create(memoryInput({ apiKeyId: 'tenant-a' }), vec(1, 0, 0, 0));
    await s.qdrant.syncMemories([a.id]);
    await backfill();
    await s.qdrant.aliasTarget(true);
    fake.mode = 'hang';
    const q = { apiKeyId: 'tenant-a', vector: vec(1, 0, 0, 0), k: 5, filter: { nowIso: nowIso() } };
    const timedOut = await s.qdrant.search(q).catch((e: unknown) => e);
    expect(timedOut).toBeInstanceOf(VectorUnavailableError);
    expect((timedOut as VectorUnavailableError).reason).toBe('timeout');
    const ac = new AbortController();
    const pending = s.qdrant.search({ ...q, signal: ac.signal }).catch((e: unknown) => e);
    ac.abort();
    expect(await pending).toMatchObject({ reason: 'aborted' });
    fake.mode = 'down';
    await expect(s.qdrant.search(q)).rejects.toMatchObject({ reason: 'unhealthy' });
    const h = await s.qdrant.details();
    expect(h.ok).toBe(false);
    expect(h.reachable).toBe(false);
    expect(JSON.stringify(h)).not.toContain('qdrant-secret-key');
    fake.mode = 'up';
    const back = await waitUntil(() => s.qdrant.search(q), 10_000, 'answers again');
    expect(back.map((x) => x.id)).toEqual([a.id]);
    s.close();
  });

  it('a search abandoned at its deadline (or aborted) cancels its HTTP request: a slow Qdrant does not pile up open sockets for the client timeout', async () => {
    // The jobs' request timeout is far longer than the search deadline: the abandoned request must not live that long.
    const { s, build, create, backfill } = setup(fake, { QDRANT_SEARCH_TIMEOUT_MS: '200', QDRANT_TIMEOUT_MS: '600000' });
    build('m1');
    const a = create(memoryInput({ apiKeyId: 'tenant-a' }), vec(1, 0, 0, 0));
    await s.qdrant.syncMemories([a.id]);
    await backfill();
    fake.mode = 'hang';
    const q = { apiKeyId: 'tenant-a', vector: vec(1, 0, 0, 0), k: 5, filter: { nowIso: nowIso() } };
    for (let i = 0; i < 6; i++) await expect(s.qdrant.search(q)).rejects.toMatchObject({ reason: 'timeout' });
    const sent = fake.requests.length;
    const ac = new AbortController();
    const pending = s.qdrant.search({ ...q, signal: ac.signal }).catch((e: unknown) => e);
    await waitUntil(() => fake.requests.length > sent || null, 5000, 'the aborted search reached Qdrant');
    ac.abort();
    expect(await pending).toMatchObject({ reason: 'aborted' });
    await waitUntil(() => fake.hangingCount() === 0 || null, 5000, 'every abandoned Qdrant request was cancelled');
    s.close();
  });

  it('a Qdrant host that answers with a redirect never gets the api key carried to the redirect target (no request follows it)', async () => {
    const seen: { path: string; apiKey: string | undefined }[] = [];
    const target = http.createServer((req, res) => {
      seen.push({ path: req.url ?? '', apiKey: req.headers['api-key'] as string | undefined });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok","time":0,"result":{"aliases":[]}}');
    });
    const t = await listenLoopback(target);
    const redirector = http.createServer((req, res) => {
      req.resume();
      res.writeHead(307, { location: `http://127.0.0.1:${t.port}${req.url ?? '/'}` }).end();
    });
    const r = await listenLoopback(redirector);
    const { s, build, create } = setup(fake);
    build('m1');
    const a = create(memoryInput({ apiKeyId: 'tenant-a' }), vec(1, 0, 0, 0));
    s.qdrantSettings.update({ host: `http://127.0.0.1:${r.port}` });
    const health = await s.qdrant.details();
    expect(health.ok).toBe(false);
    await expect(s.qdrant.search({ apiKeyId: 'tenant-a', vector: vec(1, 0, 0, 0), k: 5, filter: { nowIso: nowIso() } })).rejects.toBeInstanceOf(VectorUnavailableError);
    await expect(s.qdrant.syncMemories([a.id])).rejects.toBeInstanceOf(VectorUnavailableError);
    expect(seen).toEqual([]);
    s.close();
    await r.close();
    await t.close();
  });

  it('a Qdrant host name that resolves to a cloud metadata address is refused when connecting (the name passed the static URL check)', async () => {
    const { s, build, create } = setup(fake);
    const sig = build('m1');
    const a = create(memoryInput({ apiKeyId: 'tenant-a' }), vec(1, 0, 0, 0));
    // Names only this test's resolver knows: one for the fake on loopback, one for the metadata service.
    const resolver = async (host: string) => [{ address: host === 'qdrant.example.test' ? '127.0.0.1' : '169.254.169.254', family: 4 }];
    const storeFor = (host: string) =>
      new QdrantVectorStore(s.db.db, s.vectors, () => ({ ...s.qdrantSettings.config(), url: `http://${host}:${fake.port}` }), { policy: operatorPolicy(resolver) });
    const good = storeFor('qdrant.example.test');
    await good.syncMemories([a.id]);
    expect(fake.points(physicalCollectionName('engram_memory', sig)).map((p) => p.id)).toEqual([a.rowId]);
    const sent = fake.requests.length;
    const bad = storeFor('metadata.example.test');
    const err = await bad.search({ apiKeyId: 'tenant-a', vector: vec(1, 0, 0, 0), k: 5, filter: { nowIso: nowIso() } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VectorUnavailableError);
    expect((err as Error).message).toMatch(/metadata/);
    expect((await bad.details()).reason).toMatch(/metadata/);
    expect(fake.requests.length).toBe(sent);
    s.close();
  });

  it('an unknown collection is a 404 the store reports as "index not built"; a filter on a key no point has matches nothing', async () => {
    const { s, build } = setup(fake);
    const sig = build('m1');
    await expect(s.qdrant.search({ apiKeyId: 'tenant-a', vector: vec(1, 0, 0, 0), k: 5, filter: { nowIso: nowIso() } })).rejects.toMatchObject({ reason: 'index_not_built' });
    const res = await fetch(`${fake.url}/collections/nope/points/count`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'api-key': 'qdrant-secret-key-0123456789' },
      body: JSON.stringify({ exact: true }),
    });
    expect(res.status).toBe(404);
    // Qdrant accepts a filter on a payload key no point has (and no index covers): it simply matches nothing.
    const a = s.memory.upsertMany([memoryInput({ apiKeyId: 'tenant-a' })], ctx)[0]!.memory;
    s.vectors.upsertOne(a.rowId, a.apiKeyId, vec(1, 0, 0, 0), a.contentHash);
    await s.qdrant.syncMemories([a.id]);
    const target = physicalCollectionName('engram_memory', sig);
    expect(await s.qdrant.countWhere(target, { must: [{ key: 'noSuchKey', match: { value: 'x' } }] })).toBe(0);
    expect(await s.qdrant.countWhere(target, { must_not: [{ key: 'noSuchKey', match: { value: 'x' } }] })).toBe(1);
    s.close();
  });

  it("dropping old collections after an alias switch never drops another Engram's collections whose base extends ours (engram_memory_eu_…), live or being built", async () => {
    const { s, build, create } = setup(fake);
    const sig1 = build('m1');
    const a = create(memoryInput({ apiKeyId: 'tenant-a' }), vec(1, 0, 0, 0));
    const sync = new QdrantSyncService({ qdrant: s.qdrant, qdrantSettings: s.qdrantSettings, vectors: s.vectors, queues: undefined as never, log: silentLog() });
    const hooks = { progress: async () => undefined, checkpoint: async () => undefined, saveCursor: async () => undefined };
    await sync.backfill({ reason: 'api', batchSize: 100, afterRowId: 0, done: 0, failed: 0, signature: null }, hooks);
    const mine = physicalCollectionName('engram_memory', sig1);
    // A second Engram on the same Qdrant with QDRANT_COLLECTION=engram_memory_eu: its live collection (behind its
    // alias, holding its tenants' points) and one it is still building for a new model.
    const headers = { 'content-type': 'application/json', 'api-key': 'qdrant-secret-key-0123456789' };
    const theirLive = physicalCollectionName('engram_memory_eu', sig1);
    const theirBuilding = physicalCollectionName('engram_memory_eu', 'static:m9:4');
    for (const name of [theirLive, theirBuilding]) {
      const r = await fetch(`${fake.url}/collections/${name}`, { method: 'PUT', headers, body: JSON.stringify({ vectors: { size: DIM, distance: 'Cosine' } }) });
      expect(r.status).toBe(200);
    }
    const alias = await fetch(`${fake.url}/collections/aliases`, { method: 'POST', headers, body: JSON.stringify({ actions: [{ create_alias: { collection_name: theirLive, alias_name: 'engram_memory_eu' } }] }) });
    expect(alias.status).toBe(200);
    // Our reindex to a new model, then its backfill: our old collection goes, theirs stay.
    const sig2 = build('m2');
    s.vectors.upsertOne(a.rowId, a.apiKeyId, vec(0, 1, 0, 0), a.contentHash);
    const second = await sync.backfill({ reason: 'reindex', batchSize: 100, afterRowId: 0, done: 0, failed: 0, signature: null }, hooks);
    expect(second).toMatchObject({ phase: 'done', switchedFrom: mine, dropped: [mine] });
    expect([...fake.collections.keys()].sort()).toEqual([physicalCollectionName('engram_memory', sig2), theirLive, theirBuilding].sort());
    expect(fake.aliases.get('engram_memory_eu')).toBe(theirLive);
    s.close();
  });

  it('reindex to a new signature: the backfill fills a new collection, switches the alias atomically and drops the old one; concurrent searches never see an empty or mixed answer', async () => {
    const { s, build, create } = setup(fake);
    build('m1');
    const rows: MemoryRecord[] = [];
    // Old model: memory i points along axis (i % 4) with a small tilt; the query's top-3 is fixed.
    for (let i = 0; i < 300; i++) rows.push(create(memoryInput({ apiKeyId: 'tenant-a', content: `note ${i}` }), vec(i % 4 === 0 ? 1 : 0.1, i % 4 === 1 ? 1 : 0.1, i % 4 === 2 ? 1 : 0.1, (i % 97) / 97)));
    const sync = new QdrantSyncService({ qdrant: s.qdrant, qdrantSettings: s.qdrantSettings, vectors: s.vectors, queues: undefined as never, log: silentLog() });
    const hooks = { progress: async () => undefined, checkpoint: async () => undefined, saveCursor: async () => undefined };
    const first = await sync.backfill({ reason: 'api', batchSize: 100, afterRowId: 0, done: 0, failed: 0, signature: null }, hooks);
    expect(first).toMatchObject({ phase: 'done', done: 300, total: 300 });
    const oldCollection = fake.aliases.get('engram_memory')!;

    const query = { apiKeyId: 'tenant-a', vector: vec(1, 0, 0, 0.5), k: 3, filter: { nowIso: nowIso() } };
    const oldAnswer = (await s.qdrant.search(query)).map((h) => h.id);
    // The new model: rebuild sqlite-vec for another signature and write different vectors.
    const sig2 = build('m2');
    for (const [i, r] of rows.entries()) s.vectors.upsertOne(r.rowId, r.apiKeyId, vec((i % 89) / 89, i % 3 === 0 ? 1 : 0.2, 0.3, 1), r.contentHash);
    const expectedNew = [...rows.entries()]
      .map(([i, r]) => {
        const v = [(i % 89) / 89, i % 3 === 0 ? 1 : 0.2, 0.3, 1];
        const q = [1, 0, 0, 0.5];
        const dot = v.reduce((acc, x, j) => acc + x * q[j]!, 0) / Math.hypot(...v) / Math.hypot(...q);
        return { id: r.id, dot };
      })
      .sort((a, b) => b.dot - a.dot)
      .slice(0, 3)
      .map((x) => x.id);
    expect(expectedNew).not.toEqual(oldAnswer);

    // Someone else's collection that merely shares the prefix must survive the cleanup of old collections.
    const headers = { 'content-type': 'application/json', 'api-key': 'qdrant-secret-key-0123456789' };
    await fetch(`${fake.url}/collections/engram_memory_reports`, { method: 'PUT', headers, body: JSON.stringify({ vectors: { size: 3, distance: 'Dot' } }) });

    const answers: string[][] = [];
    let running = true;
    const searching = (async () => {
      while (running) answers.push((await s.qdrant.search(query)).map((h) => h.id));
    })();
    const second = await sync.backfill({ reason: 'reindex', batchSize: 20, afterRowId: 0, done: 0, failed: 0, signature: null }, hooks);
    running = false;
    await searching;
    answers.push((await s.qdrant.search(query)).map((h) => h.id));

    expect(second).toMatchObject({ phase: 'done', done: 300, switchedFrom: oldCollection, dropped: [oldCollection] });
    expect(fake.aliases.get('engram_memory')).toBe(physicalCollectionName('engram_memory', sig2));
    expect([...fake.collections.keys()].sort()).toEqual([physicalCollectionName('engram_memory', sig2), 'engram_memory_reports'].sort());
    expect(answers.length).toBeGreaterThan(5);
    const kinds = answers.map((a) => (JSON.stringify(a) === JSON.stringify(oldAnswer) ? 'old' : JSON.stringify(a) === JSON.stringify(expectedNew) ? 'new' : `mixed:${JSON.stringify(a)}`));
    expect(kinds.filter((k) => k !== 'old' && k !== 'new')).toEqual([]);
    // Old answers first, then new ones: one switch, no flapping.
    expect(kinds.join(',')).toMatch(/^(old,)*(new,)*new$/);
    expect(kinds[0]).toBe('old');
    s.close();
  });
});
