import { memoryInput } from '../../test/factories';
import { testEnv } from '../../test/helpers/env';
import { tempStorage } from '../../test/helpers/storage';
import { mulberry32 as rng } from '../../test/helpers/prng';
import type { Env } from '../config/env';
import type { MemoryRecord } from '../memory/types';
import type { VectorRepository } from './sqlite-vec.repository';
import { normalise, SqliteVecStore } from './sqlite-vec.store';
import { DotScanMatrix } from './dot-scan';

const ctx = { source: 'api' as const };
const now = () => new Date().toISOString();

function gaussian(r: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
}
function randomUnit(dim: number, r: () => number): Float32Array {
  const v = new Float32Array(dim);
  for (let i = 0; i < dim; i++) v[i] = gaussian(r);
  return normalise(v)!;
}
/** Clustered unit vectors (topics plus noise), like sentence embeddings: many near-ties. */
function clustered(dim: number, r: () => number, centres: Float32Array[]): Float32Array {
  const c = centres[Math.floor(r() * centres.length)]!;
  const v = new Float32Array(dim);
  for (let i = 0; i < dim; i++) v[i] = c[i]! + 0.35 * gaussian(r);
  return normalise(v)!;
}

/** One "process": its own connection and store over the shared database file. */
function proc(env: Env, scanCacheBytes: number) {
  const s = tempStorage(env);
  const store = new SqliteVecStore(s.db.db, { vecLoaded: s.db.vecLoaded, quantization: 'none', scanCacheBytes });
  s.memory.addHooks({ onDeleteInTx: (rowId) => store.deleteInTx(rowId) });
  return { s, store, create: (inputs: Parameters<typeof s.memory.upsertMany>[0]): MemoryRecord[] => s.memory.upsertMany(inputs, ctx).map((c) => c.memory) };
}

const MB = 1_048_576;

