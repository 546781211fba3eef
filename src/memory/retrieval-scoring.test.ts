import Database from 'better-sqlite3';
import { estimateTokens } from './tokens';
import {
  bm25QueryScale,
  withoutCommonTerms,
  buildFtsQuery,
  convexFuse,
  convexFuseRanking,
  fts5Idf,
  ftsQueryTerms,
  minMaxNormalise,
  getRelevanceScore,
  relevanceScorer,
  MAX_SCORE_QUERY_TOKENS,
  rrfFuse,
  selectWithinBudget,
  truncateToTokens,
  TRUNCATION_MARKER,
} from './retrieval-scoring';
import { mulberry32 as prng } from '../../test/helpers/prng';
import * as tokenizer from './tokenize';


describe('getRelevanceScore (digest §2.3)', () => {
  const mem = (content: string, key = '', metadata: unknown = {}) => ({ content, key, metadata });

  it('adds 20 per haystack holding the phrase, 3 per token occurrence, 6 once per token found in the key', () => {
    // content: phrase 20 + dark 3 + mode 3; key (tokens preference, dark, mode): phrase 20, dark 6, mode 6;
    // metadata (tokens category, preference): nothing.
    const m = mem('likes dark mode', 'preference:dark_mode', { category: 'preference' });
    expect(getRelevanceScore(m, 'dark mode')).toBe(26 + 32);
  });

  it('counts whole-token occurrences, not substrings', () => {
    expect(getRelevanceScore(mem('tea tea tea'), 'tea')).toBe(20 + 9);
    // A substring test scored "aa" twice inside "aaaa" and "tea" inside "teapot".
    expect(getRelevanceScore(mem('aaaa'), 'aa')).toBe(0);
    expect(getRelevanceScore(mem('teapot tea'), 'tea')).toBe(20 + 3);
  });

  it('tokenizes like FTS5: punctuation does not stick to words and one-letter tokens match only themselves', () => {
    // The whitespace split kept "python?" as a token, so the question matched nothing.
    expect(getRelevanceScore(mem('I like python'), 'Python?')).toBe(20 + 3);
    expect(getRelevanceScore(mem('likes dark mode'), 'dark-mode')).toBe(20 + 3 + 3);
    // "a" was a substring of nearly every memory.
    expect(getRelevanceScore(mem('likes java and bananas'), 'a')).toBe(0);
    expect(getRelevanceScore(mem('plan a or plan b'), 'a')).toBe(20 + 3);
    // remove_diacritics: "cafe" finds "café" in both tiers.
    expect(getRelevanceScore(mem('drinks Café au lait'), 'cafe')).toBe(20 + 3);
    expect(getRelevanceScore(mem('uses v2.5 now'), 'v2.5')).toBe(20 + 3 + 3);
  });

  it('checks the phrase on the token sequence: the query tokens must be contiguous', () => {
    expect(getRelevanceScore(mem('Dark, mode!'), 'dark mode')).toBe(20 + 6);
    expect(getRelevanceScore(mem('mode dark'), 'dark mode')).toBe(6);
    expect(getRelevanceScore(mem('dark blue mode'), 'dark mode')).toBe(6);
  });

  it('reads metadata JSON escapes as separators, not as letters glued to the next word', () => {
    const m = mem('x', '', { note: 'line1\nline2' });
    expect(getRelevanceScore(m, 'line2')).toBe(20 + 3);
    expect(getRelevanceScore(m, 'nline2')).toBe(0);
  });

  it(`looks at the first ${MAX_SCORE_QUERY_TOKENS} query tokens only`, () => {
    const words = Array.from({ length: MAX_SCORE_QUERY_TOKENS + 10 }, (_, i) => `w${i}z`);
    expect(getRelevanceScore(mem('w0z'), words.join(' '))).toBe(3);
    expect(getRelevanceScore(mem(`w${MAX_SCORE_QUERY_TOKENS + 5}z`), words.join(' '))).toBe(0);
  });

  it('scores metadata through its JSON text', () => {
    expect(getRelevanceScore(mem('x', 'k', { category: 'preference' }), 'preference')).toBe(20 + 3);
  });

  it('keeps the quirk: content equal to the key is scored like the key (6 once, not 3 per occurrence)', () => {
    // content: 20 + 6 (quirk; 3 × 3 = 9 otherwise); key: 20 + 6; metadata "{}": 0.
    expect(getRelevanceScore(mem('mode mode mode', 'mode mode mode'), 'mode')).toBe(52);
    expect(getRelevanceScore(mem('mode mode mode', 'other'), 'mode')).toBe(29);
  });

  it('is case-insensitive and trims the query', () => {
    const m = mem('Likes Dark Mode');
    expect(getRelevanceScore(m, '  DARK  ')).toBe(getRelevanceScore(m, 'dark'));
    expect(getRelevanceScore(m, 'dark')).toBe(23);
  });

  it('is 0 for empty, blank, non-string or unrelated queries and tolerates odd memories', () => {
    const m = mem('likes tea', 'preference:tea');
    expect(getRelevanceScore(m, '')).toBe(0);
    expect(getRelevanceScore(m, '   ')).toBe(0);
    expect(getRelevanceScore(m, undefined as unknown as string)).toBe(0);
    expect(getRelevanceScore(m, 'coffee')).toBe(0);
    expect(getRelevanceScore({ content: 'tea', key: undefined, metadata: undefined } as never, 'tea')).toBe(23);
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    expect(() => getRelevanceScore(mem('tea', '', circular), 'tea')).not.toThrow();
  });

  it('scores a row seen before without tokenizing its text again (issue #14: ~200 candidates per chat)', () => {
    const row = { content: 'Tomas drinks green tea every morning in Lisbon', key: 'drink:tea', metadata: { source: 'chat' } };
    getRelevanceScore(row, 'what does tomas drink');
    const spy = jest.spyOn(tokenizer, 'tokenize');
    try {
      // A new query, the same row: only the query is tokenized.
      expect(getRelevanceScore(row, 'green tea every morning')).toBe(20 + 3 * 4 + 6);
      expect(spy.mock.calls.map((c) => c[0])).toEqual(['green tea every morning']);
      // A changed row: its changed text again, and nothing else.
      spy.mockClear();
      row.content = 'Tomas drinks black coffee';
      expect(getRelevanceScore(row, 'black coffee')).toBe(20 + 3 * 2);
      expect(spy.mock.calls.map((c) => c[0])).toEqual(['black coffee', 'Tomas drinks black coffee']);
    } finally {
      spy.mockRestore();
    }
  });

  it('keeps nothing between rows: the same text in another row (another key\'s) is tokenized again', () => {
    const a = { content: 'Tomas drinks green tea', key: 'drink', metadata: {} };
    const b = { content: 'Tomas drinks green tea', key: 'drink', metadata: {} };
    const score = relevanceScorer('green tea');
    score(a);
    const spy = jest.spyOn(tokenizer, 'tokenize');
    try {
      expect(score(b)).toBe(score(a));
      // b's three texts, once each; a's none.
      expect(spy.mock.calls.map((c) => c[0]).sort()).toEqual(['Tomas drinks green tea', 'drink', '{}']);
      // Not visible on the row: keys, spreads and JSON are as before.
      expect(Object.keys(a)).toEqual(['content', 'key', 'metadata']);
      expect(JSON.stringify({ ...a })).toBe('{"content":"Tomas drinks green tea","key":"drink","metadata":{}}');
    } finally {
      spy.mockRestore();
    }
  });

  it('scores exactly like the uncached haystack count, repeats and adjacent repeats included', () => {
    // The reference: the original's per-call token counts (tokenize each haystack, count each query token).
    const reference = (mm: { content: string; key: string; metadata: unknown }, query: string): number => {
      const q = tokenizer.tokenize(query);
      if (q.length === 0) return 0;
      const phrase = ` ${q.join(' ')} `;
      const hay = (t: string) => {
        const toks = tokenizer.tokenize(t);
        const counts = new Map<string, number>();
        for (const x of toks) counts.set(x, (counts.get(x) ?? 0) + 1);
        return { joined: ` ${toks.join(' ')} `, counts };
      };
      const key = hay(mm.key);
      let score = 0;
      for (const h of [hay(mm.content), key, hay(JSON.stringify(mm.metadata).replace(/\\(?:u[0-9a-fA-F]{4}|.)/g, ' '))]) {
        if (h.joined.includes(phrase)) score += 20;
        for (const t of q.slice(0, MAX_SCORE_QUERY_TOKENS)) score += h.joined === key.joined ? ((h.counts.get(t) ?? 0) > 0 ? 6 : 0) : 3 * (h.counts.get(t) ?? 0);
      }
      return score;
    };
    const words = ['a', 'aa', 'tea', 'Tea', 'teapot', 'mode', 'dark', 'café', 'x1', 'é', '-', '!'];
    const rand = prng(7);
    const text = (n: number) => Array.from({ length: n }, () => words[Math.floor(rand() * words.length)]).join(rand() < 0.5 ? ' ' : '  ');
    for (let i = 0; i < 400; i++) {
      const mm = { content: text(1 + Math.floor(rand() * 12)), key: rand() < 0.3 ? text(2) : '', metadata: rand() < 0.5 ? {} : { note: text(3) } };
      const query = text(1 + Math.floor(rand() * 3));
      expect([mm, query, getRelevanceScore(mm, query)]).toEqual([mm, query, reference(mm, query)]);
    }
  });

  it('ranks the more relevant memory higher', () => {
    const q = 'favorite editor';
    const a = mem('favorite editor is Vim', 'preference:favorite_editor');
    const b = mem('likes a good editor');
    const c = mem('hates meetings');
    const scores = [a, b, c].map((m) => getRelevanceScore(m, q));
    expect(scores[0]).toBeGreaterThan(scores[1]);
    expect(scores[1]).toBeGreaterThan(scores[2]);
    expect(scores[2]).toBe(0);
  });
});

