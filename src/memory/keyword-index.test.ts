import Database from 'better-sqlite3';
import { memoryInput } from '../../test/factories';
import { tempStorage } from '../../test/helpers/storage';
import { mulberry32 as rng } from '../../test/helpers/prng';
import { bestSlots, KeywordIndexCache, TenantKeywordIndex, type KeywordFilter, type KeywordHit } from './keyword-index';
import { KeywordIndexRepository } from './keyword-index.repository';
import { ftsMatchOf } from './retrieval-scoring';

const WORDS = ['coffee', 'tea', 'berlin', 'paris', 'hiking', 'chess', 'sister', 'brother', 'budget', 'release', 'pasta', 'sushi', 'Müller', 'friday'];
const open: KeywordFilter = { nowIso: new Date().toISOString(), freshAfterIso: null, sessionId: null };

function sentences(seed: number, n: number): string[] {
  const r = rng(seed);
  const pick = () => WORDS[Math.floor(r() * WORDS.length)]!;
  return Array.from({ length: n }, () => Array.from({ length: 1 + Math.floor(r() * 14) }, pick).join(' '));
}

/** FTS5's own bm25 of every row matching `terms` (global statistics: with one key they are the key's). */
function fts5(db: Database.Database, terms: string[]): Map<number, number> {
  const rows = db
    .prepare(`SELECT rowid AS rowId, bm25(memory_fts, 1.0, 1.0, 0.0) AS bm25 FROM memory_fts WHERE memory_fts MATCH ? ORDER BY bm25`)
    .all(`{content key} : (${ftsMatchOf(terms)})`) as { rowId: number; bm25: number }[];
  return new Map(rows.map((r) => [r.rowId, r.bm25]));
}

describe('TenantKeywordIndex: FTS5 bm25 over one key', () => {
  const s = tempStorage();
  const cache = new KeywordIndexCache(new KeywordIndexRepository(s.db.db), 64 * 1_048_576);

  beforeAll(() => {
    const texts = sentences(7, 600);
    s.memory.upsertMany(
      texts.map((content, i) => memoryInput({ apiKeyId: 'solo', content, ...(i % 5 === 0 ? { key: `note ${WORDS[i % WORDS.length]}` } : {}) })),
      { source: 'api' },
    );
  });
  afterAll(() => s.close());

  it.each([[['coffee']], [['coffee', 'berlin']], [['muller', 'sister', 'chess']], [['friday', 'nothing']]])('scores %j exactly as FTS5 does when the database holds one key', (terms) => {
    const want = fts5(s.db.db, terms);
    const got = cache.index('solo').search(terms, open, Infinity);
    expect(got.length).toBe(want.size);
    expect(got.length).toBeGreaterThan(0);
    for (const h of got) expect(h.bm25).toBeCloseTo(want.get(h.rowId)!, 9);
    // Best first, as FTS5 orders them.
    for (let i = 1; i < got.length; i++) expect(got[i]!.bm25).toBeGreaterThanOrEqual(got[i - 1]!.bm25);
  });

  it('bm25Of gives chosen rows the score FTS5 gives them (0 for a row matching none), leaving out rows not held', () => {
    const want = fts5(s.db.db, ['coffee', 'berlin']);
    const ix = cache.index('solo');
    const matching = [...want.keys()].slice(0, 7);
    const other = (s.db.db.prepare("SELECT memory_id AS id FROM memories WHERE content NOT LIKE '%coffee%' AND content NOT LIKE '%berlin%' AND (key IS NULL OR (key NOT LIKE '%coffee%' AND key NOT LIKE '%berlin%')) LIMIT 1").get() as { id: number }).id;
    const got = ix.bm25Of(['coffee', 'berlin'], [...matching, other, 999_999_999]);
    expect([...got.keys()]).toEqual([...matching, other]);
    for (const id of matching) expect(got.get(id)).toBeCloseTo(want.get(id)!, 9);
    expect(got.get(other)).toBe(0);
    // The scratch scores are clean again: a search right after answers as before.
    expect(ix.search(['coffee', 'berlin'], open, Infinity).length).toBe(want.size);
  });

  it('reports the key’s row count and document frequencies as fts5vocab does', () => {
    const stats = cache.index('solo').stats(['coffee', 'muller', 'absent']);
    const vocab = (t: string) => (s.db.db.prepare('SELECT doc FROM memory_fts_vocab WHERE term = ?').get(t) as { doc: number } | undefined)?.doc ?? 0;
    const rows = (s.db.db.prepare('SELECT count(*) AS n FROM memories').get() as { n: number }).n;
    expect(rows).toBeGreaterThan(400);
    expect(stats).toEqual({ rows, docFreqs: [vocab('coffee'), vocab('muller'), 0] });
  });
});

