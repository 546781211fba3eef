import { memoryInput } from '../../test/factories';
import { tempStorage } from '../../test/helpers/storage';
import { nowIso } from '../db/connection';
import type { MemoryChange } from './memory.service';
import type { MemoryRepository } from './memory.repository';
import type { ChangeContext } from './types';

const api: ChangeContext = { source: 'api' };
const minutes = (n: number) => new Date(Date.now() + n * 60_000).toISOString();

/** The service's private repository (the test interleaves a write between its lookup and the delete). */
const repoOf = (s: ReturnType<typeof tempStorage>) => (s.memory as unknown as { repo: MemoryRepository }).repo;

describe('D8: expiry re-checks expires_at in the delete', () => {
  it('a fact re-asserted with a new expiry after the expiry lookup found it is kept; the others go', () => {
    const s = tempStorage();
    try {
      const kept = s.memory.create(memoryInput({ key: 'fact:tea', content: 'likes tea', expiresAt: minutes(-1) }), api).memory;
      const gone = s.memory.create(memoryInput({ key: 'fact:coffee', content: 'likes coffee', expiresAt: minutes(-1) }), api).memory;
      const renewed = minutes(60);
      const repo = repoOf(s);
      const lookup = repo.expiredIds.bind(repo);
      let interleaved = 0;
      // The lookup finds both; then, before the delete runs, the user states the tea fact again with a new expiry.
      repo.expiredIds = (now: string, limit: number) => {
        const ids = lookup(now, limit);
        if (interleaved++ === 0) s.memory.create(memoryInput({ key: 'fact:tea', content: 'likes tea', expiresAt: renewed }), { source: 'extraction' });
        return ids;
      };
      const now = nowIso();
      expect(s.memory.expireBatch(now, 100, { source: 'expiry', jobId: 'exp-1' })).toBe(1);
      expect(s.memory.get(kept.id)).toMatchObject({ content: 'likes tea', expiresAt: renewed });
      expect(s.memory.get(gone.id)).toBeNull();
      expect(s.memory.history(kept.id).map((e) => e.op)).not.toContain('expire');
      expect(s.memory.history(gone.id).map((e) => e.op)).toEqual(['create', 'expire']);
      // Nothing left to expire.
      expect(s.memory.expireBatch(nowIso(), 100, { source: 'expiry' })).toBe(0);
    } finally {
      s.close();
    }
  });
});

