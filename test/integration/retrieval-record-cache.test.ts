/**
 * The record cache (src/memory/record-cache.ts, issue #14): retrieval ranks a key's rows from memory,
 * so every other writer must still be seen at the next retrieve. The "worker" here is a second
 * connection to the same database file, writing through its own MemoryService as a worker process
 * does (and once with bare SQL); the api side is a RetrievalService over the first connection.
 */
import { memoryInput } from '../factories';
import { RetrievalRepository } from '../../src/memory/retrieval.repository';
import { RetrievalService } from '../../src/memory/retrieval.service';
import { VectorRepository } from '../../src/vector/sqlite-vec.repository';
import { KeywordIndexRepository } from '../../src/memory/keyword-index.repository';
import { ChangeLog } from '../../src/db/change-log';
import type { KnownLiveness } from '../../src/vector/types';
import type { RetrievedItem, RetrieveMode, RetrieveOptions, RetrievalStrategy } from '../../src/memory/retrieval.types';
import { openStorage } from '../../src/services';
import { silentLog, testEnv } from '../helpers/env';
import { tempStorage } from '../helpers/storage';

const api = { source: 'api' as const };
const worker = { source: 'extraction' as const };
const DIM = 4;
const SIGNATURE = `fake:fake-model:${DIM}`;

/** One direction for every text: each embedded row is a vector hit of every query. */
const unit = () => new Float32Array([1, 0, 0, 0]);

function setup(cacheMb = '32') {
  const s = tempStorage(testEnv({ MEMORY_RECORD_CACHE_MB: cacheMb }));
  // The worker process: its own connection to the same file.
  const w = openStorage(s.env, silentLog());
  const embedding = {
    resolve: () => ({ source: 'fake', model: 'fake-model', identity: 'fake-model', dimensions: DIM, reason: null }),
    embedOne: async () => ({ vector: unit(), resolution: { source: 'fake', model: 'fake-model', identity: 'fake-model', dimensions: DIM, reason: null }, cached: false, latencyMs: 0 }),
  };
  const retrieval = new RetrievalService({
    env: s.env,
    log: silentLog(),
    db: s.db.db,
    settings: s.settings,
    embedding: embedding as never,
    vectors: s.vectors,
    reranker: { rerank: async () => ({ applied: false }) } as never,
  });
  s.vectors.rebuild(SIGNATURE, DIM);
  /** Creates a memory through the api's connection, with its vector (as the embed job would store it). */
  const add = (apiKeyId: string, key: string, content: string) => {
    const { memory } = s.memory.create(memoryInput({ apiKeyId, key, content }), api);
    const rec = s.memory.getRecord(memory.id)!;
    s.vectors.upsertMany([{ rowId: rec.rowId, apiKeyId, vector: unit(), contentHash: rec.contentHash }], SIGNATURE);
    return memory;
  };
  const retrieve = async (apiKeyId: string, query: string, strategy: RetrievalStrategy = 'hybrid', mode: RetrieveMode = { preview: true }) => {
    const opts: RetrieveOptions = { query, strategy, maxTokens: 4000, retentionDays: 0 };
    const r = await retrieval.retrieve(apiKeyId, opts, mode);
    return r.items;
  };
  const close = () => {
    w.db.close();
    s.close();
  };
  return { s, w, retrieval, add, retrieve, close };
}

const byKey = (items: RetrievedItem[]) => new Map(items.map((i) => [i.memory.key, i.memory]));