describe('buildFtsQuery', () => {
  it('drops stop-words, lower-cases, dedupes, quotes and ORs the rest', () => {
    expect(buildFtsQuery('What is my favorite programming language?')).toBe('"favorite" OR "programming" OR "language"');
    expect(buildFtsQuery('Python python PYTHON')).toBe('"python"');
  });

  it('turns operators and syntax into literal words or nothing', () => {
    // The original's later sanitiser gave `"hello" "OR" "world" "AND" "quoted"` (implicit AND); Engram ORs and drops stop-words.
    expect(buildFtsQuery('hello OR (world) AND "quoted"')).toBe('"hello" OR "world" OR "quoted"');
    expect(buildFtsQuery('  foo-bar  baz ')).toBe('"foo" OR "bar" OR "baz"');
    expect(buildFtsQuery('NEAR(a b)')).toBe('"near" OR "b"');
    expect(buildFtsQuery('col:value')).toBe('"col" OR "value"');
    expect(buildFtsQuery('^start')).toBe('"start"');
    expect(buildFtsQuery('asterisk*wildcard')).toBe('"asterisk" OR "wildcard"');
    expect(buildFtsQuery("single'quote")).toBe('"single" OR "quote"');
  });

  it('keeps letters and digits of every script (accents, CJK, Cyrillic, Devanagari with its vowel signs)', () => {
    // Folded as FTS5 folds (remove_diacritics 2), so the query and relevance tokens are the indexed ones.
    expect(buildFtsQuery('Ich mag Käse')).toBe('"ich" OR "mag" OR "kase"');
    expect(buildFtsQuery('NAÏVE Café?')).toBe('"naive" OR "cafe"');
    expect(buildFtsQuery('東京 タワー')).toBe('"東京" OR "タワー"');
    expect(buildFtsQuery('Привет, мир')).toBe('"привет" OR "мир"');
    expect(buildFtsQuery('हिन्दी भाषा')).toBe('"हिन्दी" OR "भाषा"');
    expect(buildFtsQuery('node 20')).toBe('"node" OR "20"');
  });

  it('returns null when the text has no token at all', () => {
    for (const q of ['', '   ', '!!! ??? ***', '"()"^:*-+', null, undefined, 42]) {
      expect(buildFtsQuery(q)).toBeNull();
    }
  });

  it('keeps stop-words only when nothing else is left (issue #10: a stop-word-only question still matches)', () => {
    expect(buildFtsQuery('what is it')).toBe('"what" OR "is" OR "it"');
    expect(buildFtsQuery('The a AN the')).toBe('"the" OR "a" OR "an"');
    expect(buildFtsQuery('who are you, Maya?')).toBe('"maya"');
    expect(ftsQueryTerms('what is it?')).toEqual(['what', 'is', 'it']);
    expect(ftsQueryTerms('Where does Maya work?')).toEqual(['maya', 'work']);
  });

  it('caps the number of terms', () => {
    const q = buildFtsQuery('alpha beta gamma delta epsilon zeta', { maxTokens: 3 });
    expect(q).toBe('"alpha" OR "beta" OR "gamma"');
    const many = Array.from({ length: 100 }, (_, i) => `word${i}`).join(' ');
    expect(buildFtsQuery(many)!.split(' OR ')).toHaveLength(32);
  });

  describe('against a real FTS5 table', () => {
    let db: Database.Database;
    const rows = [
      ['a quoted phrase about testing', 'k1'],
      ['I love the C language and C++ templates', 'k2'],
      ['Johnson & Johnson shampoo', 'k3'],
      ['a dash separated query example', 'k4'],
      ['parens test in lisp', 'k5'],
      ['asterisks everywhere', 'k6'],
      ['single quote escaping', 'k7'],
      ['hello world', 'k8'],
      ['near the river', 'k9'],
      ['python rocks', 'k10'],
      ['we start now', 'k11'],
      ['drinks café au lait', 'k12'],
      ['likes dark mode and dark themes', 'k13'],
      ['likes light mode', 'k14'],
    ];
    const match = (q: string): string[] =>
      (db.prepare('SELECT content FROM t WHERE t MATCH ? ORDER BY rank').all(q) as { content: string }[]).map((r) => r.content);

    beforeAll(() => {
      db = new Database(':memory:');
      db.exec("CREATE VIRTUAL TABLE t USING fts5(content, key, tokenize='unicode61 remove_diacritics 2')");
      const ins = db.prepare('INSERT INTO t (content, key) VALUES (?, ?)');
      for (const [c, k] of rows) ins.run(c, k);
    });
    afterAll(() => db.close());

    // The original's special-character queries (digest §9) plus operator-shaped ones, with the exact
    // expression each must become: null, or quoted words that run as a valid MATCH.
    const special: [string, string | null][] = [
      ['"quoted phrase"', '"quoted" OR "phrase"'],
      ['C++ language', '"c" OR "language"'],
      ['Johnson & Johnson', '"johnson"'],
      ['dash-separated-query', '"dash" OR "separated" OR "query"'],
      ['parens(test)', '"parens" OR "test"'],
      ['asterisk*wildcard', '"asterisk" OR "wildcard"'],
      ["single'quote", '"single" OR "quote"'],
      ['hello OR (world) AND "quoted"', '"hello" OR "world" OR "quoted"'],
      ['NEAR(a b)', '"near" OR "b"'],
      ['col:value', '"col" OR "value"'],
      ['key:python', '"key" OR "python"'],
      ['^start', '"start"'],
      ['', null],
      ['*** ((( ))) """ ^^^ :::', null],
      ['-python', '"python"'],
      ['python NOT rocks', '"python" OR "rocks"'],
      ['{content key}: python', '"content" OR "key" OR "python"'],
      ['a"b"c', '"b" OR "c"'],
    ];
    it.each(special)('%j becomes %j, which runs without error', (q, expected) => {
      const fts = buildFtsQuery(q);
      expect(fts).toBe(expected);
      if (expected !== null) expect(() => match(expected)).not.toThrow();
    });

    it('the raw inputs really are invalid or different FTS5 syntax (so sanitising matters)', () => {
      expect(() => match('parens(test)')).toThrow();
      expect(() => match('Johnson & Johnson')).toThrow();
      expect(() => match('col:value')).toThrow();
    });

    it('finds what the words say, not what operators would do', () => {
      expect(match(buildFtsQuery('"quoted phrase"')!)).toContain('a quoted phrase about testing');
      expect(match(buildFtsQuery('C++ language')!)).toContain('I love the C language and C++ templates');
      expect(match(buildFtsQuery('Johnson & Johnson')!)).toEqual(['Johnson & Johnson shampoo']);
      expect(match(buildFtsQuery('dash-separated-query')!)[0]).toBe('a dash separated query example');
      expect(match(buildFtsQuery('parens(test)')!)).toContain('parens test in lisp');
      // `*` is not a prefix operator: "asterisk" does not match "asterisks".
      expect(match(buildFtsQuery('asterisk*wildcard')!)).toEqual([]);
      // `key:` is not a column filter: "python" is found in the content column.
      expect(match(buildFtsQuery('key:python')!)).toEqual(['python rocks']);
      // `^` is not an initial-token anchor: "start" is the 2nd token of its row.
      expect(match(buildFtsQuery('^start')!)).toEqual(['we start now']);
      // NOT is dropped as a stop-word instead of excluding rows.
      expect(match(buildFtsQuery('python NOT rocks')!)).toEqual(['python rocks']);
      // NEAR is a literal word.
      expect(match(buildFtsQuery('NEAR(a b)')!)).toEqual(['near the river']);
    });

    it('matches across diacritics (remove_diacritics 2)', () => {
      expect(match(buildFtsQuery('cafe')!)).toEqual(['drinks café au lait']);
      expect(match(buildFtsQuery('CAFÉ')!)).toEqual(['drinks café au lait']);
    });

    it('the FTS tier and the relevance score agree on which memory a one-word query matches', () => {
      const texts = ['I like python', 'uses C++ daily', 'e-mail me', 'हिन्दी भाषा', 'snake_case names', 'v2.5 released', 'bananas and java', 'Ｆｕｌｌ-width text'];
      const agree = new Database(':memory:');
      agree.exec("CREATE VIRTUAL TABLE a USING fts5(content, tokenize='unicode61 remove_diacritics 2')");
      const ins = agree.prepare('INSERT INTO a (content) VALUES (?)');
      for (const t of texts) ins.run(t);
      const found = (q: string): string[] =>
        (agree.prepare('SELECT content FROM a WHERE a MATCH ?').all(buildFtsQuery(q)) as { content: string }[]).map((r) => r.content);
      try {
        // Each query word is matched by at least one tier in some row, or by none (email, banana, full).
        for (const q of ['PYTHON!', 'python?', 'c', 'mail', 'email', 'हिन्दी', 'भाषा', 'snake', 'case', 'v2', 'banana', 'bananas', 'java', 'ｆｕｌｌ', 'full']) {
          const byScore = texts.filter((t) => getRelevanceScore({ content: t, key: '', metadata: {} }, q) > 0);
          expect([q, found(q).sort()]).toEqual([q, byScore.sort()]);
        }
      } finally {
        agree.close();
      }
    });

    it('ORed terms rank rows matching more terms first (bm25)', () => {
      const ranked = match(buildFtsQuery('dark mode themes')!);
      expect(ranked[0]).toBe('likes dark mode and dark themes');
      expect(ranked).toContain('likes light mode');
    });

    it('never throws on random hostile input (seeded fuzz)', () => {
      const rnd = prng(0xf75);
      const alphabet = ['"', "'", '(', ')', '*', '^', ':', '-', '+', '{', '}', '[', ']', ' ', 'OR', 'AND', 'NOT', 'NEAR', 'a', 'é', '字', '\u0000', '\\', ',', '😀', '\u0301', 'x1'];
      for (let i = 0; i < 500; i++) {
        const len = 1 + Math.floor(rnd() * 20);
        let q = '';
        for (let j = 0; j < len; j++) q += alphabet[Math.floor(rnd() * alphabet.length)];
        const fts = buildFtsQuery(q);
        if (fts === null) continue;
        expect(fts).toMatch(/^"[^"]+"( OR "[^"]+")*$/);
        expect(() => match(fts)).not.toThrow();
      }
    });
  });
});

