import { payloadOf } from './qdrant.store';
import type { PointSourceRow } from './qdrant.repository';

const row = (expiresAt: string | null): PointSourceRow => ({
  rowId: 1,
  id: '00000000-0000-4000-8000-000000000001',
  apiKeyId: 'tenant-a',
  sessionId: null,
  type: 'factual',
  key: null,
  content: 'x',
  metadata: '{}',
  createdAt: '2030-01-01T00:00:00.000Z',
  expiresAt,
});

describe('Qdrant point payload expiry', () => {
  // Cleanup deletes points with expiresAtUnix <= floor(now); searches keep expiresAtUnix > floor(now).
  const cleanupDeletes = (expiresAtUnix: number, nowIso: string) => expiresAtUnix <= Math.floor(Date.parse(nowIso) / 1000);

  it('a memory still live (expires later within the same second) is neither deleted by cleanup nor filtered out of searches', () => {
    const p = payloadOf(row('2030-01-01T00:00:00.900Z'));
    const now = '2030-01-01T00:00:00.200Z';
    expect(cleanupDeletes(p.expiresAtUnix!, now)).toBe(false);
  });

  it('once expired, cleanup deletes it; whole-second expiries keep their second', () => {
    expect(cleanupDeletes(payloadOf(row('2030-01-01T00:00:00.900Z')).expiresAtUnix!, '2030-01-01T00:00:01.000Z')).toBe(true);
    expect(payloadOf(row('2030-01-01T00:00:05.000Z')).expiresAtUnix).toBe(Date.parse('2030-01-01T00:00:05.000Z') / 1000);
    expect(payloadOf(row(null)).expiresAtUnix).toBeNull();
    expect(payloadOf(row(null)).createdAtUnix).toBe(Date.parse('2030-01-01T00:00:00.000Z') / 1000);
  });
});
