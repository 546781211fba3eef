import { buildCappedSummary, buildSummaryChunks, firstSentences, summaryLine } from './summary-text';
import { estimateTokens } from './tokens';
import type { MemoryRecord } from './types';

const rec = (i: number, content: string, key = `k${i}`): MemoryRecord => ({
  rowId: i,
  id: `id-${i}`,
  apiKeyId: 'a',
  sessionId: '',
  type: 'factual',
  key,
  content,
  metadata: {},
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
  expiresAt: null,
  accessCount: 0,
  lastAccessedAt: null,
  contentHash: 'x',
  needsReindex: false,
});

describe('summary text', () => {
  it('keeps the first three sentences with their punctuation, and decimals intact', () => {
    expect(firstSentences('Pi is 3.14. It is irrational! Is it? Yes. More.')).toBe('Pi is 3.14. It is irrational! Is it?');
    expect(firstSentences('Short one.\nWith a break.')).toBe('Short one. With a break.');
  });

  it('formats `[type] key: text`, without the key part when there is none', () => {
    expect(summaryLine(rec(1, 'Likes tea.'))).toBe('[factual] k1: Likes tea.');
    expect(summaryLine(rec(1, 'Likes tea.', ''))).toBe('[factual] Likes tea.');
  });

  it('splits into chunks that each fit the budget, in order, covering everything; an oversized line is cut', () => {
    const rows = Array.from({ length: 50 }, (_, i) => rec(i, `Memory ${i} `.repeat(i === 7 ? 400 : 5)));
    const chunks = buildSummaryChunks(rows, 100, (n) => `Summary of ${n} memories:`);
    expect(chunks.length).toBeGreaterThan(1);
    for (const c of chunks) expect(estimateTokens(c.content)).toBeLessThanOrEqual(100);
    expect(chunks.flatMap((c) => c.covered.map((m) => m.id))).toEqual(rows.map((m) => m.id));
    expect(chunks.some((c) => c.content.includes('…'))).toBe(true);
    // Deterministic: the same input splits the same way.
    expect(buildSummaryChunks(rows, 100, (n) => `Summary of ${n} memories:`).map((c) => c.content)).toEqual(chunks.map((c) => c.content));
  });

  it('a capped summary covers every memory within one budget and says how many it shows', () => {
    const rows = Array.from({ length: 200 }, (_, i) => rec(i, `A fact about item ${i}. More detail follows here.`));
    const s = buildCappedSummary(rows, 100, (n, shown) => `Summary of ${n}${shown < n ? ` (${shown} shown)` : ''}:`)!;
    expect(estimateTokens(s.content)).toBeLessThanOrEqual(100);
    expect(s.covered).toHaveLength(200);
    expect(s.content).toMatch(/^Summary of 200 \(\d+ shown\):/);
    expect(s.content).not.toMatch(/More detail/);
  });
});
