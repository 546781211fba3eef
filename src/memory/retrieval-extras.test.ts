import { applyScoreFloor, boostInWindow, dateWindowOf, expansionTerms, extrasFor, inWindow, memoryDay, mergeById, relevanceModel } from './retrieval-extras';
import { DEFAULT_MEMORY_SETTINGS, memorySettingsUpdateSchema, normalizeMemorySettings } from './settings';

describe('applyScoreFloor', () => {
  const hits = [
    { id: 'a', score: 0.9 },
    { id: 'b', score: 0.25 },
    { id: 'c', score: 0.1 },
    { id: 'd', score: NaN },
  ];
  it('keeps the hits at or above the floor, in order', () => {
    expect(applyScoreFloor(hits, 0.25).map((h) => h.id)).toEqual(['a', 'b']);
    expect(applyScoreFloor(hits, 0.95)).toEqual([]);
  });
  it('exempt ids stay whatever their score', () => {
    expect(applyScoreFloor(hits, 0.5, new Set(['c'])).map((h) => h.id)).toEqual(['a', 'c']);
  });
  it('null or 0 leaves the list as it is (NaN included)', () => {
    expect(applyScoreFloor(hits, null)).toBe(hits);
    expect(applyScoreFloor(hits, 0)).toBe(hits);
  });
});

describe('dateWindowOf', () => {
  const now = new Date('2024-03-15T10:00:00Z');
  const w = (q: string) => dateWindowOf(q, now);
  it('reads absolute months and days', () => {
    expect(w('What did Maya do in December 2021?')).toEqual({ from: '2021-12-01', to: '2022-01-01' });
    expect(w('What was Leo up to in Sept, 2022?')).toEqual({ from: '2022-09-01', to: '2022-10-01' });
    expect(w('what happened on 2023-05-17')).toEqual({ from: '2023-05-17', to: '2023-05-18' });
    expect(w('and on the 3rd of May 2023?')).toEqual({ from: '2023-05-03', to: '2023-05-04' });
    expect(w('on May 31, 2023')).toEqual({ from: '2023-05-31', to: '2023-06-01' });
    expect(w('everything from 2022-02')).toEqual({ from: '2022-02-01', to: '2022-03-01' });
    expect(w('where did we go in 2019')).toEqual({ from: '2019-01-01', to: '2020-01-01' });
  });
  it('reads relative expressions against now (UTC), crossing month and year ends', () => {
    expect(w('what did I eat yesterday')).toEqual({ from: '2024-03-14', to: '2024-03-15' });
    expect(w('today')).toEqual({ from: '2024-03-15', to: '2024-03-16' });
    expect(w('what happened last week')).toEqual({ from: '2024-03-08', to: '2024-03-15' });
    expect(w('last month')).toEqual({ from: '2024-02-01', to: '2024-03-01' });
    expect(w('last year')).toEqual({ from: '2023-01-01', to: '2024-01-01' });
    expect(dateWindowOf('yesterday', new Date('2024-01-01T05:00:00Z'))).toEqual({ from: '2023-12-31', to: '2024-01-01' });
    expect(dateWindowOf('last month', new Date('2024-01-20T05:00:00Z'))).toEqual({ from: '2023-12-01', to: '2024-01-01' });
  });
  it('a named month without a year is the latest one before now ("in" includes the current month)', () => {
    expect(w('the trip last May')).toEqual({ from: '2023-05-01', to: '2023-06-01' });
    expect(w('what did she do in February')).toEqual({ from: '2024-02-01', to: '2024-03-01' });
    expect(w('during March')).toEqual({ from: '2024-03-01', to: '2024-04-01' });
    expect(w('last March')).toEqual({ from: '2023-03-01', to: '2023-04-01' });
  });
  it('names no window for questions without dates, and never reads the verb "may" as the month', () => {
    expect(w('Where does Jasmine work now?')).toBeNull();
    expect(w('what in may be wrong with the car')).toBeNull();
    expect(w('I may go to Lisbon')).toBeNull();
    expect(w('my code is KE-667 and room 2041')).toBeNull();
  });
});

describe('memoryDay / inWindow', () => {
  it('prefers a metadata date, else the created_at day', () => {
    expect(memoryDay({ date: '2021-12-04' }, '2024-01-01T00:00:00.000Z')).toBe('2021-12-04');
    expect(memoryDay({ date: '2021-12-04T09:00:00Z' }, '2024-01-01T00:00:00.000Z')).toBe('2021-12-04');
    expect(memoryDay({ date: 'last week' }, '2024-01-01T00:00:00.000Z')).toBe('2024-01-01');
    expect(memoryDay({}, '2024-01-01T00:00:00.000Z')).toBe('2024-01-01');
  });
  it('the window is half-open', () => {
    const win = { from: '2021-12-01', to: '2022-01-01' };
    expect([inWindow(win, '2021-11-30'), inWindow(win, '2021-12-01'), inWindow(win, '2021-12-31'), inWindow(win, '2022-01-01')]).toEqual([false, true, true, false]);
  });
});