describe('retrieval record cache', () => {
  it('a retrieve with nothing changed reads no memory row from SQLite (the rows come from the cache)', async () => {
    const t = setup();
    try {
      t.add('A', 'tea', 'the user likes green tea');
      t.add('A', 'coffee', 'the user drinks black coffee');
      expect((await t.retrieve('A', 'green tea')).length).toBe(2);
      const byRowIds = jest.spyOn(RetrievalRepository.prototype, 'rowsByRowIds');
      const byIds = jest.spyOn(RetrievalRepository.prototype, 'rowsByIds');
      try {
        expect((await t.retrieve('A', 'green tea')).length).toBe(2);
        const read = [...byRowIds.mock.calls, ...byIds.mock.calls].reduce((n, [ids]) => n + ids.length, 0);
        expect(read).toBe(0);
      } finally {
        byRowIds.mockRestore();
        byIds.mockRestore();
      }
    } finally {
      t.close();
    }
  });

  it.each(['hybrid', 'semantic'] as const)('%s: an update and a delete by another connection (a worker) are seen by the next retrieve', async (strategy) => {
    const t = setup();
    try {
      const tea = t.add('A', 'tea', 'the user likes green tea');
      const walk = t.add('A', 'walk', 'the user walks the dog at seven');
      t.add('A', 'coffee', 'the user drinks green coffee');
      // Cached now.
      expect(byKey(await t.retrieve('A', 'green tea', strategy)).get('tea')!.content).toBe('the user likes green tea');

      // Content, and fields outside the keyword index (type, metadata): every update sets updated_at, which logs.
      t.w.memory.update(tea.id, { content: 'the user likes green tea with honey', type: 'procedural', metadata: { from: 'worker' } }, worker);
      const after = byKey(await t.retrieve('A', 'green tea', strategy)).get('tea')!;
      expect(after).toMatchObject({ content: 'the user likes green tea with honey', type: 'procedural', metadata: { from: 'worker' } });

      // A vector-only hit (no query word): the semantic tier and hybrid's vector list read it by public id.
      expect(byKey(await t.retrieve('A', 'green tea', 'semantic')).get('walk')!.content).toBe('the user walks the dog at seven');
      t.w.memory.update(walk.id, { content: 'the user walks the dog at eight' }, worker);
      expect(byKey(await t.retrieve('A', 'green tea', 'semantic')).get('walk')!.content).toBe('the user walks the dog at eight');

      // A bare SQL write (an expiry sweep, a migration) logs through the triggers as well.
      t.w.db.db.prepare("UPDATE memories SET content = 'the user likes green tea, iced', updated_at = ? WHERE id = ?").run(new Date().toISOString(), tea.id);
      expect(byKey(await t.retrieve('A', 'green tea', strategy)).get('tea')!.content).toBe('the user likes green tea, iced');

      t.w.memory.delete(tea.id, worker);
      const gone = await t.retrieve('A', 'green tea', strategy);
      expect(gone.map((i) => i.memory.id)).not.toContain(tea.id);
      expect(gone.length).toBeGreaterThan(0);
    } finally {
      t.close();
    }
  });

  it('access counts are current on the retrieve path (they change without a change-log entry); contentOnly skips that read', async () => {
    const t = setup();
    try {
      const tea = t.add('A', 'tea', 'the user likes green tea');
      expect(byKey(await t.retrieve('A', 'green tea')).get('tea')).toMatchObject({ accessCount: 0, lastAccessedAt: null });
      // The record-access job, in the worker.
      const at = new Date().toISOString();
      t.w.memory.recordAccess([tea.id], at);
      t.w.memory.recordAccess([tea.id], at);
      for (const strategy of ['hybrid', 'semantic'] as const) {
        expect(byKey(await t.retrieve('A', 'green tea', strategy)).get('tea')).toMatchObject({ accessCount: 2, lastAccessedAt: at });
      }
      // The chat's injection reads the content only: the same text, without the access read.
      const accessOf = jest.spyOn(RetrievalRepository.prototype, 'accessOf');
      try {
        const items = await t.retrieve('A', 'green tea', 'hybrid', { contentOnly: true });
        expect(byKey(items).get('tea')!.content).toBe('the user likes green tea');
        expect(accessOf).not.toHaveBeenCalled();
      } finally {
        accessOf.mockRestore();
      }
    } finally {
      t.close();
    }
  });

  it('two keys never see each other’s rows, also when a row moves from one key to the other', async () => {
    const t = setup();
    try {
      const a = t.add('A', 'tea-a', 'the user likes green tea');
      const b = t.add('B', 'tea-b', 'the user likes green tea too');
      for (let round = 0; round < 2; round++) {
        for (const strategy of ['hybrid', 'semantic'] as const) {
          const fromA = await t.retrieve('A', 'green tea', strategy);
          const fromB = await t.retrieve('B', 'green tea', strategy);
          expect(fromA.map((i) => [i.memory.id, i.memory.apiKeyId])).toEqual([[a.id, 'A']]);
          expect(fromB.map((i) => [i.memory.id, i.memory.apiKeyId])).toEqual([[b.id, 'B']]);
        }
      }
      // The cache itself: a row is held under its own key only, and looked up under its own key only.
      const recA = t.s.memory.getRecord(a.id)!;
      expect(t.retrieval.records.byRowId('B', recA.rowId)).toBeUndefined();
      expect(t.retrieval.records.byId('B', a.id)).toBeUndefined();
      t.retrieval.records.put('B', recA, 2);
      expect(t.retrieval.records.byRowId('B', recA.rowId)).toBeUndefined();

      // A's row moves to B (bare SQL in the other connection; the trigger logs both keys).
      t.w.db.db.prepare("UPDATE memories SET api_key_id = 'B' WHERE id = ?").run(a.id);
      expect((await t.retrieve('A', 'green tea', 'hybrid')).map((i) => i.memory.id)).not.toContain(a.id);
      const movedToB = await t.retrieve('B', 'green tea', 'hybrid');
      expect(movedToB.every((i) => i.memory.apiKeyId === 'B')).toBe(true);
    } finally {
      t.close();
    }
  });

  it("the vector tier judges held rows live from the cache (no liveIds SQL when warm), and sees another connection's expiry, session and retention changes at the next retrieve", async () => {
    const t = setup();
    const vectorIds = async (over: Partial<RetrieveOptions> = {}) => {
      // No query word matches: every item is a vector hit.
      const r = await t.retrieval.retrieve('A', { query: 'zebra', strategy: 'semantic', maxTokens: 4000, retentionDays: 0, ...over }, { preview: true });
      expect(r.items.every((i) => i.tier === 'vector')).toBe(true);
      return r.items.map((i) => i.memory.key).sort();
    };
    try {
      t.add('A', 'tea', 'the user likes green tea');
      t.add('A', 'walk', 'the user walks the dog at seven');
      const coffee = t.add('A', 'coffee', 'the user drinks black coffee');
      t.add('A', 'run', 'the user runs on sundays');
      t.w.db.db.prepare("UPDATE memories SET session_id = 's1' WHERE id = ?").run(coffee.id);
      expect(await vectorIds()).toEqual(['coffee', 'run', 'tea', 'walk']);
      const liveIds = jest.spyOn(VectorRepository.prototype, 'liveIds');
      try {
        expect(await vectorIds()).toEqual(['coffee', 'run', 'tea', 'walk']);
        expect(liveIds).not.toHaveBeenCalled();
      } finally {
        liveIds.mockRestore();
      }
      const select = (key: string) => t.w.db.db.prepare('SELECT id FROM memories WHERE key = ?').pluck().get(key) as string;

      // Expiry set by the worker (its own connection, its repository).
      t.w.memory.update(select('tea'), { expiresAt: new Date(Date.now() - 60_000).toISOString() }, worker);
      expect(await vectorIds()).toEqual(['coffee', 'run', 'walk']);

      // A session change in bare SQL: the session scope follows it.
      expect(await vectorIds({ scope: 'session', sessionId: 's1' })).toEqual(['coffee']);
      t.w.db.db.prepare("UPDATE memories SET session_id = 's2' WHERE id = ?").run(coffee.id);
      expect(await vectorIds({ scope: 'session', sessionId: 's1' })).toEqual([]);
      expect(await vectorIds({ scope: 'session', sessionId: 's2' })).toEqual(['coffee']);

      // Retention: a row last asserted three days ago is outside a one-day window.
      expect(await vectorIds({ retentionDays: 1 })).toEqual(['coffee', 'run', 'walk']);
      t.w.db.db.prepare('UPDATE memories SET updated_at = ? WHERE key = ?').run(new Date(Date.now() - 3 * 86_400_000).toISOString(), 'run');
      expect(await vectorIds({ retentionDays: 1 })).toEqual(['coffee', 'walk']);

      // An expiry that passes with time alone (no write after the row was cached) is compared with the retrieve's instant.
      const soon = new Date(Date.now() + 300).toISOString();
      t.w.db.db.prepare('UPDATE memories SET expires_at = ? WHERE key = ?').run(soon, 'walk');
      expect(await vectorIds()).toEqual(['coffee', 'run', 'walk']);
      while (new Date().toISOString() <= soon) await new Promise((r) => setTimeout(r, 50));
      expect(await vectorIds()).toEqual(['coffee', 'run']);
    } finally {
      t.close();
    }
  });

  it('a held key with more changes waiting than a slice is reloaded in slices, not caught up row by row, and the retrieve sees them', async () => {
    const t = setup();
    try {
      t.add('A', 'tea', 'the user likes green tea');
      expect((await t.retrieve('A', 'green tea')).length).toBe(1);
      // A worker imports 2,100 rows into the key (no vectors: the keyword tier finds them).
      t.w.memory.upsertMany(
        Array.from({ length: 2100 }, (_, i) => memoryInput({ apiKeyId: 'A', key: `imp${i}`, content: i === 7 ? 'okapi drinks green tea' : `imported row ${i}` })),
        worker,
      );
      const rowReads = jest.spyOn(KeywordIndexRepository.prototype, 'row');
      const page = jest.spyOn(KeywordIndexRepository.prototype, 'page');
      try {
        const items = await t.retrieve('A', 'okapi green tea');
        expect(byKey(items).has('imp7')).toBe(true);
        expect(rowReads).not.toHaveBeenCalled();
        expect(page.mock.calls.length).toBeGreaterThan(1);
      } finally {
        rowReads.mockRestore();
        page.mockRestore();
      }
    } finally {
      t.close();
    }
  });

  it.each(['held', 'not held yet'] as const)('a key a worker keeps importing into (%s) is loaded once per retrieve, then caught up with what landed during the load', async (state) => {
    const t = setup();
    try {
      t.add('A', 'tea', 'the user likes green tea');
      if (state === 'held') expect((await t.retrieve('A', 'green tea')).length).toBe(1);
      // The retrieve loads the key (held: more than a slice waiting); and while each load reads its first slice,
      // the worker imports more than a slice again (a long import), at most three times here.
      const importBatch = (n: number) =>
        t.w.memory.upsertMany(
          Array.from({ length: 2100 }, (_, i) => memoryInput({ apiKeyId: 'A', key: `imp${n}-${i}`, content: i === 7 ? `okapi${n} drinks green tea` : `imported row ${n} ${i}` })),
          worker,
        );
      importBatch(0);
      let loads = 0;
      const original = KeywordIndexRepository.prototype.page;
      const page = jest.spyOn(KeywordIndexRepository.prototype, 'page').mockImplementation(function (this: KeywordIndexRepository, apiKeyId, after, limit) {
        if (after === 0 && ++loads <= 3) importBatch(loads);
        return original.call(this, apiKeyId, after, limit);
      });
      try {
        const items = await t.retrieve('A', 'okapi0 okapi1 green tea');
        // One load: what the worker wrote during it is applied after it (as index() does), not by another load.
        expect(loads).toBe(1);
        expect(byKey(items).has('imp0-7')).toBe(true);
        expect(byKey(items).has('imp1-7')).toBe(true);
      } finally {
        page.mockRestore();
      }
    } finally {
      t.close();
    }
  });

  it('a warm retrieve reads the vector index\'s signature once (the search\'s own statement), and an index built for another model is still reported as such', async () => {
    const t = setup();
    try {
      t.add('A', 'tea', 'the user likes green tea');
      await t.retrieve('A', 'green tea');
      const readSignature = jest.spyOn(VectorRepository.prototype, 'readSignature');
      try {
        const r = await t.retrieval.retrieve('A', { query: 'green tea', strategy: 'hybrid', maxTokens: 4000, retentionDays: 0 }, { preview: true });
        expect(r.resolution.fallbackReason).toBeNull();
        expect(r.items[0]!.tier).toBe('hybrid-convex');
        expect(readSignature).not.toHaveBeenCalled();
      } finally {
        readSignature.mockRestore();
      }
      // Rebuilt for another model (by another process): the query's vector is not comparable.
      t.w.vectors.rebuild('fake:other-model:4', DIM);
      const r = await t.retrieval.retrieve('A', { query: 'green tea', strategy: 'hybrid', maxTokens: 4000, retentionDays: 0 }, { preview: true });
      expect(r.resolution.fallbackReason).toBe('vector index not built for the current embedding model yet (reindex pending)');
      expect(r.items.map((i) => [i.memory.key, i.tier])).toEqual([['tea', 'fts5']]);
    } finally {
      t.close();
    }
  });

  it('a warm retrieve catches the key up once: the vector tier\'s catch-up is the ranking\'s while the same index copy is held', async () => {
    const t = setup();
    try {
      t.add('A', 'tea', 'the user likes green tea');
      t.add('A', 'coffee', 'the user drinks black coffee');
      await t.retrieve('A', 'green tea');
      const logHead = jest.spyOn(ChangeLog.prototype, 'head');
      try {
        expect((await t.retrieve('A', 'green tea')).length).toBe(2);
        // One catch-up, after the embedding, shared by the vector tier and the ranking (before: warm's check before
        // the embedding too, and earlier the ranking's own).
        expect(logHead.mock.contexts.filter((log) => log.name === 'memory_kw_log')).toHaveLength(1);
      } finally {
        logHead.mockRestore();
      }
      // A write between two retrieves is still seen by the ranking (content and the keyword tier).
      t.w.db.db.prepare("UPDATE memories SET content = 'the user likes green tea, hot', updated_at = ? WHERE key = 'tea'").run(new Date().toISOString());
      expect(byKey(await t.retrieve('A', 'green tea')).get('tea')!.content).toBe('the user likes green tea, hot');
    } finally {
      t.close();
    }
  });

  it("the vector tier's cached liveness answers as liveIds' SQL does, for every filter, after another connection's writes in any timestamp format", async () => {
    const t = setup();
    try {
      let seed = 20261204;
      const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 4294967296);
      const pick = <T,>(a: readonly T[]): T => a[Math.floor(rnd() * a.length)]!;
      const rows = Array.from({ length: 24 }, (_, i) => t.add(i % 3 === 2 ? 'B' : 'A', `k${i}`, `note ${i}`));
      const at = (ms: number) => new Date(Date.now() + ms).toISOString();
      // toISOString's, SQLite's datetime(), no milliseconds, a bare date: compared as text on both sides.
      const format = (iso: string) => pick([iso, iso.replace('T', ' ').replace('Z', ''), `${iso.slice(0, 19)}Z`, iso.slice(0, 10)]);
      const day = 86_400_000;
      const sql = (text: string, ...args: unknown[]) => t.w.db.db.prepare(text).run(...args);
      const knownOf = (key: string, scope: { nowIso: string; freshAfterIso: string | null; sessionId: string | null }) =>
        (t.retrieval as unknown as { knownLiveness(k: string, s: object): KnownLiveness | undefined }).knownLiveness(key, { ...scope, apiKeyId: key, index: null });
      const answered = { live: 0, notLive: 0 };
      for (let step = 0; step < 60; step++) {
        const id = pick(rows).id;
        const op = step % 5;
        if (op === 0) sql('UPDATE memories SET expires_at = ? WHERE id = ?', pick([null, format(at(-day)), format(at(day)), format(at(-60_000)), format(at(60_000))]), id);
        else if (op === 1) sql('UPDATE memories SET session_id = ? WHERE id = ?', pick([null, '', 's1', 's2']), id);
        else if (op === 2) sql('UPDATE memories SET updated_at = ? WHERE id = ?', pick([format(at(-3 * day)), format(at(0))]), id);
        else if (op === 3) sql('UPDATE memories SET api_key_id = ? WHERE id = ?', pick(['A', 'B']), id);
        else if (step % 15 === 4) sql('DELETE FROM memories WHERE id = ?', id);
        for (const key of ['A', 'B']) {
          // Fills the record cache with the key's rows (and catches its index up).
          await t.retrieval.retrieve(key, { query: 'zebra', strategy: 'semantic', maxTokens: 16000, retentionDays: 0 }, { preview: true });
          for (const sessionId of [null, 's1', 's2']) {
            for (const freshAfterIso of [null, at(-day)]) {
              const scope = { nowIso: at(0), freshAfterIso, sessionId };
              const known = knownOf(key, scope);
              expect(known).toBeDefined();
              for (const r of rows) {
                const v = known!(t.s.memory.getRecord(r.id)?.rowId ?? -1);
                if (v === null) answered.notLive++;
                else if (v !== undefined) answered.live++;
              }
              const filter = { ...scope, signature: SIGNATURE };
              expect(t.s.vectors.knn(key, unit(), 64, filter, known)).toEqual(t.s.vectors.knn(key, unit(), 64, filter));
            }
          }
        }
      }
      // The cache answered both ways and the scan copies were used (the comparison above is not SQL against SQL).
      expect(t.s.vectors.scanCache.tenants).toBe(2);
      expect(answered.live).toBeGreaterThan(100);
      expect(answered.notLive).toBeGreaterThan(100);
    } finally {
      t.close();
    }
  });

  it('MEMORY_RECORD_CACHE_MB=0: rows are read from SQLite every time, with their current access counts, and nothing is held', async () => {
    const t = setup('0');
    try {
      const tea = t.add('A', 'tea', 'the user likes green tea');
      expect(t.retrieval.records.enabled).toBe(false);
      await t.retrieve('A', 'green tea');
      t.w.memory.update(tea.id, { content: 'the user likes green tea with lemon' }, worker);
      t.w.memory.recordAccess([tea.id], new Date().toISOString());
      expect(byKey(await t.retrieve('A', 'green tea')).get('tea')).toMatchObject({ content: 'the user likes green tea with lemon', accessCount: 1 });
      expect(t.retrieval.records.size).toBe(0);
    } finally {
      t.close();
    }
  });
});