describe('D9: re-asserting an unchanged fact', () => {
  const extraction = (requestId: string): ChangeContext => ({ source: 'extraction', requestId, jobId: `extract-${requestId}` });
  /** What the extract-facts handler upserts: provenance (extractedAt, requestId) differs on every assertion. */
  const fact = (requestId: string, over: Partial<ReturnType<typeof memoryInput>> = {}) =>
    memoryInput({
      apiKeyId: 'tenant',
      key: 'preference:dark_mode',
      content: 'really prefers dark mode',
      metadata: { category: 'preference', polarity: 'positive', source: 'user_message', extractedAt: new Date().toISOString(), requestId },
      ...over,
    });
  const PROVENANCE = { provenanceKeys: ['extractedAt', 'requestId'] };
  const counters = (s: ReturnType<typeof tempStorage>, id: string) =>
    s.db.db.prepare('SELECT reassert_count AS reassertCount, last_asserted_at AS lastAssertedAt, updated_at AS updatedAt FROM memories WHERE id = ?').get(id) as {
      reassertCount: number;
      lastAssertedAt: string | null;
      updatedAt: string;
    };

  it('writes no history row and no embedding; counts the re-assertion and refreshes updated_at (retention)', async () => {
    const s = tempStorage();
    try {
      const committed: MemoryChange[][] = [];
      s.memory.addHooks({ afterCommit: (c) => committed.push(c) });
      const [created] = s.memory.upsertMany([fact('r1')], extraction('r1'), 'create', PROVENANCE);
      const id = created.memory.id;
      const firstMetadata = s.memory.get(id)!.metadata;
      const before = counters(s, id);
      expect(before.reassertCount).toBe(0);
      await new Promise((r) => setTimeout(r, 5)); // updated_at has millisecond resolution

      const changes = s.memory.upsertMany([fact('r2'), fact('r3')], extraction('r2'), 'create', PROVENANCE);
      expect(changes.map((c) => [c.op, c.contentChanged, c.reasserted])).toEqual([
        ['update', false, true],
        ['update', false, true],
      ]);
      expect(s.memory.history(id).map((e) => e.op)).toEqual(['create']);
      const after = counters(s, id);
      expect(after.reassertCount).toBe(2);
      expect(after.lastAssertedAt).toEqual(after.updatedAt);
      expect(after.updatedAt > before.updatedAt).toBe(true);
      // The stored provenance stays the first assertion's (its history row says so); the row reads fresh, not from a stale cache.
      expect(s.memory.get(id)!.metadata).toEqual(firstMetadata);
      expect(s.memory.get(id)!.updatedAt).toBe(after.updatedAt);
      // Hooks (embedding, sync) hear of the create only.
      expect(committed.flat().map((c) => c.op)).toEqual(['create']);
    } finally {
      s.close();
    }
  });

  it('a real change still writes its history row: content, type, metadata, session or expiry', () => {
    const s = tempStorage();
    try {
      const id = s.memory.upsertMany([fact('r1')], extraction('r1'), 'create', PROVENANCE)[0].memory.id;
      const variants = [
        fact('r2', { content: 'prefers dark mode at night' }),
        fact('r3', { content: 'prefers dark mode at night', type: 'procedural' }),
        fact('r4', { content: 'prefers dark mode at night', type: 'procedural', metadata: { polarity: 'negative', extractedAt: 'x', requestId: 'r4' } }),
        fact('r5', { content: 'prefers dark mode at night', type: 'procedural', metadata: { polarity: 'negative' }, sessionId: 's-1' }),
        fact('r6', { content: 'prefers dark mode at night', type: 'procedural', metadata: { polarity: 'negative' }, sessionId: 's-1', expiresAt: minutes(60) }),
      ];
      for (const [i, v] of variants.entries()) {
        const [c] = s.memory.upsertMany([v], extraction(`r${i + 2}`), 'create', PROVENANCE);
        expect(c.reasserted).toBe(false);
      }
      expect(s.memory.history(id).map((e) => e.op)).toEqual(['create', 'update', 'update', 'update', 'update', 'update']);
      expect(counters(s, id).reassertCount).toBe(0);
    } finally {
      s.close();
    }
  });

  it('without provenance keys (the REST upsert) any metadata difference is a change; the same body again is a re-assertion', () => {
    const s = tempStorage();
    try {
      const body = memoryInput({ key: 'pref:editor', content: 'prefers vim', metadata: { requestId: 'a' } });
      const { memory } = s.memory.create(body, api);
      expect(s.memory.create(body, api).created).toBe(false);
      expect(s.memory.history(memory.id)).toHaveLength(1);
      s.memory.create({ ...body, metadata: { requestId: 'b' } }, api);
      expect(s.memory.history(memory.id).map((e) => e.op)).toEqual(['create', 'update']);
      expect(counters(s, memory.id).reassertCount).toBe(1);
    } finally {
      s.close();
    }
  });
});

describe('record-access: counts per id', () => {
  it('adds each id its count (1 when none is given, and per listing when an id is listed twice); the payload needs one count per id', async () => {
    const { parsePayload } = await import('../queue/jobs');
    const s = tempStorage();
    try {
      const a = s.memory.create(memoryInput({ key: 'a', content: 'likes tea' }), api).memory;
      const b = s.memory.create(memoryInput({ key: 'b', content: 'likes coffee' }), api).memory;
      const at = nowIso();
      // A job the api sends now (counts), and one from before counts existed (an id per injection).
      expect(s.memory.recordAccess([a.id, b.id], at, [500, 1])).toBe(2);
      expect(s.memory.recordAccess([a.id, a.id], at)).toBe(2);
      expect(s.memory.get(a.id)).toMatchObject({ accessCount: 502, lastAccessedAt: at });
      expect(s.memory.get(b.id)).toMatchObject({ accessCount: 1 });
      expect(parsePayload('record-access', { memoryIds: [a.id], counts: [3] })).toEqual({ memoryIds: [a.id], counts: [3] });
      expect(parsePayload('record-access', { memoryIds: [a.id] })).toEqual({ memoryIds: [a.id] });
      expect(() => parsePayload('record-access', { memoryIds: [a.id, b.id], counts: [3] })).toThrow(/one count per memory id/);
      expect(() => parsePayload('record-access', { memoryIds: [a.id], counts: [0] })).toThrow();
    } finally {
      s.close();
    }
  });
});