describe('fused order (tie-break keys computed once per hit)', () => {
  // The comparators as they were (keys recomputed per comparison): the reference order.
  function referenceSort<Id extends string | number>(hits: { id: Id; score: number; ranks: (number | null)[] }[], votes: (li: number) => boolean) {
    const present = (h: (typeof hits)[number]) => h.ranks.filter((r, li) => r !== null && votes(li)).length;
    const best = (h: (typeof hits)[number]) => Math.min(...h.ranks.map((r, li) => (r === null || !votes(li) ? Infinity : r)));
    return [...hits].sort((a, b) => b.score - a.score || present(b) - present(a) || best(a) - best(b) || (String(a.id) < String(b.id) ? -1 : String(a.id) > String(b.id) ? 1 : 0));
  }

  it('orders rrf and convex fusions exactly as the per-comparison keys did, ties included', () => {
    const r = prng(21);
    for (let n = 0; n < 300; n++) {
      // Few distinct ranks and coarse scores: many ties on score, on presence and on best rank.
      const list = () => Array.from({ length: Math.floor(r() * 30) }, () => ({ id: `m${Math.floor(r() * 40)}`, rank: 1 + Math.floor(r() * 5), score: Math.floor(r() * 4) / 4 }));
      const lists = [list(), list(), list()];
      const weights = [r() < 0.2 ? 0 : 1, 0.5, r() < 0.5 ? 0 : 0.25];
      const rrf = rrfFuse(lists, { weights, k: 60 });
      expect(rrf.map((h) => h.id)).toEqual(referenceSort(rrf, () => true).map((h) => h.id));
      const cv = convexFuse(lists.map((l) => l.map((h) => ({ id: h.id, score: h.score }))), weights);
      expect(cv.map((h) => h.id)).toEqual(referenceSort(cv, (li) => weights[li]! > 0).map((h) => h.id));
      expect(cv.every((h) => h.ranks.some((x, li) => x !== null && weights[li]! > 0))).toBe(true);
    }
  });
});

