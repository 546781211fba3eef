/**
 * Review of issue 14's retrieval changes: regressions found after the merge.
 */
import { memoryInput } from '../factories';
import { buildTestApi, type TestApi } from '../helpers/api';
import type { RetrieveOptions } from '../../src/memory/retrieval.types';

const api = { source: 'api' as const };
/** No embedding source is configured: hybrid is the keyword tier alone. */
const opts = (o: Partial<RetrieveOptions> = {}): RetrieveOptions => ({ strategy: 'hybrid', maxTokens: 4000, retentionDays: 30, ...o });

describe('common-term drop judged on the whole index never empties another key’s keyword tier', () => {
  let t: TestApi;
  beforeAll(() => {
    t = buildTestApi();
    // Key B makes "kubernetes" common in the index (held by > 2% of all rows) and holds the only "zebra".
    t.ctx.memory.upsertMany(
      [
        ...Array.from({ length: 60 }, (_, i) => memoryInput({ apiKeyId: 'B', key: `k${i}`, content: `kubernetes pod restarts ${i}` })),
        memoryInput({ apiKeyId: 'B', key: 'z', content: 'zebra crossing downtown' }),
      ],
      api,
    );
    t.ctx.memory.create(memoryInput({ apiKeyId: 'A', key: 'upgrade', content: 'kubernetes cluster upgrade on friday' }), api);
  });
  afterAll(async () => {
    await t.close();
  });

  it('key A still finds its row for "kubernetes zebra" although only key B holds "zebra"', async () => {
    const r = await t.ctx.retrieval.retrieve('A', opts({ query: 'kubernetes zebra' }), { preview: true });
    expect(r.items.map((i) => i.memory.key)).toEqual(['upgrade']);
  });

  it('key B, which holds the rare term, keeps the narrowed match (the drop still applies)', async () => {
    const r = await t.ctx.retrieval.retrieve('B', opts({ query: 'kubernetes zebra' }), { preview: true });
    expect(r.items.map((i) => i.memory.key)).toEqual(['z']);
  });
});

describe('document frequencies are cached for 30 s, but never a term no row held', () => {
  let t: TestApi;
  beforeAll(() => {
    t = buildTestApi();
    // "router" is common in the index (held by > 2% of all rows).
    t.ctx.memory.upsertMany(
      Array.from({ length: 60 }, (_, i) => memoryInput({ apiKeyId: 'C', key: `r${i}`, content: `router firmware note ${i}` })),
      api,
    );
  });
  afterAll(async () => {
    await t.close();
  });

  it('a rare word written after a query that found nothing is matched by the next query', async () => {
    const before = await t.ctx.retrieval.retrieve('C', opts({ query: 'router qx17' }), { preview: true });
    expect(before.items.some((i) => i.memory.key === 'code')).toBe(false);
    t.ctx.memory.create(memoryInput({ apiKeyId: 'C', key: 'code', content: 'the door code is qx17' }), api);
    // Same words in another order (the service keeps one request's statistics for a second, keyed by the term list).
    const after = await t.ctx.retrieval.retrieve('C', opts({ query: 'qx17 router' }), { preview: true });
    expect(after.items[0]?.memory.key).toBe('code');
  });
});
