import { memoryInput } from '../../test/factories';
import { tempStorage } from '../../test/helpers/storage';
import { mulberry32 as rng } from '../../test/helpers/prng';
import { RetrievalRepository, type CandidateFilter } from './retrieval.repository';

const WORDS = ['coffee', 'tea', 'berlin', 'paris', 'hiking', 'chess', 'sister', 'brother', 'budget', 'release', 'pasta', 'sushi', 'monday', 'friday'];

describe('RetrievalRepository.fts (rank ids first, then read the top rows)', () => {
  const s = tempStorage();
  const repo = new RetrievalRepository(s.db.db);
  const past = new Date(Date.now() - 60_000).toISOString();

  beforeAll(() => {
    const r = rng(5);
    const pick = () => WORDS[Math.floor(r() * WORDS.length)]!;
    const inputs = Array.from({ length: 1500 }, (_, i) =>
      memoryInput({
        apiKeyId: i % 4 === 0 ? 'other' : 'main',
        sessionId: i % 3 === 0 ? 's2' : 's1',
        ...(i % 7 === 0 ? { expiresAt: past } : {}),
        content: Array.from({ length: 3 + Math.floor(r() * 12) }, pick).join(' '),
      }),
    );
    s.memory.upsertMany(inputs, { source: 'api' });
  });
  afterAll(() => s.close());

  /** The one-query form (whole rows through the sorter) the repository used before: the reference. */
  function reference(match: string, f: CandidateFilter, limit: number): { id: string; bm25: number }[] {
    const params: Record<string, unknown> = { match, limit, nowIso: f.nowIso };
    const where = ['(m.expires_at IS NULL OR m.expires_at > @nowIso)'];
    if (f.apiKeyId !== null) (where.push('m.api_key_id = @apiKeyId'), (params.apiKeyId = f.apiKeyId));
    if (f.sessionId !== null) (where.push('m.session_id = @sessionId'), (params.sessionId = f.sessionId));
    return s.db.db
      .prepare(
        `SELECT m.id AS id, bm25(memory_fts) AS bm25 FROM memory_fts JOIN memories m ON m.memory_id = memory_fts.rowid
         WHERE memory_fts MATCH @match AND ${where.join(' AND ')} ORDER BY bm25 LIMIT @limit`,
      )
      .all(params) as { id: string; bm25: number }[];
  }

  it.each([
    ['"coffee" OR "berlin"', 'main', null, 100],
    ['"coffee" OR "tea" OR "sister"', 'main', 's2', 50],
    ['"chess"', null, null, 100],
    ['"pasta" OR "friday" OR "budget" OR "hiking"', 'other', 's1', 30],
  ] as const)('%s (key %s, session %s, top %d) matches the one-query ranking and its filters', (match, apiKeyId, sessionId, limit) => {
    const f: CandidateFilter = { apiKeyId, sessionId, nowIso: new Date().toISOString(), freshAfterIso: null };
    const got = repo.fts(match, f, limit);
    const ref = reference(match, f, limit);
    expect(got.length).toBe(ref.length);
    expect(got.length).toBeGreaterThan(0);
    // Same scores in the same order; ties may swap rows of equal score, so compare ids below the last score.
    expect(got.map((c) => c.bm25)).toEqual(ref.map((c) => c.bm25));
    const last = ref[ref.length - 1]!.bm25;
    const below = (xs: { id: string; bm25: number }[]) => xs.filter((c) => c.bm25 < last).map((c) => c.id).sort();
    expect(below(got.map((c) => ({ id: c.record.id, bm25: c.bm25 })))).toEqual(below(ref));
    for (const c of got) {
      if (apiKeyId !== null) expect(c.record.apiKeyId).toBe(apiKeyId);
      if (sessionId !== null) expect(c.record.sessionId).toBe(sessionId);
      expect(c.record.expiresAt === null || c.record.expiresAt > f.nowIso).toBe(true);
    }
  });
});