describe('convexFuseRanking (convexFuse without its per-hit objects)', () => {
  it('gives convexFuse\'s ids and scores, in its order, for any lists and weights', () => {
    const r = prng(33);
    const weight = () => [0, 0, 0.2, 1, 2.5, -1, NaN, Infinity, undefined][Math.floor(r() * 9)];
    // Coarse scores, few ids and ranks: ties on score, presence and best rank; duplicates inside a list;
    // scores out of [0, 1] and non-finite; holes; numeric ids sorting as strings (10 before 9).
    const score = () => [0, 0.25, 0.5, 1, 1.5, -0.5, -0, NaN, Infinity, 0.1 + 0.2, 1 / 3][Math.floor(r() * 11)]!;
    for (let n = 0; n < 3000; n++) {
      const numeric = r() < 0.2;
      const list = () =>
        Array.from({ length: Math.floor(r() * 25) }, () => (r() < 0.03 ? null : { id: numeric ? Math.floor(r() * 12) : `m${Math.floor(r() * 30)}`, score: score() }));
      const lists = Array.from({ length: 1 + Math.floor(r() * 3) }, list) as { id: string | number; score: number }[][];
      const weights = lists.map(weight).slice(0, Math.floor(r() * 4)) as number[];
      const reference = convexFuse(lists, weights);
      const lean = convexFuseRanking(lists, weights);
      expect(lean.ids).toEqual(reference.map((h) => h.id));
      // Object.is per score: the same arithmetic in the same order, not merely close.
      expect(lean.scores.length).toBe(reference.length);
      lean.scores.forEach((x, i) => expect(Object.is(x, reference[i]!.score)).toBe(true));
    }
  });
});

