import Database from 'better-sqlite3';
import { MemoryReadCache } from '../../src/memory/read-cache';
import { MemoryService } from '../../src/memory/memory.service';
import { memoryInput } from '../factories';
import { tempStorage } from '../helpers/storage';

const api = { source: 'api' as const };

function fts(db: Database.Database, term: string): number[] {
  return (db.prepare('SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? ORDER BY rowid').all(`"${term}"`) as { rowid: number }[]).map((r) => r.rowid);
}
function ftsJoin(db: Database.Database, term: string): string[] {
  return (
    db.prepare('SELECT m.id FROM memory_fts f JOIN memories m ON m.memory_id = f.rowid WHERE memory_fts MATCH ? ORDER BY m.memory_id').all(`"${term}"`) as {
      id: string;
    }[]
  ).map((r) => r.id);
}

describe('memory store', () => {
  let s: ReturnType<typeof tempStorage>;
  beforeEach(() => {
    s = tempStorage();
  });
  afterEach(() => s.close());

  it('creates, reads, updates and deletes', () => {
    const { memory, created } = s.memory.create(memoryInput({ content: 'likes green tea', key: 'pref:tea' }), api);
    expect(created).toBe(true);
    expect(memory.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(memory.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(s.memory.get(memory.id)?.content).toBe('likes green tea');
    const updated = s.memory.update(memory.id, { content: 'likes black tea', metadata: { a: 1 } }, api);
    expect(updated?.content).toBe('likes black tea');
    expect(updated?.metadata).toEqual({ a: 1 });
    expect(s.memory.delete(memory.id, api)).toBe(true);
    expect(s.memory.get(memory.id)).toBeNull();
    expect(s.memory.delete(memory.id, api)).toBe(false);
    expect(s.memory.update(memory.id, { content: 'x' }, api)).toBeNull();
  });

  it('upserts on (apiKeyId, key): metadata merged, createdAt kept, session/type/content replaced', () => {
    const a = s.memory.create(memoryInput({ key: 'k', content: 'one', metadata: { a: 1, b: 1 }, sessionId: 's1' }), api).memory;
    const b = s.memory.create(memoryInput({ key: 'k', content: 'two', metadata: { b: 2, c: 3 }, sessionId: 's2', type: 'episodic' }), api);
    expect(b.created).toBe(false);
    expect(b.memory.id).toBe(a.id);
    expect(b.memory.createdAt).toBe(a.createdAt);
    expect(b.memory.metadata).toEqual({ a: 1, b: 2, c: 3 });
    expect(b.memory.content).toBe('two');
    expect(b.memory.sessionId).toBe('s2');
    expect(b.memory.type).toBe('episodic');
    // Same key under another API key is another memory.
    const other = s.memory.create(memoryInput({ key: 'k', apiKeyId: 'key-b', content: 'three' }), api);
    expect(other.created).toBe(true);
    expect(s.memory.list({}, 50, 0).total).toBe(2);
  });

  it('accepts an expiry in both upsert branches (the original threw on the update branch)', () => {
    const exp1 = new Date(Date.now() + 3600_000).toISOString();
    const exp2 = new Date(Date.now() + 7200_000).toISOString();
    const a = s.memory.create(memoryInput({ key: 'e', expiresAt: exp1 }), api).memory;
    expect(a.expiresAt).toBe(exp1);
    const b = s.memory.create(memoryInput({ key: 'e', expiresAt: exp2 }), api).memory;
    expect(b.expiresAt).toBe(exp2);
    // Omitted expiry keeps the existing one; null clears it.
    expect(s.memory.create(memoryInput({ key: 'e' }), api).memory.expiresAt).toBe(exp2);
    expect(s.memory.create(memoryInput({ key: 'e', expiresAt: null }), api).memory.expiresAt).toBeNull();
  });

  it('the database enforces the upsert key', () => {
    s.memory.create(memoryInput({ key: 'dup' }), api);
    expect(() =>
      s.db.db
        .prepare("INSERT INTO memories (id, api_key_id, type, key, content, content_hash) VALUES ('x', 'key-a', 'factual', 'dup', 'c', 'h')")
        .run(),
    ).toThrow(/UNIQUE/);
    // Empty keys are not upsert keys.
    s.memory.create(memoryInput({ key: '' }), api);
    s.memory.create(memoryInput({ key: '' }), api);
    expect(s.memory.list({ apiKeyId: 'key-a' }, 50, 0).total).toBe(3);
  });

  it('keeps FTS in step with insert, update and delete (query the index directly)', () => {
    const db = s.db.db;
    const a = s.memory.create(memoryInput({ content: 'zebra crossing', key: 'ka' }), api).memory;
    const b = s.memory.create(memoryInput({ content: 'zebra stripes', key: 'kb' }), api).memory;
    expect(ftsJoin(db, 'zebra')).toEqual([a.id, b.id]);
    // Key is indexed too.
    expect(ftsJoin(db, 'ka')).toEqual([a.id]);
    s.memory.update(a.id, { content: 'giraffe neck' }, api);
    expect(ftsJoin(db, 'zebra')).toEqual([b.id]);
    expect(ftsJoin(db, 'giraffe')).toEqual([a.id]);
    // Upsert path changes content too.
    s.memory.create(memoryInput({ content: 'okapi forest', key: 'kb' }), api);
    expect(ftsJoin(db, 'zebra')).toEqual([]);
    expect(ftsJoin(db, 'okapi')).toEqual([b.id]);
    s.memory.delete(a.id, api);
    expect(fts(db, 'giraffe')).toEqual([]);
    // No orphan FTS rows: integrity-check of the external-content index passes.
    expect(() => db.prepare("INSERT INTO memory_fts(memory_fts, rank) VALUES ('integrity-check', 1)").run()).not.toThrow();
    // Accents are folded (remove_diacritics 2).
    s.memory.create(memoryInput({ content: 'café crème', key: 'kc' }), api);
    expect(ftsJoin(db, 'cafe')).toHaveLength(1);
  });

  it('writes a history row for every change, in the same transaction, with before/after', () => {
    const m = s.memory.create(memoryInput({ key: 'h', content: 'v1' }), { source: 'api', requestId: 'req-1' }).memory;
    s.memory.create(memoryInput({ key: 'h', content: 'v2' }), { source: 'extraction', jobId: 'job-9' });
    s.memory.update(m.id, { content: 'v3' }, api);
    s.memory.delete(m.id, api);
    const h = s.memory.history(m.id);
    expect(h.map((e) => [e.op, e.source])).toEqual([
      ['create', 'api'],
      ['update', 'extraction'],
      ['update', 'api'],
      ['delete', 'api'],
    ]);
    expect(h[0].requestId).toBe('req-1');
    expect(h[1].jobId).toBe('job-9');
    expect(h[1].before?.content).toBe('v1');
    expect(h[1].after?.content).toBe('v2');
    // Deletion never loses the text.
    expect(h[3].before?.content).toBe('v3');
    expect(h[3].after).toBeNull();
  });

  it('a failed write leaves neither row nor history', () => {
    const before = (s.db.db.prepare('SELECT COUNT(*) AS n FROM memory_events').get() as { n: number }).n;
    expect(() => s.memory.create(memoryInput({ type: 'bogus' as never }), api)).toThrow(/CHECK/);
    expect((s.db.db.prepare('SELECT COUNT(*) AS n FROM memory_events').get() as { n: number }).n).toBe(before);
    expect(s.memory.list({}, 10, 0).total).toBe(0);
  });

  it('lists with filters, pagination, totals by type and tokens used', () => {
    for (let i = 0; i < 7; i++) s.memory.create(memoryInput({ content: `alpha ${i} ${'x'.repeat(i)}`, type: i % 2 ? 'episodic' : 'factual', sessionId: i < 3 ? 's1' : null }), api);
    s.memory.create(memoryInput({ apiKeyId: 'key-b', content: '100% sure_thing' }), api);
    const all = s.memory.list({ apiKeyId: 'key-a' }, 3, 0);
    expect(all.total).toBe(7);
    expect(all.data).toHaveLength(3);
    expect(all.byType).toEqual({ factual: 4, episodic: 3 });
    // Newest first.
    expect(all.data[0].content.startsWith('alpha 6')).toBe(true);
    expect(s.memory.list({ apiKeyId: 'key-a' }, 3, 6).data).toHaveLength(1);
    expect(s.memory.list({ apiKeyId: 'key-a' }, 3, 7).data).toHaveLength(0);
    expect(s.memory.list({ apiKeyId: 'key-a', type: 'episodic' }, 50, 0).total).toBe(3);
    expect(s.memory.list({ apiKeyId: 'key-a', sessionId: 's1' }, 50, 0).total).toBe(3);
    // LIKE wildcards in q are literal.
    expect(s.memory.list({ q: '100%' }, 50, 0).total).toBe(1);
    expect(s.memory.list({ q: '%' }, 50, 0).total).toBe(1);
    expect(s.memory.list({ q: '_' }, 50, 0).total).toBe(1);
    expect(s.memory.list({ q: 'ALPHA 3' }, 50, 0).total).toBe(1);
    const tokens = s.memory.list({ apiKeyId: 'key-a' }, 1, 0).tokensUsed;
    const expected = s.memory
      .list({ apiKeyId: 'key-a' }, 50, 0)
      .data.reduce((a, m) => a + Math.ceil(m.content.length / 4), 0);
    expect(tokens).toBe(expected);
  });

  it('caches reads in a real LRU, invalidates on every change and caches no misses', () => {
    const m = s.memory.create(memoryInput(), api).memory;
    s.memory.get(m.id);
    s.memory.get(m.id);
    const st = s.memory.cache.stats();
    expect(st.hits).toBe(1);
    expect(st.misses).toBe(1);
    s.memory.update(m.id, { content: 'changed' }, api);
    expect(s.memory.get(m.id)?.content).toBe('changed');
    // A miss is not cached: a row created later is found.
    expect(s.memory.get('00000000-0000-4000-8000-000000000000')).toBeNull();
    expect(s.memory.cache.stats().size).toBe(1);
    s.memory.delete(m.id, api);
    expect(s.memory.get(m.id)).toBeNull();
  });

  it('sees changes made by another process (data_version) instead of serving stale cache', () => {
    const m = s.memory.create(memoryInput({ content: 'before' }), api).memory;
    expect(s.memory.get(m.id)?.content).toBe('before');
    const other = new Database(s.db.file);
    other.pragma('busy_timeout = 5000');
    const otherSvc = new MemoryService(other, new MemoryReadCache(10, 60_000));
    otherSvc.update(m.id, { content: 'after' }, api);
    other.close();
    expect(s.memory.get(m.id)?.content).toBe('after');
  });

  it('self-test exercises the write path and leaves nothing behind', () => {
    const counts = () =>
      ['memories', 'memory_events', 'memory_fts'].map((t) => (s.db.db.prepare(`SELECT COUNT(*) AS n FROM ${t}`).get() as { n: number }).n);
    const before = counts();
    s.memory.selfTest();
    expect(counts()).toEqual(before);
  });
});
