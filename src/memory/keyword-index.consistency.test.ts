/**
 * The per-key keyword index (keyword-index.ts) under races and churn: log pruning between reads,
 * other keys' writes, compaction, eviction during a retrieval's await, and the semantic tier's
 * unembedded-only reads. Each case reproduced a defect an adversarial review found (each failed
 * before its fix).
 */
import Database from 'better-sqlite3';
import { memoryInput } from '../../test/factories';
import { tempStorage } from '../../test/helpers/storage';
import { silentLog } from '../../test/helpers/env';
import { KeywordIndexCache, TenantKeywordIndex, type KeywordFilter } from './keyword-index';
import { KeywordIndexRepository } from './keyword-index.repository';
import { RetrievalRepository } from './retrieval.repository';
import { RetrievalService } from './retrieval.service';
import type { MemoryRecord } from './types';

const open: KeywordFilter = { nowIso: new Date().toISOString(), freshAfterIso: null, sessionId: null };
const api = { source: 'api' as const };

describe('log bookkeeping', () => {
  it('an idle key is not reloaded because OTHER keys filled the log past the prune point (its copy missed nothing)', async () => {
    const s = tempStorage();
    try {
      s.memory.upsertMany(Array.from({ length: 50 }, (_, i) => memoryInput({ apiKeyId: 'A', content: `alpha note ${i}` })), api);
      const repo = new KeywordIndexRepository(s.db.db);
      const snapshot = jest.spyOn(repo.log, 'snapshot');
      const page = jest.spyOn(repo, 'page');
      const cache = new KeywordIndexCache(repo, 1 << 30);
      await cache.warm('A');
      const first = cache.index('A');
      // Key B writes; A is queried meanwhile (its copy sees no entry of its own).
      s.memory.upsertMany(Array.from({ length: 20 }, (_, i) => memoryInput({ apiKeyId: 'B', content: `beta ${i}` })), api);
      expect(cache.index('A')).toBe(first);
      // The log prunes B's entries only (as the trigger does once 200,000 newer entries exist): none of A's entries is lost.
      const head = repo.log.head();
      s.db.db.prepare('DELETE FROM memory_kw_log WHERE seq <= ?').run(head);
      s.db.db.prepare('UPDATE memory_kw_log_state SET pruned_below = ?').run(head);
      snapshot.mockClear();
      page.mockClear();
      await cache.warm('A');
      expect(cache.index('A')).toBe(first); // main: a full reload
      expect(snapshot).not.toHaveBeenCalled(); // main: synchronous (warm() saw a copy and did nothing)
    } finally {
      s.close();
    }
  });

  it('a prune landing between prunedBelow() and logSince() does not leave the copy stale for good', () => {
    const s = tempStorage();
    const other = new Database(s.db.file);
    try {
      s.memory.upsertMany([memoryInput({ apiKeyId: 'A', content: 'first row' })], api);
      const repo = new KeywordIndexRepository(s.db.db);
      const cache = new KeywordIndexCache(repo, 1 << 30);
      cache.index('A');
      // Two changes of A the copy has not seen: an insert, then a later insert.
      const [quokka] = s.memory.upsertMany([memoryInput({ apiKeyId: 'A', content: 'quokka smile' })], api);
      const cut = repo.log.head();
      s.memory.upsertMany([memoryInput({ apiKeyId: 'A', content: 'numbat walk' })], api);
      // Another process's prune commits right after this process read pruned_below (the trigger's own two statements).
      const real = repo.log.prunedBelow.bind(repo.log);
      let once = true;
      jest.spyOn(repo.log, 'prunedBelow').mockImplementation(() => {
        const p = real();
        if (once) {
          once = false;
          other.transaction(() => {
            other.prepare('DELETE FROM memory_kw_log WHERE seq <= ?').run(cut);
            other.prepare('UPDATE memory_kw_log_state SET pruned_below = max(pruned_below, ?) WHERE id = 1').run(cut);
          })();
        }
        return p;
      });
      expect(quokka).toBeDefined();
      cache.index('A');
      // Every later query: the copy must hold 'quokka' (main: never, it skipped the pruned entry and moved past it).
      expect(cache.index('A').search(['quokka'], open, 10)).toHaveLength(1);
      expect(cache.index('A').search(['numbat'], open, 10)).toHaveLength(1);
    } finally {
      other.close();
      s.close();
    }
  });
});

describe('compaction', () => {
  it('drops terms no live row holds (a key with churning vocabulary does not grow without bound)', () => {
    const row = (i: number) => ({ rowId: i, content: `note ${i} token${i} other${i * 7}`, key: null, sessionId: null, expiresAt: null, updatedAt: '2026-01-01T00:00:00.000Z' });
    const churned = new TenantKeywordIndex();
    for (let i = 1; i <= 20_000; i++) churned.put(row(i));
    for (let i = 1; i <= 19_000; i++) churned.remove(i);
    const fresh = new TenantKeywordIndex();
    for (let i = 19_001; i <= 20_000; i++) fresh.put(row(i));
    expect(churned.rows).toBe(fresh.rows);
    // main: ~40,000 dead terms (map entries, postings lists) are kept forever: ~8× the fresh index.
    expect(churned.bytes).toBeLessThan(fresh.bytes * 2);
  });
});