describe('minMaxNormalise', () => {
  it('is the spread form it replaced, -0, non-finite and empty lists included', () => {
    const reference = (hits: { id: string; score: number }[]) => {
      const scores = hits.map((h) => h.score).filter(Number.isFinite);
      const hi = Math.max(...scores);
      const lo = Math.min(...scores);
      return hits.map((h) => ({ id: h.id, score: !Number.isFinite(h.score) ? 0 : hi > lo ? (h.score - lo) / (hi - lo) : 1 }));
    };
    const r = prng(34);
    const score = () => [0, -0, 0.3, 0.7, 1, -2, NaN, Infinity, -Infinity, r()][Math.floor(r() * 10)]!;
    for (let n = 0; n < 2000; n++) {
      const hits = Array.from({ length: Math.floor(r() * 8) }, (_, i) => ({ id: `h${i}`, score: score() }));
      const got = minMaxNormalise(hits);
      const want = reference(hits);
      expect(got.map((h) => h.id)).toEqual(want.map((h) => h.id));
      got.forEach((h, i) => expect(Object.is(h.score, want[i]!.score)).toBe(true));
    }
  });
});

describe('rrfFuse', () => {
  it('scores Σ weight / (k + rank) with k = 60 by default and records each list rank', () => {
    const fused = rrfFuse([[{ id: 'a', rank: 1 }], [{ id: 'a', rank: 3 }]]);
    expect(fused).toHaveLength(1);
    expect(fused[0].score).toBeCloseTo(1 / 61 + 1 / 63, 12);
    expect(fused[0].ranks).toEqual([1, 3]);
    expect(rrfFuse([[{ id: 'a', rank: 1 }]], { k: 10 })[0].score).toBeCloseTo(1 / 11, 12);
  });

  it('ranks hits found by both tiers above single-tier hits', () => {
    const fts = ['a', 'b', 'c', 'x'].map((id, i) => ({ id, rank: i + 1 }));
    const vec = ['y', 'c', 'd', 'a'].map((id, i) => ({ id, rank: i + 1 }));
    const fused = rrfFuse([fts, vec]);
    expect(fused.slice(0, 2).map((h) => h.id).sort()).toEqual(['a', 'c']);
    expect(fused.find((h) => h.id === 'b')!.ranks).toEqual([2, null]);
    expect(fused.find((h) => h.id === 'y')!.ranks).toEqual([null, 1]);
  });

  it('respects weights', () => {
    const lists = [[{ id: 'fts-only', rank: 1 }], [{ id: 'vec-only', rank: 1 }]];
    expect(rrfFuse(lists, { weights: [1, 0.5] })[0].id).toBe('fts-only');
    expect(rrfFuse(lists, { weights: [0.2, 1] })[0].id).toBe('vec-only');
    // A heavier tier can outrank a hit both tiers found.
    const both = [
      [{ id: 'both', rank: 5 }, { id: 'fts', rank: 1 }],
      [{ id: 'both', rank: 5 }],
    ];
    expect(rrfFuse(both, { weights: [1, 1] })[0].id).toBe('both');
    expect(rrfFuse(both, { weights: [3, 0.1] })[0].id).toBe('fts');
  });

  it('a zero-weight tier does not vote: ids only it found are dropped', () => {
    const fused = rrfFuse([[{ id: 'a', rank: 1 }], [{ id: 'b', rank: 1 }, { id: 'a', rank: 2 }]], { weights: [1, 0] });
    expect(fused.map((h) => h.id)).toEqual(['a']);
    expect(fused[0].ranks).toEqual([1, 2]);
    expect(fused[0].score).toBeCloseTo(1 / 61, 12);
  });

  it('breaks ties deterministically: more lists, then best rank, then id', () => {
    const fused = rrfFuse([
      [{ id: 'b', rank: 1 }, { id: 'a', rank: 2 }],
      [{ id: 'a', rank: 1 }, { id: 'b', rank: 2 }],
    ]);
    expect(fused.map((h) => h.id)).toEqual(['a', 'b']);
    const single = rrfFuse([[{ id: 'z', rank: 1 }], [{ id: 'm', rank: 1 }]]);
    expect(single.map((h) => h.id)).toEqual(['m', 'z']);
    // Input order inside a list does not matter, only ranks do.
    const shuffled = rrfFuse([
      [{ id: 'a', rank: 2 }, { id: 'b', rank: 1 }],
      [{ id: 'b', rank: 2 }, { id: 'a', rank: 1 }],
    ]);
    expect(shuffled).toEqual(fused);
  });

  it('counts a duplicate id in one list once, at its best rank, and ignores invalid ranks', () => {
    const fused = rrfFuse([[{ id: 1, rank: 4 }, { id: 1, rank: 2 }, { id: 1, rank: 9 }, { id: 2, rank: 0 }, { id: 3, rank: NaN }, { id: 4, rank: -1 }]]);
    expect(fused).toEqual([{ id: 1, score: 1 / 62, ranks: [2] }]);
    expect(rrfFuse([])).toEqual([]);
    expect(rrfFuse([[], []])).toEqual([]);
  });
});

