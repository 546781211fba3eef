import { RecordCache, type CachedRecord } from './record-cache';

const rec = (apiKeyId: string, rowId: number, content = `memory ${rowId}`): CachedRecord => ({
  rowId,
  id: `${apiKeyId}-${rowId}`,
  apiKeyId,
  sessionId: '',
  type: 'factual',
  key: `k${rowId}`,
  content,
  metadata: {},
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
  expiresAt: null,
  accessCount: 0,
  lastAccessedAt: null,
});

describe('RecordCache', () => {
  it('serves a row by row id and by public id under its own key only', () => {
    const c = new RecordCache(1 << 20);
    c.put('A', rec('A', 1), 2);
    expect(c.byRowId('A', 1)?.content).toBe('memory 1');
    expect(c.byId('A', 'A-1')?.rowId).toBe(1);
    expect(c.byRowId('B', 1)).toBeUndefined();
    expect(c.byId('B', 'A-1')).toBeUndefined();
    // A row of another key is never stored under this one.
    c.put('B', rec('A', 2), 2);
    expect(c.byRowId('B', 2)).toBeUndefined();
    expect(c.size).toBe(1);
  });

  it("a view serves the key's held rows, follows invalidations, and finds nothing once the rows are dropped or evicted", () => {
    const c = new RecordCache(1 << 20);
    c.put('A', rec('A', 1), 2);
    c.put('A', rec('A', 2), 2);
    c.put('B', rec('B', 3), 2);
    expect(c.view('C')).toBeNull();
    const a = c.view('A')!;
    expect(a.byRowId(1)?.content).toBe('memory 1');
    expect(a.byRowId(3)).toBeUndefined(); // another key's row
    c.invalidate('A', [1]);
    expect(a.byRowId(1)).toBeUndefined();
    expect(a.byRowId(2)?.content).toBe('memory 2');
    // Dropped (the key's index reloaded), then read again: the old view must not serve the dropped row.
    c.drop('A');
    c.put('A', rec('A', 1, 'memory 1, changed'), 2);
    expect(a.byRowId(2)).toBeUndefined();
    expect(a.byRowId(1)).toBeUndefined();
    expect(c.view('A')!.byRowId(1)?.content).toBe('memory 1, changed');
    const b = c.view('B')!;
    c.clear();
    expect(b.byRowId(3)).toBeUndefined();
    // Evicted for another key's rows.
    const small = new RecordCache(1);
    small.put('A', rec('A', 1), 2);
    const v = small.view('A')!;
    small.put('B', rec('B', 2), 2);
    expect(small.view('A')).toBeNull();
    expect(v.byRowId(1)).toBeUndefined();
  });

  it('invalidate and drop forget rows and their bytes', () => {
    const c = new RecordCache(1 << 20);
    c.put('A', rec('A', 1), 2);
    c.put('A', rec('A', 2), 2);
    c.put('B', rec('B', 3), 2);
    const all = c.bytesHeld;
    c.invalidate('A', [1, 99]);
    expect(c.byRowId('A', 1)).toBeUndefined();
    expect(c.byId('A', 'A-1')).toBeUndefined();
    expect(c.byRowId('A', 2)).toBeDefined();
    c.drop('B');
    expect(c.byRowId('B', 3)).toBeUndefined();
    expect(c.bytesHeld).toBeLessThan(all);
    c.drop('A');
    expect(c.bytesHeld).toBe(0);
  });

  it('a replaced row is counted once', () => {
    const c = new RecordCache(1 << 20);
    c.put('A', rec('A', 1), 2);
    const one = c.bytesHeld;
    c.put('A', rec('A', 1, 'memory 1'), 2);
    expect(c.bytesHeld).toBe(one);
  });

  it('past the budget drops the least recently used key first, then the oldest rows of the key being filled', () => {
    const one = (() => {
      const probe = new RecordCache(1 << 20);
      probe.put('A', rec('A', 1), 2);
      return probe.bytesHeld;
    })();
    const c = new RecordCache(one * 3);
    c.put('A', rec('A', 1), 2);
    c.put('B', rec('B', 2), 2);
    c.touch('A'); // B is now the least recently used
    c.put('C', rec('C', 3), 2);
    c.put('C', rec('C', 4), 2);
    expect(c.byRowId('B', 2)).toBeUndefined();
    expect(c.byRowId('A', 1)).toBeDefined();
    expect(c.bytesHeld).toBeLessThanOrEqual(one * 3);
    for (let i = 5; i < 10; i++) c.put('C', rec('C', i), 2);
    expect(c.byRowId('C', 9)).toBeDefined();
    expect(c.byRowId('C', 3)).toBeUndefined();
    expect(c.bytesHeld).toBeLessThanOrEqual(one * 3);
  });

  it("a held row's metadata is frozen all the way down: a caller cannot change what the key's next retrievals get", () => {
    const cache = new RecordCache(1 << 20);
    const r = { ...rec('a', 1, 'x'), metadata: { tags: ['t'], source: { app: 'chat' } } };
    cache.put('a', r, 40);
    const held = cache.byRowId('a', 1)!;
    expect(() => {
      (held.metadata as { extra?: number }).extra = 1;
    }).toThrow(TypeError);
    expect(() => (held.metadata.tags as string[]).push('u')).toThrow(TypeError);
    expect(() => {
      (held.metadata.source as { app: string }).app = 'other';
    }).toThrow(TypeError);
    expect(cache.byRowId('a', 1)!.metadata).toEqual({ tags: ['t'], source: { app: 'chat' } });
  });

  it('a budget of 0 holds nothing', () => {
    const c = new RecordCache(0);
    expect(c.enabled).toBe(false);
    c.put('A', rec('A', 1), 2);
    expect(c.byRowId('A', 1)).toBeUndefined();
  });
});