describe('KeywordIndexCache: per key, current across processes', () => {
  const s = tempStorage();
  const repo = new KeywordIndexRepository(s.db.db);
  const cache = new KeywordIndexCache(repo, 64 * 1_048_576);
  // Another process's connection to the same file (a worker): its writes reach the index through the log.
  const other = new Database(s.db.file);
  afterAll(() => {
    other.close();
    s.close();
  });
  const ids = (hits: KeywordHit[]) => hits.map((h) => h.rowId);

  it("ranks A by A's statistics only: B's rows change neither A's scores nor which words are common", () => {
    s.memory.upsertMany(
      ['alpinia pots', 'The user drinks betony tea every day', ...sentences(3, 60)].map((content) => memoryInput({ apiKeyId: 'A', content })),
      { source: 'api' },
    );
    const before = cache.index('A').search(['alpinia', 'betony', 'coffee'], open, 100);
    const statsBefore = cache.index('A').stats(['alpinia', 'coffee']);
    s.memory.upsertMany(Array.from({ length: 300 }, (_, i) => memoryInput({ apiKeyId: 'B', content: `alpinia note ${i} coffee` })), { source: 'api' });
    expect(cache.index('A').search(['alpinia', 'betony', 'coffee'], open, 100)).toEqual(before);
    expect(cache.index('A').stats(['alpinia', 'coffee'])).toEqual(statsBefore);
    expect(cache.index('B').rows).toBe(300);
  });

  it('applies inserts, updates, deletes, expiry, session and a key move made by another connection', () => {
    const filter = (over: Partial<KeywordFilter> = {}): KeywordFilter => ({ ...open, nowIso: new Date().toISOString(), ...over });
    const [m] = s.memory.upsertMany([memoryInput({ apiKeyId: 'C', content: 'narwhal tusk', sessionId: 's1' })], { source: 'api' }).map((r) => r.memory);
    const row = (s.db.db.prepare('SELECT memory_id AS r FROM memories WHERE id = ?').get(m!.id) as { r: number }).r;
    expect(ids(cache.index('C').search(['narwhal'], filter(), 10))).toEqual([row]);
    expect(ids(cache.index('C').search(['narwhal'], filter({ sessionId: 's2' }), 10))).toEqual([]);

    other.prepare("UPDATE memories SET content = 'walrus tusk' WHERE memory_id = ?").run(row);
    expect(ids(cache.index('C').search(['narwhal'], filter(), 10))).toEqual([]);
    expect(ids(cache.index('C').search(['walrus'], filter(), 10))).toEqual([row]);

    other.prepare("UPDATE memories SET session_id = 's2' WHERE memory_id = ?").run(row);
    expect(ids(cache.index('C').search(['walrus'], filter({ sessionId: 's2' }), 10))).toEqual([row]);

    other.prepare('UPDATE memories SET expires_at = ? WHERE memory_id = ?').run(new Date(Date.now() - 1000).toISOString(), row);
    expect(ids(cache.index('C').search(['walrus'], filter(), 10))).toEqual([]);
    other.prepare('UPDATE memories SET expires_at = NULL, updated_at = ? WHERE memory_id = ?').run('2020-01-01T00:00:00.000Z', row);
    expect(ids(cache.index('C').search(['walrus'], filter({ freshAfterIso: '2021-01-01T00:00:00.000Z' }), 10))).toEqual([]);
    expect(ids(cache.index('C').search(['walrus'], filter({ freshAfterIso: '2019-01-01T00:00:00.000Z' }), 10))).toEqual([row]);

    other.prepare("UPDATE memories SET api_key_id = 'D' WHERE memory_id = ?").run(row);
    expect(ids(cache.index('C').search(['walrus'], filter(), 10))).toEqual([]);
    expect(ids(cache.index('D').search(['walrus'], filter(), 10))).toEqual([row]);

    other.prepare('DELETE FROM memories WHERE memory_id = ?').run(row);
    expect(ids(cache.index('D').search(['walrus'], filter(), 10))).toEqual([]);
    expect(cache.index('D').rows).toBe(0);
  });

  it('does not log access-count updates (they do not change what the index holds)', () => {
    const head = repo.log.head();
    other.prepare("UPDATE memories SET access_count = access_count + 1, last_accessed_at = '2026-01-01T00:00:00.000Z'").run();
    expect(repo.log.head()).toBe(head);
  });

  it('reloads a key whose unseen log entries were pruned', () => {
    const idx = cache.index('A');
    s.memory.upsertMany([memoryInput({ apiKeyId: 'A', content: 'quokka smile' })], { source: 'api' });
    // As the prune trigger does after 200,000 entries: the entry above is gone and the cut recorded.
    other.prepare('DELETE FROM memory_kw_log').run();
    other.prepare('UPDATE memory_kw_log_state SET pruned_below = ?').run(repo.log.head());
    const again = cache.index('A');
    expect(again).not.toBe(idx);
    expect(again.search(['quokka'], open, 10)).toHaveLength(1);
  });
});