describe('truncateToTokens', () => {
  it('leaves text that fits untouched', () => {
    expect(truncateToTokens('twelve chars', 3)).toBe('twelve chars');
  });

  it('cuts to at most maxTokens × 4 characters and marks the cut', () => {
    const text = 'word '.repeat(200);
    const out = truncateToTokens(text, 10);
    expect(out.length).toBeLessThanOrEqual(40);
    expect(estimateTokens(out)).toBeLessThanOrEqual(10);
    expect(out.endsWith(TRUNCATION_MARKER)).toBe(true);
  });

  it('never splits a surrogate pair and gives "" for a budget below one token', () => {
    const emoji = '😀'.repeat(50);
    for (let t = 1; t < 20; t++) {
      const out = truncateToTokens(emoji, t);
      expect(estimateTokens(out)).toBeLessThanOrEqual(t);
      expect(out.replace(TRUNCATION_MARKER, '')).toMatch(/^(?:😀)*$/u);
    }
    expect(truncateToTokens('abc', 0)).toBe('');
    expect(truncateToTokens('abc', NaN)).toBe('');
  });
});

describe('selectWithinBudget', () => {
  const item = (id: string, chars: number) => {
    const content = 'x'.repeat(chars);
    return { id, content, tokens: estimateTokens(content) };
  };

  it('skips an item that does not fit and keeps looking at smaller later ones', () => {
    // The original stopped at the first overflow and would have returned only "a".
    const items = [item('a', 20), item('b', 40), item('c', 12)]; // 5, 10, 3 tokens
    const r = selectWithinBudget(items, 9);
    expect(r.selected.map((i) => i.id)).toEqual(['a', 'c']);
    expect(r.totalTokens).toBe(8);
    expect(r.truncatedFirst).toBe(false);
  });

  it('includes the best item truncated, and nothing else, when it alone is over budget', () => {
    // The original included it whole ("always return at least one"), blowing the budget.
    const items = [item('big', 400), item('small', 4)];
    const r = selectWithinBudget(items, 10);
    expect(r.truncatedFirst).toBe(true);
    expect(r.selected).toHaveLength(1);
    expect(r.selected[0].id).toBe('big');
    expect(r.selected[0].content.endsWith(TRUNCATION_MARKER)).toBe(true);
    expect(r.selected[0].tokens).toBe(estimateTokens(r.selected[0].content));
    expect(r.totalTokens).toBeLessThanOrEqual(10);
    expect(items[0].content).toHaveLength(400); // input untouched
  });

  it('uses a custom truncate for nested shapes and skips an oversize best item that cannot be cut', () => {
    const nested = [{ memory: { content: 'y'.repeat(100) }, tokens: 25 }, { memory: { content: 'ok' }, tokens: 1 }];
    const cut = selectWithinBudget(nested, 5, {
      truncate: (it, max) => {
        const content = truncateToTokens(it.memory.content, max);
        return { ...it, memory: { content }, tokens: estimateTokens(content) };
      },
    });
    expect(cut.truncatedFirst).toBe(true);
    expect(cut.selected[0].memory.content.length).toBeLessThanOrEqual(20);

    const uncuttable = selectWithinBudget(nested, 5);
    expect(uncuttable.truncatedFirst).toBe(false);
    expect(uncuttable.selected).toEqual([nested[1]]);
  });

  it('returns nothing for an empty list or a budget below one token, and skips invalid token counts', () => {
    expect(selectWithinBudget([], 100)).toEqual({ selected: [], truncatedFirst: false, totalTokens: 0 });
    expect(selectWithinBudget([item('a', 4)], 0).selected).toEqual([]);
    const odd = [{ tokens: NaN }, { tokens: -3 }, { tokens: 2 }];
    expect(selectWithinBudget(odd, 5).selected).toEqual([{ tokens: 2 }]);
  });

  it('never exceeds the budget and packs greedily in rank order (seeded property loop)', () => {
    const rnd = prng(20240601);
    for (let iter = 0; iter < 2000; iter++) {
      const n = Math.floor(rnd() * 12);
      const items = Array.from({ length: n }, (_, i) => item(`m${i}`, Math.floor(rnd() * 1200)));
      const budget = 1 + Math.floor(rnd() * 300);
      const r = selectWithinBudget(items, budget);

      expect(r.totalTokens).toBeLessThanOrEqual(budget);
      expect(r.totalTokens).toBe(r.selected.reduce((s, i) => s + i.tokens, 0));
      r.selected.forEach((s) => expect(s.tokens).toBe(estimateTokens(s.content)));

      if (n > 0 && items[0].tokens > budget) {
        expect(r.truncatedFirst).toBe(true);
        expect(r.selected.map((s) => s.id)).toEqual([items[0].id]);
        continue;
      }
      expect(r.truncatedFirst).toBe(false);
      // Selected items keep rank order and are the originals.
      const ids = r.selected.map((s) => s.id);
      expect(ids).toEqual(items.filter((i) => ids.includes(i.id)).map((i) => i.id));
      r.selected.forEach((s) => expect(items).toContain(s));
      // Greedy: every skipped item did not fit in what was left when it was reached.
      let used = 0;
      for (const it of items) {
        if (ids.includes(it.id)) used += it.tokens;
        else expect(used + it.tokens).toBeGreaterThan(budget);
      }
    }
  });
});