describe('the tenant token inside the keyword MATCH (issue #14, migration 0007)', () => {
  const s = tempStorage();
  const repo = new RetrievalRepository(s.db.db);
  afterAll(() => s.close());
  // Keys that share words once split by unicode61, differ only in case, or are not ASCII.
  const keys = ['a-b', 'a-b-c', 'A-B', 'ключ', 'k 1', 'k1'];

  beforeAll(() => {
    s.memory.upsertMany(
      keys.flatMap((k) => Array.from({ length: 5 }, () => memoryInput({ apiKeyId: k, content: `the walrus sings about ${k}` }))),
      { source: 'api' },
    );
    // A row whose text is another key's tenant token: it must not count as that key's row.
    s.memory.upsertMany([memoryInput({ apiKeyId: 'k1', content: `walrus t${Buffer.from('a-b').toString('hex')}` })], { source: 'api' });
  });

  it.each(keys)('key %s sees exactly its own rows', (k) => {
    const f: CandidateFilter = { apiKeyId: k, sessionId: null, nowIso: new Date().toISOString(), freshAfterIso: null };
    const got = repo.fts('"walrus"', f, 100);
    expect(got.length).toBe(k === 'k1' ? 6 : 5);
    expect(got.every((c) => c.record.apiKeyId === k)).toBe(true);
    // The index alone, without the SQL filter: the tenant clause restricts FTS5 itself.
    const inIndex = s.db.db.prepare('SELECT count(*) AS n FROM memory_fts WHERE memory_fts MATCH ?').get(`fts_tenant : "t${Buffer.from(k).toString('hex')}" AND {content key} : ("walrus")`) as { n: number };
    expect(inIndex.n).toBe(got.length);
  });

  it('follows a row that moves to another key (update trigger)', () => {
    const [m] = s.memory.upsertMany([memoryInput({ apiKeyId: 'mover', content: 'the narwhal' })], { source: 'api' }).map((c) => c.memory);
    s.db.db.prepare('UPDATE memories SET api_key_id = ? WHERE memory_id = ?').run('moved', m!.rowId);
    const f = (k: string): CandidateFilter => ({ apiKeyId: k, sessionId: null, nowIso: new Date().toISOString(), freshAfterIso: null });
    expect(repo.fts('"narwhal"', f('mover'), 10)).toHaveLength(0);
    expect(repo.fts('"narwhal"', f('moved'), 10).map((c) => c.record.id)).toEqual([m!.id]);
  });
});

describe('the tenant token is used only for keys holding a minority of the index', () => {
  const s = tempStorage();
  const repo = new RetrievalRepository(s.db.db);
  afterAll(() => s.close());

  it('a big key matches without it, a small one with it; each sees exactly its rows', () => {
    s.memory.upsertMany(
      [...Array.from({ length: 90 }, () => memoryInput({ apiKeyId: 'big', content: 'otter notes' })), ...Array.from({ length: 5 }, () => memoryInput({ apiKeyId: 'small', content: 'otter notes' }))],
      { source: 'api' },
    );
    expect(repo.narrowsIndex('big')).toBe(false);
    expect(repo.narrowsIndex('small')).toBe(true);
    expect(repo.narrowsIndex(null)).toBe(false);
    const f = (apiKeyId: string): CandidateFilter => ({ apiKeyId, sessionId: null, nowIso: new Date().toISOString(), freshAfterIso: null });
    const big = repo.fts('"otter"', f('big'), 200);
    const small = repo.fts('"otter"', f('small'), 200);
    expect(big).toHaveLength(90);
    expect(big.every((c) => c.record.apiKeyId === 'big')).toBe(true);
    expect(small).toHaveLength(5);
    expect(small.every((c) => c.record.apiKeyId === 'small')).toBe(true);
  });
});

describe('RetrievalRepository.byIds', () => {
  const s = tempStorage();
  const repo = new RetrievalRepository(s.db.db);
  afterAll(() => s.close());

  it('returns the rows in the order asked, drops unknown ids and repeats, and prepares one statement for every length', () => {
    const ms = s.memory.upsertMany(Array.from({ length: 6 }, (_, i) => memoryInput({ apiKeyId: 'k', content: `row ${i} walrus` })), { source: 'api' }).map((c) => c.memory);
    const ids = ms.map((m) => m!.id);
    const prepare = jest.spyOn(s.db.db, 'prepare');
    try {
      expect(repo.byIds([ids[4]!, 'no-such-id', ids[1]!, ids[5]!]).map((r) => r.id)).toEqual([ids[4], ids[1], ids[5]]);
      expect(repo.byIds([ids[2]!]).map((r) => [r.id, r.content])).toEqual([[ids[2], 'row 2 walrus']]);
      expect(repo.byIds([ids[0]!, ids[3]!, ids[0]!]).map((r) => r.id)).toEqual([ids[0], ids[3], ids[0]]);
      expect(repo.byIds([])).toEqual([]);
      // Any number of ids uses one cached statement: each chat's vector hits differ in number.
      expect(prepare.mock.calls.length).toBeLessThanOrEqual(1);
    } finally {
      prepare.mockRestore();
    }
  });
});