describe('memory_kw_log prunes itself', () => {
  const s = tempStorage();
  afterAll(() => s.close());

  it('keeps the newest 200,000 entries and records the cut', () => {
    const db = s.db.db;
    db.prepare("UPDATE sqlite_sequence SET seq = 204799 WHERE name = 'memory_kw_log'").run();
    db.prepare("INSERT OR IGNORE INTO sqlite_sequence (name, seq) SELECT 'memory_kw_log', 204799 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'memory_kw_log')").run();
    db.prepare("INSERT INTO memory_kw_log (seq, api_key_id, memory_id) VALUES (1000, 'x', 1), (204000, 'x', 2)").run();
    s.memory.upsertMany([memoryInput({ apiKeyId: 'x', content: 'the 204800th entry' })], { source: 'api' });
    expect(db.prepare('SELECT seq FROM memory_kw_log ORDER BY seq').all()).toEqual([{ seq: 204000 }, { seq: 204800 }]);
    expect(new KeywordIndexRepository(db).log.prunedBelow()).toBe(4800);
  });
});

describe('TenantKeywordIndex bookkeeping', () => {
  it('answers the same after heavy churn (compaction) as an index built from the survivors', () => {
    const texts = sentences(11, 3000);
    const churned = new TenantKeywordIndex();
    texts.forEach((content, i) => churned.put({ rowId: i + 1, content, key: null, sessionId: null, expiresAt: null, updatedAt: '2026-01-01T00:00:00.000Z' }));
    for (let i = 0; i < 2500; i++) churned.remove(i + 1);
    // Rewrites of survivors too (a put replaces).
    for (let i = 2500; i < 2600; i++) churned.put({ rowId: i + 1, content: texts[i]!, key: null, sessionId: null, expiresAt: null, updatedAt: '2026-01-01T00:00:00.000Z' });
    const fresh = new TenantKeywordIndex();
    for (let i = 2500; i < 3000; i++) fresh.put({ rowId: i + 1, content: texts[i]!, key: null, sessionId: null, expiresAt: null, updatedAt: '2026-01-01T00:00:00.000Z' });
    expect(churned.rows).toBe(500);
    for (const terms of [['coffee'], ['berlin', 'sushi'], ['muller', 'friday', 'tea']]) {
      const a = churned.search(terms, open, Infinity);
      const b = fresh.search(terms, open, Infinity);
      expect(a.map((h) => h.rowId).sort()).toEqual(b.map((h) => h.rowId).sort());
      const score = new Map(b.map((h) => [h.rowId, h.bm25]));
      for (const h of a) expect(h.bm25).toBeCloseTo(score.get(h.rowId)!, 12);
      expect(churned.stats(terms)).toEqual(fresh.stats(terms));
    }
  });

  it('filters expiry and retention as SQLite compares the strings, also where a timestamp is not canonical ISO', () => {
    const ix = new TenantKeywordIndex();
    const rows: [string | null, string][] = [
      [null, '2026-03-01T10:00:00.000Z'], // 1 fresh
      [null, '2026-02-01T10:00:00.000Z'], // 2 stale
      [null, '2026-02-20 10:00:00'], // 3 SQL's datetime(): after the cut in time, before it as a string (' ' < 'T')
      [null, '2026-02-20T00:00:00.000Z'], // 4 updated exactly at the cut: kept (updated_at >= cut)
      ['2026-03-05T00:00:00.000Z', '2026-03-01T10:00:00.000Z'], // 5 expired
      ['2026-03-20T00:00:00.000Z', '2026-03-01T10:00:00.000Z'], // 6 not yet
      ['2026-03-10 10:00:00', '2026-03-01T10:00:00.000Z'], // 7 expiry as datetime(): later in time, earlier as a string
      ['2026-03-10T00:00:00.000Z', '2026-03-01T10:00:00.000Z'], // 8 expires exactly now: not live (expires_at > now)
      ['2026-03-10T00:00:00Z', '2026-03-01T10:00:00.000Z'], // 9 no milliseconds: the same instant as now, after it as a string
    ];
    rows.forEach(([expiresAt, updatedAt], i) => ix.put({ rowId: i + 1, content: `okapi row ${i}`, key: null, sessionId: null, expiresAt, updatedAt }));
    const ids = (f: KeywordFilter) => ix.search(['okapi'], f, 100).map((h) => h.rowId).sort((a, c) => a - c);
    // candidateFilterSql's predicate, on the strings.
    const sql = (f: KeywordFilter) =>
      rows.flatMap(([exp, upd], i) => ((exp === null || exp > f.nowIso) && (f.freshAfterIso === null || upd >= f.freshAfterIso) ? [i + 1] : []));
    const nowIso = '2026-03-10T00:00:00.000Z';
    for (const f of [
      { nowIso, freshAfterIso: '2026-02-20T00:00:00.000Z', sessionId: null },
      { nowIso, freshAfterIso: null, sessionId: null },
      // A filter whose own strings are not canonical is compared as strings throughout.
      { nowIso: '2026-03-10 00:00:00', freshAfterIso: '2026-02-20 00:00:00', sessionId: null },
    ]) {
      expect(ids(f)).toEqual(sql(f));
    }
    expect(ids({ nowIso, freshAfterIso: '2026-02-20T00:00:00.000Z', sessionId: null })).toEqual([1, 4, 6, 9]);
  });

  it('bestSlots keeps the same top as a full sort of hit objects, ties by row id', () => {
    const r = rng(9);
    const n = 5000;
    // Scores on a coarse grid, so many tie and the row-id order decides; row ids not in slot order.
    const scores = Float64Array.from({ length: n }, () => Math.round(r() * 50) / 10 + 0.1);
    const rowIds = Array.from({ length: n }, (_, s) => (s * 7919) % 10007);
    const sorted = Array.from({ length: n }, (_, s) => ({ rowId: rowIds[s]!, bm25: -scores[s]! })).sort((x, y) => x.bm25 - y.bm25 || x.rowId - y.rowId);
    for (const limit of [1, 100, 3000, Infinity]) {
      const slots = Int32Array.from({ length: n }, (_, s) => s);
      const best = [...bestSlots(slots, n, limit, scores, rowIds)].map((s) => ({ rowId: rowIds[s]!, bm25: -scores[s]! }));
      expect(best).toEqual(sorted.slice(0, limit));
    }
    // Only the first `count` slots are candidates.
    const slots = Int32Array.from({ length: n }, (_, s) => n - 1 - s);
    expect([...bestSlots(slots, 10, 3, scores, rowIds)]).toEqual([...Int32Array.from({ length: 10 }, (_, i) => n - 1 - i)].sort((a, c) => scores[c]! - scores[a]! || rowIds[a]! - rowIds[c]!).slice(0, 3));
  });

  it('drops the least recently used key past the budget, never the one being queried', () => {
    const s = tempStorage();
    try {
      s.memory.upsertMany(
        ['k1', 'k2', 'k3'].flatMap((apiKeyId) => sentences(5, 400).map((content) => memoryInput({ apiKeyId, content }))),
        { source: 'api' },
      );
      const probe = new KeywordIndexCache(new KeywordIndexRepository(s.db.db), 1 << 30);
      const one = probe.index('k1').bytes;
      const cache = new KeywordIndexCache(new KeywordIndexRepository(s.db.db), Math.floor(one * 2.5));
      cache.index('k1');
      cache.index('k2');
      cache.index('k1'); // k1 is now the most recently used
      cache.index('k3');
      expect(cache.tenants).toBe(2);
      const tiny = new KeywordIndexCache(new KeywordIndexRepository(s.db.db), 1);
      expect(tiny.index('k1').search(['coffee'], open, 5)).toHaveLength(5);
      tiny.index('k2');
      expect(tiny.tenants).toBe(1);
    } finally {
      s.close();
    }
  });
});