describe('compaction (sessions)', () => {
  it('forgets the session names of removed rows', () => {
    const churned = new TenantKeywordIndex();
    for (let i = 1; i <= 5000; i++) churned.put({ rowId: i, content: 'tea', key: null, sessionId: `session-${i}`, expiresAt: null, updatedAt: '2026-01-01T00:00:00.000Z' });
    for (let i = 1; i <= 4900; i++) churned.remove(i);
    // Names of rows removed since the last compaction may remain (as their slots do); main keeps all 5,000 forever (not counted in bytes).
    expect((churned as unknown as { sessionNames: Map<string, string> }).sessionNames.size).toBeLessThan(300);
    expect(churned.search(['tea'], { ...open, sessionId: 'session-4950' }, 10)).toHaveLength(1);
  });
});

describe('a predicate beyond the filter (semantic: only unembedded rows)', () => {
  it('reads a bounded number of rows, not every keyword match, when few rows pass', () => {
    const s = tempStorage();
    try {
      // 3,000 rows holding the word, all embedded but one (a fresh write waiting for its vector).
      s.memory.upsertMany(Array.from({ length: 3000 }, (_, i) => memoryInput({ apiKeyId: 'A', content: `the user likes tea number ${i}` })), api);
      s.db.db.prepare("UPDATE memories SET needs_reindex = 0 WHERE api_key_id = 'A'").run();
      s.memory.upsertMany([memoryInput({ apiKeyId: 'A', content: 'the user likes green tea' })], api);
      const svc = new RetrievalService({ env: s.env, log: silentLog(), db: s.db.db } as never);
      const read = jest.spyOn(RetrievalRepository.prototype, 'byRowIds');
      const filter = { apiKeyId: 'A', nowIso: new Date().toISOString(), freshAfterIso: null, sessionId: null };
      // The semantic strategy's keyword tail: keyword(filter, query, onlyUnembedded = true).
      const out = (svc as unknown as { keyword: (f: unknown, q: string, onlyUnembedded: boolean) => { record: MemoryRecord }[] }).keyword(filter, 'tea', true);
      expect(out.map((c) => c.record.content)).toEqual(['the user likes green tea']);
      const rowsRead = read.mock.calls.reduce((n, [hits]) => n + hits.length, 0);
      // main: every one of the 3,001 matches is read whole (SELECT m.*, JSON.parse of metadata) to find the one.
      expect(rowsRead).toBeLessThanOrEqual(200);
      read.mockRestore();
    } finally {
      s.close();
    }
  });
});

describe('eviction while a retrieval awaits its embedding', () => {
  it('the key being retrieved is never loaded synchronously because another key was warmed meanwhile', async () => {
    const s = tempStorage();
    try {
      s.memory.upsertMany(Array.from({ length: 300 }, (_, i) => memoryInput({ apiKeyId: 'A', content: `alpha tea ${i}` })), api);
      s.memory.upsertMany(Array.from({ length: 300 }, (_, i) => memoryInput({ apiKeyId: 'B', content: `beta tea ${i}` })), api);
      const repo = new KeywordIndexRepository(s.db.db);
      const snapshot = jest.spyOn(repo.log, 'snapshot');
      // A budget holding one key: warming B evicts A.
      const cache = new KeywordIndexCache(repo, 1);
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      // The query embedding (a remote source in production) resolves after B was warmed; it then has no vector: keywords only.
      const embedding = {
        resolve: () => ({ source: null, model: null }),
        embedOne: async () => {
          await gate;
          return { resolution: { source: null, reason: 'no source' }, vector: null };
        },
      };
      const svc = new RetrievalService({ env: s.env, log: silentLog(), db: s.db.db, settings: s.settings, vectors: s.vectors, embedding, keywordIndex: cache } as never);
      expect(s.vectors.available()).toBe(true); // the vector tier is reached, so the request awaits the embedding
      const held = (k: string) => (cache as unknown as { copies: Map<string, unknown> }).copies.has(k);
      const pending = svc.retrieve('A', { query: 'alpha tea', strategy: 'hybrid', maxTokens: 4000, retentionDays: 0 }, { preview: true });
      while (!held('A')) await new Promise((r) => setImmediate(r)); // A warmed, its request now awaits the embedding
      await cache.warm('B');
      expect(held('A')).toBe(false);
      snapshot.mockClear();
      release();
      const r = await pending;
      expect(r.items.length).toBeGreaterThan(0);
      expect(snapshot).not.toHaveBeenCalled(); // main: index('A') loads all of A synchronously on the event loop
    } finally {
      s.close();
    }
  });
});