describe('fusion helpers (issue #10)', () => {
  it('fts5Idf is FTS5\'s idf, floored at 1e-6 for a term in half the rows or more', () => {
    expect(fts5Idf(1000, 9)).toBeCloseTo(Math.log(991.5 / 9.5), 12);
    expect(fts5Idf(1000, 0)).toBeCloseTo(Math.log(1000.5 / 0.5), 12);
    expect(fts5Idf(1000, 500)).toBe(1e-6);
    expect(fts5Idf(1000, 900)).toBe(1e-6);
  });

  it('bm25QueryScale sums the idf of every query term, matched or not', () => {
    expect(bm25QueryScale(100, [1, 10])).toBeCloseTo(fts5Idf(100, 1) + fts5Idf(100, 10), 12);
    expect(bm25QueryScale(100, [])).toBe(0);
    // An unknown term (df 0) raises the scale: a row matching only the other term scores less.
    expect(bm25QueryScale(100, [10, 0])).toBeGreaterThan(bm25QueryScale(100, [10]));
  });

  it('the scale is what FTS5 bm25() gives a row of average length holding each term once', () => {
    const db = new Database(':memory:');
    try {
      db.exec("CREATE VIRTUAL TABLE t USING fts5(content, tokenize='unicode61 remove_diacritics 2')");
      db.exec("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row')");
      const ins = db.prepare('INSERT INTO t (content) VALUES (?)');
      // Every row has 3 tokens, so every row is of average length.
      ins.run('alpha beta gamma');
      for (let i = 0; i < 9; i++) ins.run(`delta epsilon w${i}`);
      const df = (t: string) => (db.prepare('SELECT doc FROM v WHERE term = ?').get(t) as { doc: number } | undefined)?.doc ?? 0;
      const bm25 = (db.prepare("SELECT bm25(t) AS s FROM t WHERE t MATCH '\"alpha\" OR \"beta\"'").get() as { s: number }).s;
      expect(-bm25 / bm25QueryScale(10, [df('alpha'), df('beta')])).toBeCloseTo(1, 6);
    } finally {
      db.close();
    }
  });

  it('minMaxNormalise maps the best hit to 1 and the worst to 0 (a lone or flat list to 1)', () => {
    expect(minMaxNormalise([{ id: 'a', score: 0.7 }, { id: 'b', score: 0.55 }, { id: 'c', score: 0.4 }]).map((h) => h.score)).toEqual([1, expect.closeTo(0.5, 9), 0]);
    expect(minMaxNormalise([{ id: 'a', score: 0.3 }])).toEqual([{ id: 'a', score: 1 }]);
    expect(minMaxNormalise([])).toEqual([]);
  });

  it('convexFuse is the weighted mean of normalised scores, an absent tier counting 0', () => {
    const vec = [{ id: 'v', score: 1 }, { id: 'both', score: 0.5 }];
    const kw = [{ id: 'both', score: 0.5 }, { id: 'k', score: 0.8 }];
    const fused = convexFuse([vec, kw], [1, 4]);
    expect(fused.map((h) => h.id)).toEqual(['k', 'both', 'v']);
    expect(fused.find((h) => h.id === 'k')!.score).toBeCloseTo((4 * 0.8) / 5, 12);
    expect(fused.find((h) => h.id === 'both')!.score).toBeCloseTo((1 * 0.5 + 4 * 0.5) / 5, 12);
    expect(fused.find((h) => h.id === 'v')!.score).toBeCloseTo(1 / 5, 12);
    expect(fused.find((h) => h.id === 'both')!.ranks).toEqual([2, 1]);
    // Weights only matter relative to each other; scores are clipped to [0, 1].
    expect(convexFuse([vec, kw], [2, 8]).map((h) => h.score)).toEqual(fused.map((h) => h.score));
    expect(convexFuse([[{ id: 'x', score: 3 }]], [1])[0].score).toBe(1);
  });

  it('a zero-weight tier does not vote; all-zero weights rank nothing', () => {
    const vec = [{ id: 'v', score: 1 }];
    const kw = [{ id: 'k', score: 0.1 }];
    expect(convexFuse([vec, kw], [0, 1]).map((h) => h.id)).toEqual(['k']);
    expect(convexFuse([vec, kw], [0, 0])).toEqual([]);
  });

  it('ties: more lists, then best rank, then id (deterministic)', () => {
    const fused = convexFuse([[{ id: 'b', score: 0.5 }, { id: 'a', score: 0 }], [{ id: 'a', score: 0.5 }, { id: 'c', score: 0.5 }]], [1, 1]);
    expect(fused.map((h) => h.id)).toEqual(['a', 'b', 'c']);
  });
});