describe('KeywordIndexCache.warm', () => {
  it('loads a key in slices, yielding between them, to the same index a synchronous load builds', async () => {
    const s = tempStorage();
    try {
      s.memory.upsertMany(sentences(21, 5000).map((content, i) => memoryInput({ apiKeyId: 'big', content: `${content} row${i}` })), { source: 'api' });
      const cache = new KeywordIndexCache(new KeywordIndexRepository(s.db.db), 1 << 30);
      let turns = 0;
      const ticker = setInterval(() => turns++, 0);
      const a = cache.warm('big');
      const b = cache.warm('big');
      // A write landing between slices is in the log after the head the load read first.
      setImmediate(() => s.memory.upsertMany([memoryInput({ apiKeyId: 'big', content: 'zeppelin arrives' })], { source: 'api' }));
      await Promise.all([a, b]);
      clearInterval(ticker);
      expect(turns).toBeGreaterThan(0);
      const warmed = cache.index('big');
      const sync = new KeywordIndexCache(new KeywordIndexRepository(s.db.db), 1 << 30).index('big');
      expect(warmed.rows).toBe(sync.rows);
      for (const terms of [['coffee', 'row7'], ['zeppelin'], ['berlin', 'sushi', 'tea']]) expect(warmed.search(terms, open, 50)).toEqual(sync.search(terms, open, 50));
      expect(warmed.search(['zeppelin'], open, 5)).toHaveLength(1);
    } finally {
      s.close();
    }
  });
});