describe('SqliteVecStore with the in-memory WebAssembly scan (issue #14)', () => {
  const opened: { close(): void }[] = [];
  afterAll(() => opened.forEach((o) => o.close()));
  function open(env = testEnv(), scanCacheBytes = 64 * MB) {
    const p = proc(env, scanCacheBytes);
    opened.push(p.s);
    return p;
  }
  const put = (store: SqliteVecStore, rows: MemoryRecord[], v: (m: MemoryRecord) => Float32Array) =>
    store.upsertMany(rows.map((m) => ({ rowId: m.rowId, apiKeyId: m.apiKeyId, vector: v(m), contentHash: m.contentHash })));

  it('returns what vec0 returns (same ids, same order, same distances to 1e-6) and scans only the tenant', () => {
    const env = testEnv();
    const fast = open(env);
    const vec0 = open(env, 0);
    const r = rng(3);
    const dim = 24;
    const a = fast.create(Array.from({ length: 300 }, () => memoryInput({ apiKeyId: 'a' })));
    const b = fast.create(Array.from({ length: 300 }, () => memoryInput({ apiKeyId: 'b' })));
    fast.store.rebuild(`static:m:${dim}`, dim);
    put(fast.store, [...a, ...b], () => randomUnit(dim, r));
    const aIds = new Set(a.map((m) => m.id));
    for (let t = 0; t < 20; t++) {
      const q = randomUnit(dim, r);
      const got = fast.store.knn('a', q, 20, { nowIso: now() });
      const want = vec0.store.knn('a', q, 20, { nowIso: now() });
      expect(got.map((h) => h.id)).toEqual(want.map((h) => h.id));
      got.forEach((h, i) => expect(h.distance).toBeCloseTo(want[i]!.distance, 6));
      expect(got.every((h) => aIds.has(h.id))).toBe(true);
    }
    expect(fast.store.scanCache.tenants).toBe(1); // b was never loaded
  });

  it('never lets another tenant take a slot, even with identical vectors', () => {
    const p = open();
    const dim = 8;
    const e0 = new Float32Array(dim);
    e0[0] = 1;
    const mine = p.create(Array.from({ length: 3 }, () => memoryInput({ apiKeyId: 'mine' })));
    const theirs = p.create(Array.from({ length: 50 }, () => memoryInput({ apiKeyId: 'theirs' })));
    p.store.rebuild(`static:m:${dim}`, dim);
    put(p.store, [...theirs, ...mine], () => e0);
    const hits = p.store.knn('mine', e0, 10, { nowIso: now() });
    expect(hits.map((h) => h.id).sort()).toEqual(mine.map((m) => m.id).sort());
  });

  it("sees another process's inserts, re-embeddings, deletes and rebuilds before the next search", () => {
    const env = testEnv();
    const api = open(env);
    const worker = open(env, 0);
    const dim = 8;
    const r = rng(5);
    const rows = worker.create(Array.from({ length: 40 }, () => memoryInput({ apiKeyId: 't' })));
    worker.store.rebuild(`static:m:${dim}`, dim);
    put(worker.store, rows, () => randomUnit(dim, r));
    const q = randomUnit(dim, r);
    api.store.knn('t', q, 5, { nowIso: now() }); // loads the copy

    // a new memory exactly at the query
    const [fresh] = worker.create([memoryInput({ apiKeyId: 't' })]);
    put(worker.store, [fresh!], () => q);
    expect(api.store.knn('t', q, 1, { nowIso: now() })[0]!.id).toBe(fresh!.id);
    // re-embedded far away
    const minusQ = q.map((x) => -x);
    put(worker.store, [fresh!], () => minusQ);
    expect(api.store.knn('t', q, 5, { nowIso: now() }).map((h) => h.id)).not.toContain(fresh!.id);
    expect(api.store.knn('t', minusQ, 1, { nowIso: now() })[0]!.id).toBe(fresh!.id);
    // deleted (memory delete hook) and the vector gone from the copy, not only filtered
    worker.s.memory.delete(fresh!.id, ctx);
    expect(api.store.knn('t', minusQ, 41, { nowIso: now() }).map((h) => h.id)).not.toContain(fresh!.id);
    expect(api.store.scanCache.bytesHeld).toBeGreaterThan(0);
    // a rebuild for another width: the copy is dropped, the new vectors are searched
    worker.store.rebuild('static:m2:4', 4);
    expect(api.store.knn('t', new Float32Array([1, 0, 0, 0]), 5, { nowIso: now() })).toEqual([]);
    put(worker.store, rows.slice(0, 3), () => new Float32Array([1, 0, 0, 0]));
    expect(api.store.knn('t', new Float32Array([1, 0, 0, 0]), 5, { nowIso: now() }).map((h) => h.id).sort()).toEqual(rows.slice(0, 3).map((m) => m.id).sort());
  });

  it('reads no change log for a search when nothing was logged since the copy caught up', () => {
    const env = testEnv();
    const api = open(env);
    const dim = 8;
    const r = rng(9);
    const rows = api.create(Array.from({ length: 20 }, () => memoryInput({ apiKeyId: 't' })));
    api.store.rebuild(`static:m:${dim}`, dim);
    put(api.store, rows, () => randomUnit(dim, r));
    const q = randomUnit(dim, r);
    const first = api.store.knn('t', q, 5, { nowIso: now() }); // loads the copy
    const log = (api.store.scanCache as unknown as { repo: VectorRepository }).repo.log;
    const logSince = jest.spyOn(log, 'since');
    expect(api.store.knn('t', q, 5, { nowIso: now() })).toEqual(first);
    expect(logSince).not.toHaveBeenCalled();
    const [fresh] = api.create([memoryInput({ apiKeyId: 't' })]);
    put(api.store, [fresh!], () => q);
    expect(api.store.knn('t', q, 1, { nowIso: now() })[0]!.id).toBe(fresh!.id);
    expect(logSince).toHaveBeenCalledTimes(1);
    logSince.mockRestore();
  });

  it('reloads a copy whose log generation changed even when the head did not move (change-log.ts: the reader compares it first)', () => {
    const env = testEnv();
    const api = open(env);
    const dim = 8;
    const r = rng(10);
    const rows = api.create(Array.from({ length: 20 }, () => memoryInput({ apiKeyId: 't' })));
    api.store.rebuild(`static:m:${dim}`, dim);
    put(api.store, rows, () => randomUnit(dim, r));
    const q = randomUnit(dim, r);
    const [top] = api.store.knn('t', q, 1, { nowIso: now() }); // loads the copy
    // The table changed under an emptied log (as a rebuild does): no entry, the same head, a new generation.
    const db = api.s.db.db;
    const head = (api.store.scanCache as unknown as { repo: VectorRepository }).repo.log.head();
    db.prepare('DELETE FROM vec_memories WHERE memory_id = ?').run(BigInt(rows.find((m) => m.id === top!.id)!.rowId));
    db.prepare('UPDATE memory_vec_log_state SET generation = generation + 1 WHERE id = 1').run();
    expect((api.store.scanCache as unknown as { repo: VectorRepository }).repo.log.head()).toBe(head);
    expect(api.store.knn('t', q, 1, { nowIso: now() })[0]!.id).not.toBe(top!.id);
  });

  it('a warm search reads SQLite once when nothing changed and the caller vouches for every top row (index state in one statement, no liveIds)', () => {
    const env = testEnv();
    const api = open(env);
    const dim = 8;
    const r = rng(31);
    const rows = api.create(Array.from({ length: 30 }, () => memoryInput({ apiKeyId: 't' })));
    api.store.rebuild(`static:m:${dim}`, dim);
    put(api.store, rows, () => randomUnit(dim, r));
    const q = randomUnit(dim, r);
    const plain = api.store.knn('t', q, 5, { nowIso: now() }); // loads the copy
    const idOf = new Map(rows.map((m) => [m.rowId, m.id]));
    const proto = Object.getPrototypeOf(api.s.db.db.prepare('SELECT 1')) as Record<'get' | 'all' | 'iterate' | 'run', (...a: unknown[]) => unknown>;
    const spies = (['get', 'all', 'iterate', 'run'] as const).map((m) => jest.spyOn(proto, m));
    try {
      expect(api.store.knn('t', q, 5, { nowIso: now() }, (rowId) => idOf.get(rowId))).toEqual(plain);
      // Before: the meta (readyIndex), the table check, the log state, the log head and liveIds: five.
      expect(spies.reduce((n, s) => n + s.mock.calls.length, 0)).toBe(1);
    } finally {
      spies.forEach((s) => s.mockRestore());
    }
  });

  it("uses the caller's liveness for the rows it answers and asks SQLite only for the rest", () => {
    const env = testEnv();
    const api = open(env);
    const dim = 4;
    const q = new Float32Array([1, 0, 0, 0]);
    const rows = api.create(Array.from({ length: 6 }, () => memoryInput({ apiKeyId: 't' })));
    api.store.rebuild(`static:m:${dim}`, dim);
    // Row i is the i-th nearest.
    put(api.store, rows, (m) => new Float32Array([1, rows.indexOf(m) / 10, 0, 0]));
    const expired = new Date(Date.now() - 60_000).toISOString();
    const expire = api.s.db.db.prepare('UPDATE memories SET expires_at = ? WHERE memory_id = ?');
    expire.run(expired, rows[0]!.rowId);
    expire.run(expired, rows[2]!.rowId);
    const plain = api.store.knn('t', q, 3, { nowIso: now() }).map((h) => h.id);
    expect(plain).toEqual([rows[1]!.id, rows[3]!.id, rows[4]!.id]);
    const liveIds = jest.spyOn((api.store as unknown as { repo: { liveIds: (...a: unknown[]) => Map<number, string> } }).repo, 'liveIds');
    try {
      // Row 0: the caller knows it is not live; row 1: the caller's id; the rest: unknown, asked of SQLite.
      const known = (rowId: number) => (rowId === rows[0]!.rowId ? null : rowId === rows[1]!.rowId ? rows[1]!.id : undefined);
      expect(api.store.knn('t', q, 3, { nowIso: now() }, known).map((h) => h.id)).toEqual(plain);
      // The first pass's top three were rows 0, 1, 2: only row 2 went to SQL (before: all three).
      expect(liveIds.mock.calls[0]![1]).toEqual([rows[2]!.rowId]);
    } finally {
      liveIds.mockRestore();
    }
  });

  it("another connection's table drop, rebuild for another model and re-creation are seen by the next search", () => {
    const env = testEnv();
    const api = open(env);
    const worker = open(env, 0);
    const dim = 4;
    const q = new Float32Array([1, 0, 0, 0]);
    const rows = worker.create(Array.from({ length: 5 }, () => memoryInput({ apiKeyId: 't' })));
    worker.store.rebuild(`static:m:${dim}`, dim);
    put(worker.store, rows, () => q);
    expect(api.store.knn('t', q, 5, { nowIso: now(), signature: `static:m:${dim}` })).toHaveLength(5);
    worker.s.db.db.exec('DROP TABLE vec_memories');
    expect(() => api.store.knn('t', q, 5, { nowIso: now(), signature: `static:m:${dim}` })).toThrow(expect.objectContaining({ reason: 'index_not_built' }));
    worker.store.rebuild('static:other:4', 4);
    expect(() => api.store.knn('t', q, 5, { nowIso: now(), signature: `static:m:${dim}` })).toThrow(expect.objectContaining({ reason: 'signature_mismatch' }));
    expect(api.store.knn('t', q, 5, { nowIso: now(), signature: 'static:other:4' })).toEqual([]);
    put(worker.store, rows.slice(0, 2), () => q);
    expect(api.store.knn('t', q, 5, { nowIso: now(), signature: 'static:other:4' }).map((h) => h.id).sort()).toEqual(rows.slice(0, 2).map((m) => m.id).sort());
  });

  it('reloads a tenant whose unseen log entries were pruned', () => {
    const env = testEnv();
    const api = open(env);
    const dim = 8;
    const r = rng(9);
    const rows = api.create(Array.from({ length: 10 }, () => memoryInput({ apiKeyId: 't' })));
    api.store.rebuild(`static:m:${dim}`, dim);
    put(api.store, rows, () => randomUnit(dim, r));
    const q = randomUnit(dim, r);
    api.store.knn('t', q, 3, { nowIso: now() });
    // Another writer replaced a vector and the log was pruned past it.
    put(api.store, [rows[0]!], () => q);
    api.s.db.db.prepare('DELETE FROM memory_vec_log').run();
    api.s.db.db.prepare('UPDATE memory_vec_log_state SET pruned_below = (SELECT seq FROM sqlite_sequence WHERE name = ?)').run('memory_vec_log');
    expect(api.store.knn('t', q, 1, { nowIso: now() })[0]!.id).toBe(rows[0]!.id);
  });

  it('a prune landing between reading the prune mark and the entries does not leave the copy stale', () => {
    const env = testEnv();
    const api = open(env);
    const dim = 8;
    const r = rng(21);
    const rows = api.create(Array.from({ length: 10 }, () => memoryInput({ apiKeyId: 't' })));
    api.store.rebuild(`static:m:${dim}`, dim);
    put(api.store, rows, () => randomUnit(dim, r));
    const q = randomUnit(dim, r);
    api.store.knn('t', q, 3, { nowIso: now() });
    // A change the copy has not seen; then another process prunes the log right after this one read the mark.
    put(api.store, [rows[0]!], () => q);
    const log = (api.store.scanCache as unknown as { repo: VectorRepository }).repo.log;
    const cut = log.head();
    // A later change that survives the prune: the copy's position moves past the cut.
    put(api.store, [rows[1]!], () => randomUnit(dim, r));
    const real = log.prunedBelow.bind(log);
    let once = true;
    jest.spyOn(log, 'prunedBelow').mockImplementation(() => {
      const state = real();
      if (once) {
        once = false;
        api.s.db.db.transaction(() => {
          api.s.db.db.prepare('DELETE FROM memory_vec_log WHERE seq <= ?').run(cut);
          api.s.db.db.prepare('UPDATE memory_vec_log_state SET pruned_below = max(pruned_below, ?) WHERE id = 1').run(cut);
        })();
      }
      return state;
    });
    api.store.knn('t', q, 1, { nowIso: now() });
    // Before: the copy moved past the pruned entry and never saw the new vector.
    expect(api.store.knn('t', q, 1, { nowIso: now() })[0]!.id).toBe(rows[0]!.id);
  });

  it('applies expiry, retention and session filters after the scan (over-fetching like vec0)', () => {
    const env = testEnv();
    const fast = open(env);
    const vec0 = open(env, 0);
    const dim = 4;
    const q = new Float32Array([1, 0, 0, 0]);
    const r = rng(13);
    const past = new Date(Date.now() - 60_000).toISOString();
    const expired = fast.create(Array.from({ length: 60 }, () => memoryInput({ apiKeyId: 't', expiresAt: past, sessionId: 's1' })));
    const live = fast.create(Array.from({ length: 30 }, (_, i) => memoryInput({ apiKeyId: 't', sessionId: i % 2 ? 's1' : 's2' })));
    fast.store.rebuild(`static:m:${dim}`, dim);
    put(fast.store, expired, () => q);
    put(fast.store, live, () => randomUnit(dim, r));
    for (const filter of [{ nowIso: now() }, { nowIso: now(), sessionId: 's1' }, { nowIso: now(), sessionId: 's2' }]) {
      const got = fast.store.knn('t', q, 10, filter).map((h) => h.id);
      expect(got).toEqual(vec0.store.knn('t', q, 10, filter).map((h) => h.id));
      expect(got).toHaveLength(10);
      expect(got.some((id) => expired.some((m) => m.id === id))).toBe(false);
    }
  });

  it('recall@20 against exact float KNN is ≥ 0.99 on 5,000 clustered 100-d vectors', () => {
    const env = testEnv();
    const fast = open(env);
    const dim = 100;
    const r = rng(21);
    const centres = Array.from({ length: 40 }, () => randomUnit(dim, r));
    const rows = fast.create(Array.from({ length: 5000 }, () => memoryInput({ apiKeyId: 't' })));
    fast.store.rebuild(`static:m:${dim}`, dim);
    put(fast.store, rows, () => clustered(dim, r, centres));
    const repo = fast.store['repo'];
    let found = 0;
    let total = 0;
    for (let t = 0; t < 30; t++) {
      const q = clustered(dim, r, centres);
      const exact = repo.exactScan('t', Buffer.from(q.buffer), 20, 'none', { nowIso: now(), freshAfterIso: null, sessionId: null }).map((h) => h.rowId);
      const got = new Set(fast.store.knn('t', q, 20, { nowIso: now() }).map((h) => h.rowId));
      found += exact.filter((id) => got.has(id)).length;
      total += exact.length;
    }
    expect(found / total).toBeGreaterThanOrEqual(0.99);
  });

  it('falls back to vec0 when the tenant does not fit the budget', () => {
    const p = open(testEnv(), 1024); // 1 KB: not even 100 rows of 8 floats
    const dim = 8;
    const r = rng(17);
    const rows = p.create(Array.from({ length: 100 }, () => memoryInput({ apiKeyId: 't' })));
    p.store.rebuild(`static:m:${dim}`, dim);
    put(p.store, rows, () => randomUnit(dim, r));
    const spy = jest.spyOn(p.store['repo'], 'knnCandidates');
    expect(p.store.knn('t', randomUnit(dim, r), 5, { nowIso: now() })).toHaveLength(5);
    expect(spy).toHaveBeenCalled();
    expect(p.store.scanCache.tenants).toBe(0);
  });

  it('a tenant whose rows fit the budget by bytesFor but whose matrix does not (page rounding) goes to vec0 and evicts no other copy', () => {
    // 8 floats a row: 2,656 rows are 204,576 bytes by bytesFor, the matrix for them ~220 KB in whole pages.
    const budget = 204_800;
    const dim = 8;
    expect(DotScanMatrix.bytesFor(2656, dim)).toBeLessThanOrEqual(budget);
    const p = open(testEnv(), budget);
    const r = rng(29);
    const small = p.create(Array.from({ length: 10 }, () => memoryInput({ apiKeyId: 'small' })));
    const large = p.create(Array.from({ length: 2656 }, () => memoryInput({ apiKeyId: 'large' })));
    p.store.rebuild(`static:m:${dim}`, dim);
    put(p.store, [...small, ...large], () => randomUnit(dim, r));
    p.store.knn('small', randomUnit(dim, r), 5, { nowIso: now() });
    expect(p.store.scanCache.tenants).toBe(1);
    const loads = jest.spyOn(p.store['repo'], 'partitionVectors');
    for (let i = 0; i < 3; i++) expect(p.store.knn('large', randomUnit(dim, r), 5, { nowIso: now() })).toHaveLength(5);
    // Never copied (it would not fit), and the small tenant's copy is still held.
    expect(loads).not.toHaveBeenCalled();
    expect(p.store.scanCache.tenants).toBe(1);
    expect(p.store.scanCache.bytesHeld).toBeLessThanOrEqual(budget);
  });

  it('keeps a tenant between half and all of the budget across writes, without reloading it', () => {
    // 2,000 rows of 64 floats take ~0.74 MB with their int8 copy; the budget (0.9 MB) holds them but not a doubled matrix.
    const p = open(testEnv(), 900_000);
    const vec0 = open(p.s.env, 0);
    const dim = 64;
    const r = rng(23);
    const rows = p.create(Array.from({ length: 2000 }, () => memoryInput({ apiKeyId: 't' })));
    p.store.rebuild(`static:m:${dim}`, dim);
    put(p.store, rows, () => randomUnit(dim, r));
    const loads = jest.spyOn(p.store['repo'], 'partitionVectors');
    p.store.knn('t', randomUnit(dim, r), 5, { nowIso: now() });
    expect(p.store.scanCache.tenants).toBe(1);
    for (let i = 0; i < 5; i++) {
      const [fresh] = p.create([memoryInput({ apiKeyId: 't' })]);
      const q = randomUnit(dim, r);
      put(p.store, [fresh!], () => q);
      const got = p.store.knn('t', q, 5, { nowIso: now() });
      expect(got[0]!.id).toBe(fresh!.id);
      expect(got.map((h) => h.id)).toEqual(vec0.store.knn('t', q, 5, { nowIso: now() }).map((h) => h.id));
      // Still held, within the budget, and caught up from the log rather than reloaded.
      expect(p.store.scanCache.tenants).toBe(1);
      expect(p.store.scanCache.bytesHeld).toBeLessThanOrEqual(900_000);
    }
    expect(loads).toHaveBeenCalledTimes(1);
  });
});
