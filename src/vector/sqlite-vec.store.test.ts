import { memoryInput } from '../../test/factories';
import { testEnv, tempDir } from '../../test/helpers/env';
import { tempStorage } from '../../test/helpers/storage';
import type { CreateMemoryInput, MemoryRecord } from '../memory/types';
import { normalise, SqliteVecStore, VEC0_MAX_K } from './sqlite-vec.store';
import { parseSignature } from './signature';
import { VectorInputError, VectorUnavailableError } from './types';
import { mulberry32 as rng } from '../../test/helpers/prng';

const ctx = { source: 'api' as const };


function gaussian(r: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
}

function randomUnit(dim: number, r: () => number): Float32Array {
  const v = new Float32Array(dim);
  for (let i = 0; i < dim; i++) v[i] = gaussian(r);
  return normalise(v)!;
}

/** `base` plus gaussian noise of the given scale, normalised. */
function near(base: Float32Array, scale: number, r: () => number): Float32Array {
  const v = new Float32Array(base.length);
  for (let i = 0; i < base.length; i++) v[i] = base[i]! + scale * gaussian(r);
  return normalise(v)!;
}

function axis(dim: number, i: number, sign = 1): Float32Array {
  const v = new Float32Array(dim);
  v[i] = sign;
  return v;
}

function vec(...xs: number[]): Float32Array {
  return new Float32Array(xs);
}

function dot(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
}

const now = () => new Date().toISOString();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function open(quantization: 'none' | 'int8' = 'none', env = testEnv(), exactScanMaxRows?: number) {
  const s = tempStorage(env);
  const store = new SqliteVecStore(s.db.db, { vecLoaded: s.db.vecLoaded, quantization, exactScanMaxRows });
  s.memory.addHooks({ onDeleteInTx: (rowId) => store.deleteInTx(rowId) });
  const create = (inputs: CreateMemoryInput[]): MemoryRecord[] => s.memory.upsertMany(inputs, ctx).map((c) => c.memory);
  return { s, store, create };
}

function sig(store: SqliteVecStore, dim: number, model = 'm', quantization: 'none' | 'int8' = 'none'): string {
  return store.signatureFor({ source: 'static', model, dimensions: dim }, quantization)!;
}