describe('KeywordIndexCache: large catch-ups and the schema it relies on', () => {
  it('reloads a held key in slices when more changes wait than a slice holds (no per-row catch-up on the event loop)', async () => {
    const s = tempStorage();
    try {
      const repo = new KeywordIndexRepository(s.db.db);
      const cache = new KeywordIndexCache(repo, 1 << 30);
      s.memory.upsertMany([memoryInput({ apiKeyId: 'imp', content: 'first row' })], { source: 'api' });
      await cache.warm('imp');
      const before = cache.index('imp');
      // A worker imports 2,500 rows into the key.
      s.memory.upsertMany(sentences(31, 2500).map((content, i) => memoryInput({ apiKeyId: 'imp', content: `${content} imported${i}` })), { source: 'api' });
      const rowReads = jest.spyOn(repo, 'row');
      await cache.warm('imp');
      const after = cache.index('imp');
      expect(after).not.toBe(before);
      expect(rowReads).not.toHaveBeenCalled();
      expect(after.rows).toBe((s.db.db.prepare("SELECT count(*) AS n FROM memories WHERE api_key_id = 'imp'").get() as { n: number }).n);
      // A few changes are still applied in place.
      s.memory.upsertMany([memoryInput({ apiKeyId: 'imp', content: 'okapi stripes' })], { source: 'api' });
      await cache.warm('imp');
      expect(cache.index('imp')).toBe(after);
      expect(after.search(['okapi'], open, 5)).toHaveLength(1);
    } finally {
      s.close();
    }
  });

  it('the change-log triggers exist on memories (a migration that rebuilds the table must recreate them)', () => {
    const s = tempStorage();
    try {
      const triggers = (s.db.db.prepare("SELECT name, tbl_name AS tbl FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'memory_kw_log%' ORDER BY name").all() as { name: string; tbl: string }[]);
      expect(triggers).toEqual([
        { name: 'memory_kw_log_ad', tbl: 'memories' },
        { name: 'memory_kw_log_ai', tbl: 'memories' },
        { name: 'memory_kw_log_au', tbl: 'memories' },
        { name: 'memory_kw_log_prune', tbl: 'memory_kw_log' },
      ]);
    } finally {
      s.close();
    }
  });
});