describe('withoutCommonTerms (issue #14: bounding the keyword tier)', () => {
  it('drops terms held by more than the share of rows while a rarer one remains', () => {
    expect(withoutCommonTerms(['weekend', 'sister', 'kayak'], 10_000, [900, 150, 3], 0.02)).toEqual(['sister', 'kayak']);
    expect(withoutCommonTerms(['weekend', 'kayak'], 10_000, [200, 3], 0.02)).toEqual(['weekend', 'kayak']); // exactly 2%: kept
  });

  it('keeps every term when all are common, and a single term always', () => {
    expect(withoutCommonTerms(['like', 'really'], 100, [60, 70], 0.02)).toEqual(['like', 'really']);
    expect(withoutCommonTerms(['like'], 100, [90], 0.02)).toEqual(['like']);
    expect(withoutCommonTerms([], 0, [], 0.02)).toEqual([]);
  });

  it('a term no row holds never stands in for the common ones (it would match nothing)', () => {
    expect(withoutCommonTerms(['zora', 'get', 'puppy'], 203, [8, 0, 40], 0.02)).toEqual(['zora', 'puppy']);
    expect(withoutCommonTerms(['zora', 'get', 'kayak'], 10_000, [800, 0, 2], 0.02)).toEqual(['kayak']);
    expect(withoutCommonTerms(['qwxz', 'zzyq'], 100, [0, 0], 0.02)).toEqual(['qwxz', 'zzyq']);
  });
});