describe('SqliteVecStore', () => {
  const opened: { close(): void }[] = [];
  afterAll(() => opened.forEach((o) => o.close()));
  function fresh(quantization: 'none' | 'int8' = 'none', exactScanMaxRows?: number) {
    const o = open(quantization, testEnv(), exactScanMaxRows);
    opened.push(o.s);
    return o;
  }

  describe('signatures and rebuild', () => {
    it('formats signatures as <source>:<model|identity>:<dim>[:int8], null while the dimension is unknown', () => {
      const { store } = fresh();
      expect(store.signatureFor({ source: 'static', model: 'minishlab/potion-base-8M', dimensions: 256 })).toBe('static:minishlab/potion-base-8M:256');
      expect(store.signatureFor({ source: 'transformers', model: 'Xenova/all-MiniLM-L6-v2', dimensions: 384 }, 'int8')).toBe(
        'transformers:Xenova/all-MiniLM-L6-v2:384:int8',
      );
      expect(store.signatureFor({ source: 'remote', model: 'text-embedding-3-small', identity: 'https://e.example/v1|text-embedding-3-small', dimensions: 1536 })).toBe(
        'remote:https://e.example/v1|text-embedding-3-small:1536',
      );
      expect(store.signatureFor({ source: 'static', model: 'x', dimensions: null })).toBeNull();
      expect(parseSignature('remote:https://e.example/v1|m:1536:int8')).toEqual({ dim: 1536, quantization: 'int8' });
      expect(parseSignature('static:m')).toBeNull();
    });

    it('creates the table for the measured dimension and a rebuild flags every memory, in one step', () => {
      const { s, store, create } = fresh();
      const rows = create([memoryInput(), memoryInput(), memoryInput({ apiKeyId: 'key-b' })]);
      expect(store.isCompatible(sig(store, 8))).toBe(false);

      expect(store.rebuild(sig(store, 8), 8)).toEqual({ flagged: 0 }); // new rows start flagged
      const tableSql = () => (s.db.db.prepare("SELECT sql FROM sqlite_master WHERE name = 'vec_memories'").get() as { sql: string }).sql;
      expect(tableSql()).toContain('float[8]');
      expect(tableSql()).toContain('api_key_id TEXT PARTITION KEY');
      const r = rng(1);
      store.upsertMany(rows.map((m) => ({ rowId: m.rowId, apiKeyId: m.apiKeyId, vector: randomUnit(8, r), contentHash: m.contentHash })));
      expect(store.stats()).toMatchObject({ rowCount: 3, needsReindex: 0, activeDim: 8, signature: sig(store, 8) });

      const before = store.meta().lastResetAt!;
      expect(store.rebuild(sig(store, 16, 'other', 'int8'), 16)).toEqual({ flagged: 3 });
      expect(tableSql()).toContain('int8[16]');
      expect(store.meta()).toMatchObject({ activeDim: 16, signature: 'static:other:16:int8', tableCreated: true });
      expect(store.meta().lastResetAt! >= before).toBe(true);
      expect(store.stats()).toMatchObject({ rowCount: 0, needsReindex: 3 });
      expect(store.pendingReindex(10).map((p) => p.rowId)).toEqual(rows.map((m) => m.rowId));
      expect(store.isCompatible('static:other:16:int8')).toBe(true);
    });

    it('refuses a signature whose tail does not match the dimension', () => {
      const { store } = fresh();
      expect(() => store.rebuild('static:m:8', 16)).toThrow(VectorInputError);
      expect(() => store.rebuild('static:m', 8)).toThrow(VectorInputError);
      expect(() => store.rebuild('static:m:9000', 9000)).toThrow(/1\.\.8192/);
      expect(store.meta().tableCreated).toBe(false);
    });

    it('a mismatched signature is "not compatible" and a read never drops or rebuilds anything', () => {
      const { store, create } = fresh();
      const [m] = create([memoryInput()]);
      store.rebuild(sig(store, 4), 4);
      store.upsertOne(m!.rowId, m!.apiKeyId, vec(1, 0, 0, 0), m!.contentHash);

      expect(store.isCompatible(sig(store, 4, 'new-model'))).toBe(false);
      expect(store.isCompatible(sig(store, 4, 'm', 'int8'))).toBe(false);
      expect(() => store.knn('key-a', vec(1, 0, 0, 0), 3, { nowIso: now(), signature: sig(store, 4, 'new-model') })).toThrow(
        expect.objectContaining({ name: 'VectorUnavailableError', reason: 'signature_mismatch' }),
      );
      expect(() => store.knn('key-a', vec(1, 0, 0, 0, 0), 3, { nowIso: now() })).toThrow(
        expect.objectContaining({ reason: 'dimension_mismatch' }),
      );
      expect(store.stats()).toMatchObject({ rowCount: 1, needsReindex: 0, signature: sig(store, 4) });
      expect(store.knn('key-a', vec(1, 0, 0, 0), 3, { nowIso: now(), signature: sig(store, 4) }).map((h) => h.id)).toEqual([m!.id]);
    });

    it('reports "not built" before the first rebuild and deletes are no-ops then', () => {
      const { s, store, create } = fresh();
      const [m] = create([memoryInput()]);
      expect(() => store.knn('key-a', vec(1, 0), 1, { nowIso: now() })).toThrow(expect.objectContaining({ reason: 'index_not_built' }));
      expect(store.deleteInTx(m!.rowId)).toBe(false);
      expect(s.memory.delete(m!.id, ctx)).toBe(true);
      expect(store.stats()).toMatchObject({ available: true, rowCount: 0, activeDim: null, signature: null });
    });
  });

  describe('writes', () => {
    it('upsert is idempotent: two upserts leave one row, holding the latest vector', () => {
      const { store, create } = fresh();
      const [m] = create([memoryInput()]);
      store.rebuild(sig(store, 4), 4);
      expect(store.upsertOne(m!.rowId, 'key-a', vec(1, 0, 0, 0), m!.contentHash)).toEqual({ stored: true, cleared: true, skipped: null });
      expect(store.upsertOne(m!.rowId, 'key-a', vec(0, 1, 0, 0), m!.contentHash)).toEqual({ stored: true, cleared: true, skipped: null });
      expect(store.stats().rowCount).toBe(1);
      const [hit] = store.knn('key-a', vec(0, 1, 0, 0), 5, { nowIso: now() });
      expect(hit).toMatchObject({ rowId: m!.rowId, id: m!.id });
      expect(hit!.score).toBeCloseTo(1, 5);
    });

    it('re-embedding overwrites a float vector in place and replaces an int8 one: one row each, the latest vector wins', () => {
      const { store, create } = fresh();
      const rows = create([memoryInput(), memoryInput(), memoryInput()]);
      const batch = (i: number) => rows.map((m, j) => ({ rowId: m.rowId, apiKeyId: m.apiKeyId, vector: axis(4, (i + j) % 4), contentHash: m.contentHash }));
      for (const quant of ['none', 'int8'] as const) {
        store.rebuild(sig(store, 4, 'm', quant), 4);
        for (let i = 0; i <= 5; i++) expect(store.upsertMany(batch(i))).toEqual({ stored: 3, cleared: 3, zeroVectors: 0, missing: 0 });
        expect(store.stats()).toMatchObject({ rowCount: 3, needsReindex: 0 });
        // After batch 5, row j holds axis (5 + j) % 4: row 0 → 1, row 1 → 2, row 2 → 3.
        for (const [j, m] of rows.entries()) {
          const [hit] = store.knn('key-a', axis(4, (5 + j) % 4), 1, { nowIso: now() });
          expect(hit).toMatchObject({ rowId: m.rowId });
          expect(hit!.score).toBeCloseTo(1, 2);
        }
        // A zero vector still removes the stored one.
        store.upsertOne(rows[0]!.rowId, 'key-a', vec(0, 0, 0, 0), rows[0]!.contentHash);
        expect(store.stats().rowCount).toBe(2);
      }
    });

    it('a stale-hash upsert stores the vector but never clears the newer edit\'s flag', () => {
      const { s, store, create } = fresh();
      const [m] = create([memoryInput({ content: 'old text' })]);
      store.rebuild(sig(store, 4), 4);
      s.memory.update(m!.id, { content: 'new text' }, ctx);
      const pending = store.pendingReindex(10);
      expect(pending).toHaveLength(1);
      expect(pending[0]!.contentHash).not.toBe(m!.contentHash);

      expect(store.upsertOne(m!.rowId, 'key-a', vec(1, 0, 0, 0), m!.contentHash)).toEqual({ stored: true, cleared: false, skipped: null });
      expect(store.countPending()).toBe(1);
      expect(store.upsertOne(m!.rowId, 'key-a', vec(0, 1, 0, 0), pending[0]!.contentHash)).toMatchObject({ cleared: true });
      expect(store.countPending()).toBe(0);
      expect(store.stats().rowCount).toBe(1);
    });

    it('never stores an all-zero vector: it removes the old one and clears the flag (keyword-only memory)', () => {
      const { store, create } = fresh();
      const [m] = create([memoryInput()]);
      store.rebuild(sig(store, 3), 3);
      store.upsertOne(m!.rowId, 'key-a', vec(1, 0, 0), m!.contentHash);
      expect(store.upsertOne(m!.rowId, 'key-a', vec(0, 0, 0), m!.contentHash)).toEqual({ stored: false, cleared: true, skipped: 'zero_vector' });
      expect(store.stats()).toMatchObject({ rowCount: 0, needsReindex: 0 });
      expect(() => store.knn('key-a', vec(0, 0, 0), 3, { nowIso: now() })).toThrow(expect.objectContaining({ reason: 'zero_query_vector' }));
      expect(() => store.upsertOne(m!.rowId, 'key-a', vec(NaN, 0, 1), m!.contentHash)).toThrow(VectorInputError);
    });

    it('skips a memory deleted while it was embedded, and refuses another tenant or a wrong dimension', () => {
      const { s, store, create } = fresh();
      const [gone, kept] = create([memoryInput(), memoryInput()]);
      store.rebuild(sig(store, 3), 3);
      s.memory.delete(gone!.id, ctx);
      expect(store.upsertOne(gone!.rowId, 'key-a', vec(1, 0, 0), gone!.contentHash)).toEqual({ stored: false, cleared: false, skipped: 'memory_missing' });
      expect(() => store.upsertOne(kept!.rowId, 'key-b', vec(1, 0, 0), kept!.contentHash)).toThrow(
        expect.objectContaining({ reason: 'tenant_mismatch' }),
      );
      expect(() => store.upsertOne(kept!.rowId, 'key-a', vec(1, 0), kept!.contentHash)).toThrow(expect.objectContaining({ reason: 'dimension_mismatch' }));
      expect(store.stats().rowCount).toBe(0);
    });

    it('upsertMany is one transaction and refuses (writing nothing) when the index moved to another signature', () => {
      const { store, create } = fresh();
      const rows = create([memoryInput(), memoryInput(), memoryInput()]);
      store.rebuild(sig(store, 3), 3);
      const batch = rows.map((m, i) => ({ rowId: m.rowId, apiKeyId: m.apiKeyId, vector: axis(3, i), contentHash: m.contentHash }));
      expect(() => store.upsertMany(batch, sig(store, 3, 'previous-model'))).toThrow(expect.objectContaining({ reason: 'signature_mismatch' }));
      expect(store.stats()).toMatchObject({ rowCount: 0, needsReindex: 3 });
      // One bad row rolls back the whole batch.
      expect(() => store.upsertMany([...batch.slice(0, 2), { ...batch[2]!, vector: vec(1, 2) }])).toThrow(VectorInputError);
      expect(store.stats()).toMatchObject({ rowCount: 0, needsReindex: 3 });
      expect(store.upsertMany(batch, sig(store, 3))).toEqual({ stored: 3, cleared: 3, zeroVectors: 0, missing: 0 });
      expect(store.stats()).toMatchObject({ rowCount: 3, needsReindex: 0 });
    });

    it('deleting a memory through MemoryService deletes its vector in the same transaction; a rollback keeps both', () => {
      const { s, store, create } = fresh();
      const [m, other] = create([memoryInput(), memoryInput()]);
      store.rebuild(sig(store, 3), 3);
      store.upsertMany([
        { rowId: m!.rowId, apiKeyId: 'key-a', vector: vec(1, 0, 0), contentHash: m!.contentHash },
        { rowId: other!.rowId, apiKeyId: 'key-a', vector: vec(0, 1, 0), contentHash: other!.contentHash },
      ]);
      const rollback = new Error('rollback');
      let insideTx = -1;
      expect(() =>
        s.db.db
          .transaction(() => {
            s.memory.deleteInTx(m!.id, ctx);
            insideTx = store.stats().rowCount;
            throw rollback;
          })
          .immediate(),
      ).toThrow(rollback);
      expect(insideTx).toBe(1);
      expect(s.memory.get(m!.id)).not.toBeNull();
      expect(store.stats().rowCount).toBe(2);
      expect(store.knn('key-a', vec(1, 0, 0), 1, { nowIso: now() })[0]!.id).toBe(m!.id);

      expect(s.memory.delete(m!.id, ctx)).toBe(true);
      expect(store.stats().rowCount).toBe(1);
      expect(store.knn('key-a', vec(1, 0, 0), 5, { nowIso: now() }).map((h) => h.id)).toEqual([other!.id]);
    });

    it('pendingReindex pages by memory_id after a cursor', () => {
      const { store, create } = fresh();
      const rows = create([memoryInput(), memoryInput(), memoryInput(), memoryInput({ apiKeyId: 'key-b' })]);
      store.rebuild(sig(store, 2), 2);
      const ids = rows.map((m) => m.rowId);
      const page1 = store.pendingReindex(2, 0);
      expect(page1.map((p) => p.rowId)).toEqual(ids.slice(0, 2));
      expect(page1[0]).toEqual({ rowId: ids[0], id: rows[0]!.id, content: rows[0]!.content, contentHash: rows[0]!.contentHash, apiKeyId: 'key-a' });
      expect(store.pendingReindex(10, page1[1]!.rowId).map((p) => p.rowId)).toEqual(ids.slice(2));
      store.upsertOne(ids[0]!, 'key-a', vec(1, 0), rows[0]!.contentHash);
      expect(store.countPending()).toBe(3);
      expect(store.markAllNeedsReindex()).toBe(1);
      expect(store.countPending()).toBe(4);
    });
  });

  describe('knn', () => {
    const DIM = 16;
    const q = axis(DIM, 0);
    let o: ReturnType<typeof fresh>;
    let tenantA: MemoryRecord[];
    let tenantB: MemoryRecord[];
    let rareB: MemoryRecord[];

    beforeAll(() => {
      o = fresh('none', 0);
      const r = rng(42);
      tenantA = o.create(Array.from({ length: 5 }, () => memoryInput({ apiKeyId: 'tenant-a' })));
      tenantB = o.create(Array.from({ length: 5000 }, () => memoryInput({ apiKeyId: 'tenant-b', sessionId: 'b-main' })));
      rareB = o.create(Array.from({ length: 3 }, () => memoryInput({ apiKeyId: 'tenant-b', sessionId: 'b-rare' })));
      o.store.rebuild(sig(o.store, DIM), DIM);
      const far = axis(DIM, 0, -1);
      o.store.upsertMany([
        ...tenantA.map((m) => ({ rowId: m.rowId, apiKeyId: m.apiKeyId, vector: near(far, 0.3, r), contentHash: m.contentHash })),
        ...tenantB.map((m) => ({ rowId: m.rowId, apiKeyId: m.apiKeyId, vector: near(q, 0.3, r), contentHash: m.contentHash })),
        ...rareB.map((m) => ({ rowId: m.rowId, apiKeyId: m.apiKeyId, vector: near(far, 0.3, r), contentHash: m.contentHash })),
      ]);
    });

    it('the tenant is the vec0 partition: 5000 closer rows of another tenant never crowd out A\'s 5', () => {
      const hits = o.store.knn('tenant-a', q, 5, { nowIso: now() });
      expect(hits.map((h) => h.id).sort()).toEqual(tenantA.map((m) => m.id).sort());
      // The KNN itself returned only A's rows: no candidate slot went to tenant B.
      const blob = Buffer.from(q.buffer);
      const candidates = o.store['repo'].knnCandidates('tenant-a', blob, 5, 'none', { nowIso: now(), freshAfterIso: null, sessionId: null });
      expect(candidates).toHaveLength(5);
      expect(candidates.every((c) => c.id !== null)).toBe(true);

      const b = o.store.knn('tenant-b', q, 20, { nowIso: now() });
      expect(b).toHaveLength(20);
      const bIds = new Set(tenantB.map((m) => m.id));
      expect(b.every((h) => bIds.has(h.id))).toBe(true);
      expect(o.store.knn('tenant-nobody', q, 5, { nowIso: now() })).toEqual([]);
    });

    it('returns hits ordered by distance with scores = 1 - distance clamped to [0, 1]', () => {
      const hits = o.store.knn('tenant-b', q, 50, { nowIso: now() });
      for (let i = 1; i < hits.length; i++) expect(hits[i]!.distance).toBeGreaterThanOrEqual(hits[i - 1]!.distance);
      for (const h of hits) {
        expect(h.score).toBeGreaterThanOrEqual(0);
        expect(h.score).toBeLessThanOrEqual(1);
        expect(h.score).toBeCloseTo(Math.min(1, Math.max(0, 1 - h.distance)), 10);
      }
      const a = o.store.knn('tenant-a', q, 5, { nowIso: now() });
      // A's vectors point away from the query: cosine distance > 1, score clamps to 0.
      expect(a.every((h) => h.distance > 1 && h.score === 0)).toBe(true);
    });

    it('past vec0\'s k cap of 4096 it ranks the filtered rows exactly instead of returning too few', () => {
      const spy = jest.spyOn(o.store['repo'], 'exactScan');
      const knnSpy = jest.spyOn(o.store['repo'], 'knnCandidates');
      const hits = o.store.knn('tenant-b', q, 3, { nowIso: now(), sessionId: 'b-rare' });
      expect(hits.map((h) => h.id).sort()).toEqual(rareB.map((m) => m.id).sort());
      expect(spy).toHaveBeenCalledTimes(1);
      expect(knnSpy.mock.calls.map((c) => c[2])).toEqual([3, 12, 24, 48, 96, 192, 384, 768, 1536, 3072, VEC0_MAX_K]);
      spy.mockRestore();
      knnSpy.mockRestore();
    });
  });

  describe('knn filters', () => {
    const q = vec(1, 0, 0, 0);

    async function fixture(exactScanMaxRows?: number) {
      const o = fresh('none', exactScanMaxRows);
      const r = rng(7);
      const past = new Date(Date.now() - 60_000).toISOString();
      // Closest to the query, but expired.
      const expired = o.create(Array.from({ length: 60 }, () => memoryInput({ apiKeyId: 't', expiresAt: past, sessionId: 's1' })));
      const old = o.create([memoryInput({ apiKeyId: 't', sessionId: 's1' })]);
      await sleep(5);
      const cutoff = now();
      const otherSession = o.create([memoryInput({ apiKeyId: 't', sessionId: 's2' })]);
      const future = new Date(Date.now() + 3_600_000).toISOString();
      const live = o.create(Array.from({ length: 5 }, () => memoryInput({ apiKeyId: 't', sessionId: 's1', expiresAt: future })));
      o.store.rebuild(sig(o.store, 4), 4);
      const put = (rows: MemoryRecord[], v: () => Float32Array) =>
        o.store.upsertMany(rows.map((m) => ({ rowId: m.rowId, apiKeyId: 't', vector: v(), contentHash: m.contentHash })));
      put(expired, () => near(q, 0.05, r));
      put(old, () => vec(0.99, 0.14, 0, 0));
      put(otherSession, () => vec(0.98, 0.2, 0, 0));
      put(live, () => near(vec(0, 1, 0, 0), 0.3, r));
      return { o, expired, old, otherSession, live, cutoff };
    }

    it('excludes expired rows, rows older than the retention cutoff and other sessions', async () => {
      const f = await fixture();
      const ids = (filter: Parameters<SqliteVecStore['knn']>[3], k = 10) => f.o.store.knn('t', q, k, filter).map((h) => h.id);
      const expiredIds = new Set(f.expired.map((m) => m.id));

      const noFilter = ids({ nowIso: now() });
      expect(noFilter.some((id) => expiredIds.has(id))).toBe(false);
      expect(noFilter).toHaveLength(7);
      expect(noFilter.slice(0, 2)).toEqual([f.old[0]!.id, f.otherSession[0]!.id]);

      const retained = ids({ nowIso: now(), freshAfterIso: f.cutoff });
      expect(retained).not.toContain(f.old[0]!.id);
      expect(retained).toHaveLength(6);

      const session = ids({ nowIso: now(), sessionId: 's1' });
      expect(session).not.toContain(f.otherSession[0]!.id);
      expect(session.sort()).toEqual([f.old[0]!.id, ...f.live.map((m) => m.id)].sort());

      expect(ids({ nowIso: now(), sessionId: 's1', freshAfterIso: f.cutoff }).sort()).toEqual(f.live.map((m) => m.id).sort());
      // "now" past the live rows' expiry leaves only rows that never expire.
      expect(ids({ nowIso: new Date(Date.now() + 7_200_000).toISOString() }).sort()).toEqual([f.old[0]!.id, f.otherSession[0]!.id].sort());
    });

    it('asks vec0 for exactly k first: with nothing filtered out that is the answer, one query', () => {
      const o = fresh('none', 0);
      const r = rng(11);
      const rows = o.create(Array.from({ length: 200 }, () => memoryInput({ apiKeyId: 't' })));
      o.store.rebuild(sig(o.store, 8), 8);
      o.store.upsertMany(rows.map((m) => ({ rowId: m.rowId, apiKeyId: 't', vector: randomUnit(8, r), contentHash: m.contentHash })));
      const knnSpy = jest.spyOn(o.store['repo'], 'knnCandidates');
      const query = randomUnit(8, r);
      const hits = o.store.knn('t', query, 10, { nowIso: now() });
      expect(knnSpy.mock.calls.map((c) => c[2])).toEqual([10]);
      const exact = o.store['repo'].exactScan('t', Buffer.from(query.buffer), 10, 'none', { nowIso: now(), freshAfterIso: null, sessionId: null });
      expect(hits.map((h) => h.rowId)).toEqual(exact.map((h) => h.rowId));
    });

    it('returns exactly the exact scan\'s top k on a generated set where filters drop some of the nearest rows', () => {
      const o = fresh('none', 0);
      const r = rng(23);
      const past = new Date(Date.now() - 60_000).toISOString();
      const inputs = Array.from({ length: 600 }, (_, i) =>
        memoryInput({ apiKeyId: 't', sessionId: i % 3 === 0 ? 'other' : 'main', ...(i % 5 === 0 ? { expiresAt: past } : {}) }),
      );
      const rows = o.create(inputs);
      const others = o.create(Array.from({ length: 300 }, () => memoryInput({ apiKeyId: 'u' })));
      o.store.rebuild(sig(o.store, 12), 12);
      o.store.upsertMany(rows.map((m) => ({ rowId: m.rowId, apiKeyId: 't', vector: randomUnit(12, r), contentHash: m.contentHash })));
      for (let i = 0; i < 25; i++) {
        const query = randomUnit(12, r);
        // Another tenant's rows sit right on the query: they must never appear or take a slot.
        o.store.upsertMany(others.slice(i * 12, i * 12 + 12).map((m) => ({ rowId: m.rowId, apiKeyId: 'u', vector: near(query, 0.01, r), contentHash: m.contentHash })));
        for (const [k, sessionId] of [[20, null], [7, 'main'], [40, 'other']] as const) {
          const filter = { nowIso: now(), freshAfterIso: null, sessionId };
          const hits = o.store.knn('t', query, k, { nowIso: filter.nowIso, sessionId });
          const exact = o.store['repo'].exactScan('t', Buffer.from(query.buffer), k, 'none', filter);
          expect(hits.map((h) => h.rowId)).toEqual(exact.map((h) => h.rowId));
        }
      }
    });

    it('widens the KNN (doubling) when filters remove too many candidates', async () => {
      const f = await fixture(0);
      const knnSpy = jest.spyOn(f.o.store['repo'], 'knnCandidates');
      const exactSpy = jest.spyOn(f.o.store['repo'], 'exactScan');
      const hits = f.o.store.knn('t', q, 5, { nowIso: now(), sessionId: 's1', freshAfterIso: f.cutoff });
      expect(hits.map((h) => h.id).sort()).toEqual(f.live.map((m) => m.id).sort());
      expect(knnSpy.mock.calls.map((c) => c[2])).toEqual([5, 20, 40, 80]);
      expect(exactSpy).not.toHaveBeenCalled();
    });

    it('scores selective filters exactly when few rows qualify', async () => {
      const f = await fixture();
      const knnSpy = jest.spyOn(f.o.store['repo'], 'knnCandidates');
      const exactSpy = jest.spyOn(f.o.store['repo'], 'exactScan');
      const hits = f.o.store.knn('t', q, 5, { nowIso: now(), sessionId: 's1', freshAfterIso: f.cutoff });
      expect(hits.map((h) => h.id).sort()).toEqual(f.live.map((m) => m.id).sort());
      expect(knnSpy).toHaveBeenCalledTimes(1);
      expect(exactSpy).toHaveBeenCalledTimes(1);
      // The exact path and the KNN path agree on distances.
      const viaKnn = f.o.store.knn('t', q, 7, { nowIso: now() });
      const viaExact = f.o.store['repo'].exactScan('t', Buffer.from(q.buffer), 7, 'none', { nowIso: now(), freshAfterIso: null, sessionId: null });
      expect(viaExact.map((h) => h.rowId)).toEqual(viaKnn.map((h) => h.rowId));
      viaExact.forEach((h, i) => expect(h.distance).toBeCloseTo(viaKnn[i]!.distance, 6));
    });
  });

  describe('int8 quantization', () => {
    it('finds the same nearest neighbour as float32 (exact on a hand-built fixture, >= 95% on random unit vectors)', () => {
      const { store, create } = fresh('int8');
      const DIM = 384;
      const r = rng(2024);
      const rows = create(Array.from({ length: 200 }, () => memoryInput({ apiKeyId: 'q8' })));
      const vectors = rows.map(() => randomUnit(DIM, r));
      // Queries are random unit vectors near a random stored one, so "nearest" is well defined.
      const queries = Array.from({ length: 50 }, () => near(vectors[Math.floor(r() * vectors.length)]!, 0.08, r));
      const batch = rows.map((m, i) => ({ rowId: m.rowId, apiKeyId: 'q8', vector: vectors[i]!, contentHash: m.contentHash }));
      const bruteTop1 = queries.map((qv) => {
        let best = -1;
        let bestDot = -Infinity;
        vectors.forEach((v, i) => {
          const d = dot(qv, v);
          if (d > bestDot) [best, bestDot] = [i, d];
        });
        return rows[best]!.rowId;
      });
      const top1 = () => queries.map((qv) => store.knn('q8', qv, 1, { nowIso: now() })[0]!.rowId);

      store.rebuild(sig(store, DIM, 'm', 'none'), DIM);
      store.upsertMany(batch);
      const floatTop1 = top1();
      expect(floatTop1).toEqual(bruteTop1);

      store.rebuild(sig(store, DIM, 'm', 'int8'), DIM);
      expect(store.countPending()).toBe(200);
      store.upsertMany(batch);
      const int8Top1 = top1();
      const agreement = int8Top1.filter((id, i) => id === floatTop1[i]).length / queries.length;
      expect(agreement).toBeGreaterThanOrEqual(0.95);
      for (const qv of queries.slice(0, 5)) {
        for (const h of store.knn('q8', qv, 10, { nowIso: now() })) {
          expect(h.score).toBeGreaterThanOrEqual(0);
          expect(h.score).toBeLessThanOrEqual(1);
        }
      }
    });

    it('agrees exactly on a hand-built fixture, in both storage types', () => {
      const { store, create } = fresh('int8');
      const rows = create(Array.from({ length: 4 }, () => memoryInput({ apiKeyId: 'h' })));
      const vs = [vec(1, 0, 0, 0), vec(0.8, 0.6, 0, 0), vec(0, 1, 0, 0), vec(0, 0, 0.6, 0.8)];
      const batch = rows.map((m, i) => ({ rowId: m.rowId, apiKeyId: 'h', vector: vs[i]!, contentHash: m.contentHash }));
      const order = (qv: Float32Array) => store.knn('h', qv, 4, { nowIso: now() }).map((x) => rows.findIndex((m) => m.rowId === x.rowId));
      const queries = [vec(0.95, 0.1, 0, 0), vec(0.7, 0.7, 0, 0), vec(0.1, 0.9, 0.1, 0), vec(0, 0.1, 0.5, 0.9)];
      const expected = [0, 1, 2, 3];
      for (const quant of ['none', 'int8'] as const) {
        store.rebuild(sig(store, 4, 'm', quant), 4);
        store.upsertMany(batch);
        expect(queries.map((qv) => order(qv)[0])).toEqual(expected);
        expect(order(vec(1, 0, 0, 0))).toEqual([0, 1, 2, 3]);
      }
    });
  });

  describe('without sqlite-vec', () => {
    it('is unavailable: knn throws VectorUnavailableError, deletes are no-ops, MemoryService still deletes', () => {
      const dir = tempDir();
      // One process builds the index; another runs with the extension disabled on the same file.
      const withVec = open('none', testEnv({ DATA_DIR: dir }));
      const noVec = open('none', testEnv({ DATA_DIR: dir, VECTOR_STORE_DISABLE_VEC: 'true' }));
      opened.push(withVec.s, noVec.s);
      expect(noVec.s.db.vecLoaded).toBe(false);

      const [m, other] = withVec.create([memoryInput(), memoryInput()]);
      withVec.store.rebuild(sig(withVec.store, 3), 3);
      withVec.store.upsertMany([
        { rowId: m!.rowId, apiKeyId: 'key-a', vector: vec(1, 0, 0), contentHash: m!.contentHash },
        { rowId: other!.rowId, apiKeyId: 'key-a', vector: vec(0, 1, 0), contentHash: other!.contentHash },
      ]);

      const store = noVec.store;
      expect(store.available()).toBe(false);
      expect(store.isCompatible(sig(store, 3))).toBe(false);
      expect(() => store.knn('key-a', vec(1, 0, 0), 1, { nowIso: now() })).toThrow(VectorUnavailableError);
      expect(() => store.knn('key-a', vec(1, 0, 0), 1, { nowIso: now() })).toThrow(expect.objectContaining({ reason: 'extension_not_loaded' }));
      expect(() => store.upsertOne(m!.rowId, 'key-a', vec(1, 0, 0), m!.contentHash)).toThrow(VectorUnavailableError);
      expect(() => store.rebuild(sig(store, 3), 3)).toThrow(VectorUnavailableError);
      expect(store.deleteInTx(m!.rowId)).toBe(false);
      expect(store.pruneOrphans()).toBe(0);
      expect(store.stats()).toMatchObject({ available: false, rowCount: 0, needsReindex: 0, activeDim: 3, signature: sig(store, 3) });

      // The delete hook is a no-op here, so the memory goes and its vector is left behind ...
      expect(noVec.s.memory.delete(m!.id, ctx)).toBe(true);
      expect(withVec.store.stats().rowCount).toBe(2);
      // ... invisible to search (the join drops it) and removed by the repair sweep.
      expect(withVec.store.knn('key-a', vec(1, 0, 0), 5, { nowIso: now() }).map((h) => h.id)).toEqual([other!.id]);
      expect(withVec.store.pruneOrphans()).toBe(1);
      expect(withVec.store.stats().rowCount).toBe(1);
    });
  });
});