describe('KeywordIndexCache: the listener a record cache hangs on, and the catch-up it skips', () => {
  it('reports the row ids each catch-up applied, and a reset whenever a copy is installed fresh or dropped', async () => {
    const s = tempStorage();
    const other = new Database(s.db.file);
    try {
      s.memory.upsertMany(Array.from({ length: 5 }, (_, i) => memoryInput({ apiKeyId: 'A', content: `gecko ${i}` })), { source: 'api' });
      s.memory.upsertMany([memoryInput({ apiKeyId: 'B', content: 'gecko b' })], { source: 'api' });
      const events: string[] = [];
      const cache = new KeywordIndexCache(new KeywordIndexRepository(s.db.db), 64 * 1_048_576, {
        changed: (key, rowIds) => events.push(`changed ${key} ${rowIds.join(',')}`),
        reset: (key) => events.push(`reset ${key}`),
      });
      await cache.warm('A');
      cache.index('A');
      expect(events).toEqual(['reset A']);
      const row = (other.prepare("SELECT memory_id AS r FROM memories WHERE api_key_id = 'A' ORDER BY memory_id LIMIT 1").get() as { r: number }).r;
      other.prepare("UPDATE memories SET type = 'procedural', updated_at = ? WHERE memory_id = ?").run(new Date().toISOString(), row);
      other.prepare("UPDATE memories SET content = 'gecko b2' WHERE api_key_id = 'B'").run();
      cache.index('A');
      // B's write moved the head but is none of A's rows.
      expect(events).toEqual(['reset A', `changed A ${row}`]);
      // The log went back (a restored file): the copy is reloaded, and the listener told.
      other.prepare('DELETE FROM memory_kw_log').run();
      other.prepare("DELETE FROM sqlite_sequence WHERE name = 'memory_kw_log'").run();
      other.prepare("INSERT INTO memories (id, api_key_id, type, content, metadata, created_at, updated_at, content_hash, needs_reindex) VALUES ('x1', 'A', 'factual', 'gecko x', '{}', '2026-01-01', '2026-01-01', 'h', 1)").run();
      events.length = 0;
      cache.index('A');
      expect(events).toEqual(['reset A', 'reset A']);
      events.length = 0;
      cache.clear();
      expect(events).toEqual(['reset A']);
    } finally {
      other.close();
      s.close();
    }
  });

  it('current() catches a held key up with one read of the head, applies a few changes, and leaves many (or none held) to warm()', async () => {
    const s = tempStorage();
    try {
      s.memory.upsertMany([memoryInput({ apiKeyId: 'A', content: 'gecko one' })], { source: 'api' });
      const repo = new KeywordIndexRepository(s.db.db);
      const cache = new KeywordIndexCache(repo, 64 * 1_048_576);
      expect(cache.current('A')).toBeNull();
      await cache.warm('A');
      const idx = cache.index('A');
      const head = jest.spyOn(repo.log, 'head');
      const pending = jest.spyOn(repo.log, 'pendingAtMost');
      expect(cache.current('A')).toBe(idx);
      expect(head).toHaveBeenCalledTimes(1);
      expect(pending).not.toHaveBeenCalled();
      s.memory.upsertMany([memoryInput({ apiKeyId: 'A', content: 'gecko two' })], { source: 'api' });
      expect(cache.current('A')).toBe(idx);
      expect(idx.search(['gecko'], open, 10)).toHaveLength(2);
      s.memory.upsertMany(sentences(5, 2100).map((content, i) => memoryInput({ apiKeyId: 'A', content: `${content} gecko${i}` })), { source: 'api' });
      const rowReads = jest.spyOn(repo, 'row');
      expect(cache.current('A')).toBeNull();
      expect(rowReads).not.toHaveBeenCalled();
      await cache.warm('A');
      expect(cache.current('A')).not.toBe(idx);
      expect(cache.current('A')!.rows).toBe(2102);
    } finally {
      s.close();
    }
  });

  it('reads no change log when its head has not moved since the copy caught up', async () => {
    const s = tempStorage();
    try {
      s.memory.upsertMany(Array.from({ length: 5 }, (_, i) => memoryInput({ apiKeyId: 'A', content: `gecko ${i}` })), { source: 'api' });
      const repo = new KeywordIndexRepository(s.db.db);
      const cache = new KeywordIndexCache(repo, 64 * 1_048_576);
      await cache.warm('A');
      const idx = cache.index('A');
      const logSince = jest.spyOn(repo.log, 'since');
      const pending = jest.spyOn(repo.log, 'pendingAtMost');
      await cache.warm('A');
      expect(cache.index('A')).toBe(idx);
      expect(logSince).not.toHaveBeenCalled();
      expect(pending).not.toHaveBeenCalled();
      s.memory.upsertMany([memoryInput({ apiKeyId: 'A', content: 'gecko new' })], { source: 'api' });
      await cache.warm('A');
      expect(cache.index('A').search(['gecko'], open, 10)).toHaveLength(6);
      expect(logSince).toHaveBeenCalledTimes(1);
    } finally {
      s.close();
    }
  });
});
