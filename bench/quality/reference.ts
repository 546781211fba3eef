/**
 * In-process reference rankers over the same texts Engram stores, computed in the same run:
 * - Okapi BM25 exactly as issue #10 describes it (k1 1.2, b 0.75, tokens = the lower-cased text
 *   split on whitespace, so punctuation stays attached: "car." and "car" differ), plus the same
 *   BM25 over FTS5-like tokens (letters and digits only) to separate tokenization from ranking;
 * - exact cosine over the static model's vectors (every turn compared, no ANN);
 * - equal-weight reciprocal rank fusion (k = 60) of BM25 and cosine.
 * IDF is the non-negative Robertson–Spärck Jones form ln(1 + (N − df + 0.5) / (df + 0.5)).
 */

export interface RankedDoc {
  index: number;
  score: number;
}

export type Tokenizer = (text: string) => string[];

/** The tokenizer: lower-case, split on whitespace. */
export const whitespaceTokens: Tokenizer = (text) => text.toLowerCase().split(/\s+/).filter(Boolean);

/** Letters and digits only, lower-cased (close to FTS5 unicode61 for English text). */
export const wordTokens: Tokenizer = (text) => text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];

/** Okapi BM25 over one collection (one chat). */
export class Bm25 {
  private readonly tfs: Map<string, number>[];
  private readonly lens: number[];
  private readonly df = new Map<string, number>();
  private readonly avgdl: number;

  constructor(
    docs: string[],
    private readonly tokenize: Tokenizer = whitespaceTokens,
    private readonly k1 = 1.2,
    private readonly b = 0.75,
  ) {
    this.tfs = docs.map((d) => {
      const tf = new Map<string, number>();
      for (const t of tokenize(d)) tf.set(t, (tf.get(t) ?? 0) + 1);
      for (const t of tf.keys()) this.df.set(t, (this.df.get(t) ?? 0) + 1);
      return tf;
    });
    this.lens = docs.map((d) => tokenize(d).length);
    this.avgdl = this.lens.reduce((a, x) => a + x, 0) / Math.max(1, docs.length);
  }

  private idf(term: string): number {
    const n = this.df.get(term) ?? 0;
    const N = this.tfs.length;
    return Math.log(1 + (N - n + 0.5) / (n + 0.5));
  }

  /** Documents with a positive score, best first (ties: earlier document first); query terms counted once each. */
  search(query: string, limit: number): RankedDoc[] {
    const terms = [...new Set(this.tokenize(query))].filter((t) => this.df.has(t));
    if (terms.length === 0) return [];
    const out: RankedDoc[] = [];
    this.tfs.forEach((tf, i) => {
      let score = 0;
      const norm = this.k1 * (1 - this.b + (this.b * this.lens[i]) / this.avgdl);
      for (const t of terms) {
        const f = tf.get(t);
        if (f) score += this.idf(t) * ((f * (this.k1 + 1)) / (f + norm));
      }
      if (score > 0) out.push({ index: i, score });
    });
    return out.sort((a, b) => b.score - a.score || a.index - b.index).slice(0, limit);
  }
}

/** Exact cosine over unit-normalised vectors (a null vector — no known word — never matches). */
export class ExactCosine {
  private readonly unit: (Float32Array | null)[];

  constructor(vectors: (Float32Array | null)[]) {
    this.unit = vectors.map(normalise);
  }

  search(query: Float32Array | null, limit: number): RankedDoc[] {
    const q = normalise(query);
    if (!q) return [];
    const out: RankedDoc[] = [];
    this.unit.forEach((v, i) => {
      if (!v) return;
      let s = 0;
      for (let d = 0; d < q.length; d++) s += q[d] * v[d];
      out.push({ index: i, score: s });
    });
    return out.sort((a, b) => b.score - a.score || a.index - b.index).slice(0, limit);
  }
}

function normalise(v: Float32Array | null): Float32Array | null {
  if (!v) return null;
  let n = 0;
  for (let i = 0; i < v.length; i++) n += v[i] * v[i];
  if (n === 0) return null;
  const s = 1 / Math.sqrt(n);
  return Float32Array.from(v, (x) => x * s);
}

/** Equal-weight RRF: score = Σ 1 / (k + rank) over the lists an item appears in (ties: better best rank, then index). */
export function rrf(lists: RankedDoc[][], k = 60, limit = 20): RankedDoc[] {
  const score = new Map<number, { s: number; best: number }>();
  for (const list of lists) {
    list.forEach((d, i) => {
      const e = score.get(d.index) ?? { s: 0, best: Infinity };
      e.s += 1 / (k + i + 1);
      e.best = Math.min(e.best, i + 1);
      score.set(d.index, e);
    });
  }
  return [...score.entries()]
    .sort((a, b) => b[1].s - a[1].s || a[1].best - b[1].best || a[0] - b[0])
    .slice(0, limit)
    .map(([index, e]) => ({ index, score: e.s }));
}