describe('boostInWindow', () => {
  const items = [
    { id: 'a', score: 0.75, day: '2022-01-05' },
    { id: 'b', score: 0.625, day: '2021-12-10' },
    { id: 'c', score: 0.5, day: '2021-12-20' },
    { id: 'd', score: 0.25, day: null },
  ];
  const win = { from: '2021-12-01', to: '2022-01-01' };
  it('adds the boost to the items in the window and re-sorts, stable on ties', () => {
    const out = boostInWindow(items, (x) => x.day, win, 0.25);
    // c ties with a (0.75) and stays after it, as the fusion had them.
    expect(out.map((x) => x.id)).toEqual(['b', 'a', 'c', 'd']);
    expect(out.map((x) => x.score)).toEqual([0.875, 0.75, 0.75, 0.25]);
  });
  it('no window or no boost: unchanged', () => {
    expect(boostInWindow(items, (x) => x.day, null, 0.25)).toBe(items);
    expect(boostInWindow(items, (x) => x.day, win, null)).toBe(items);
    expect(boostInWindow(items, (x) => x.day, win, 0)).toBe(items);
  });
});

describe('mergeById', () => {
  it('appends only the new ids of the second list', () => {
    expect(mergeById([{ k: 'a' }, { k: 'b' }], [{ k: 'b' }, { k: 'c' }], (x) => x.k)).toEqual([{ k: 'a' }, { k: 'b' }, { k: 'c' }]);
  });
});

describe('extras settings', () => {
  it('default: keyword floor 0.1 and temporal boost 0.3 on (they won on every set), the rest off; validated 0–1', () => {
    expect(extrasFor(DEFAULT_MEMORY_SETTINGS)).toEqual({ keywordFloor: 0.1, vectorFloor: null, temporalBoost: 0.3, prfWeight: null });
    expect(extrasFor(normalizeMemorySettings({}))).toEqual({ keywordFloor: 0.1, vectorFloor: null, temporalBoost: 0.3, prfWeight: null });
    // A stored null switches a default-on extra off.
    expect(extrasFor(normalizeMemorySettings({ memoryHybridKeywordFloor: null, memoryHybridTemporalBoost: null }))).toEqual({ keywordFloor: null, vectorFloor: null, temporalBoost: null, prfWeight: null });
    expect(memorySettingsUpdateSchema.safeParse({ hybridKeywordFloor: 0.3, hybridVectorFloor: null, hybridTemporalBoost: 1 }).success).toBe(true);
    const bad = memorySettingsUpdateSchema.safeParse({ hybridKeywordFloor: 1.5 });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0].path).toEqual(['hybridKeywordFloor']);
    expect(memorySettingsUpdateSchema.safeParse({ hybridTemporalBoost: -0.1 }).success).toBe(false);
  });
  it('stored values out of range read as off; a call override (even null) beats the settings', () => {
    // (out of range = a hand-edited database; the API refuses them)
    const s = normalizeMemorySettings({ memoryHybridKeywordFloor: 0.3, memoryHybridVectorFloor: 7, memoryHybridTemporalBoost: 'x' });
    expect(extrasFor(s)).toEqual({ keywordFloor: 0.3, vectorFloor: null, temporalBoost: null, prfWeight: null });
    expect(extrasFor(s, { keywordFloor: null, temporalBoost: 0.2, prfWeight: 0.5 })).toEqual({ keywordFloor: null, vectorFloor: null, temporalBoost: 0.2, prfWeight: 0.5 });
  });
});

describe('RM3 expansion', () => {
  const feedback = [
    { text: 'Maya: the marathon training plan says intervals on Tuesday', weight: 1 },
    { text: 'Maya: marathon shoes and intervals again', weight: 0.5 },
    { text: 'Maya: unrelated pizza', weight: 0 },
  ];
  it('relevanceModel: Σ w(D)·tf/|D| over the feedback rows, query terms, stop-words and zero-weight rows excluded', () => {
    const model = relevanceModel(feedback, new Set(['maya', 'training']));
    const w = Object.fromEntries(model.map((m) => [m.term, m.weight]));
    // marathon: 1·1/9 + 0.5·1/6 (9 and 6 tokens); intervals the same; plan: 1/9 only.
    expect(w.marathon).toBeCloseTo(1 / 9 + 0.5 / 6, 10);
    expect(w.intervals).toBeCloseTo(w.marathon, 10);
    expect(w.plan).toBeCloseTo(1 / 9, 10);
    expect(Object.keys(w)).not.toEqual(expect.arrayContaining(['maya']));
    expect(model.map((m) => m.term)).not.toContain('training');
    expect(model.map((m) => m.term)).not.toContain('the');
    expect(model.map((m) => m.term)).not.toContain('pizza');
    expect(model.slice(0, 2).map((m) => m.term)).toEqual(['intervals', 'marathon']);
    expect(relevanceModel(feedback, new Set(), 3)).toHaveLength(3);
    expect(relevanceModel([], new Set())).toEqual([]);
  });
  it('expansionTerms: weight × idf, a term every row holds (idf ~0) never expands', () => {
    const model = [
      { term: 'intervals', weight: 0.2 },
      { term: 'marathon', weight: 0.2 },
      { term: 'plan', weight: 0.1 },
      { term: 'today', weight: 0.5 },
    ];
    const idf: Record<string, number> = { intervals: 3, marathon: 1, plan: 4, today: 1e-6 };
    expect(expansionTerms(model, (t) => idf[t], 3)).toEqual(['intervals', 'plan', 'marathon']);
    expect(expansionTerms(model, () => 0)).toEqual([]);
  });
});
