/**
 * Pure ranking helpers for the retrieval path: the original's keyword relevance score, a safe
 * FTS5 MATCH builder, weighted reciprocal rank fusion and the token-budget walk.
 */
import { estimateTokens } from './tokens';
import { heldOnRow } from './row-memo';
import { tokenize } from './tokenize';

/** Most query tokens the relevance score looks at: bounds CPU on a 64 KiB query (the original's primary snapshot had no cap, later upstream capped at 256). */
export const MAX_SCORE_QUERY_TOKENS = 256;

/** The fields of a memory the relevance score reads. */
export interface ScorableMemory {
  content: string;
  key: string;
  metadata: unknown;
}

// A JSON escape (\n, \", \u00e9) would otherwise glue its letter to the next word ("\nline" → "nline").
const JSON_ESCAPE = /\\(?:u[0-9a-fA-F]{4}|.)/g;

/**
 * A haystack as the score sees it: its FTS5 tokens space-joined and space-framed (" a b c "), so
 * " x y " inside it means x y are consecutive tokens and " x " counts whole-token occurrences
 * (tokens never hold a space).
 */
function haystack(text: string): string {
  return ` ${tokenize(text).join(' ')} `;
}

// The row's haystacks, each kept on the row (row-memo.ts): retrieval scores the same cached rows again at
// every request (~200 candidates each), and tokenizing them (and serialising the metadata) was most of
// the score's cost (issue #14). Kept per row, so never shared between keys.
const CONTENT_HAYSTACK = Symbol('engram.contentHaystack');
const KEY_HAYSTACK = Symbol('engram.keyHaystack');
const METADATA_HAYSTACK = Symbol('engram.metadataHaystack');

function textHaystack(text: unknown): string {
  return haystack(typeof text === 'string' ? text : '');
}

function metadataHaystack(metadata: unknown): string {
  let metaText: string;
  try {
    metaText = (JSON.stringify(metadata ?? {}) ?? '{}').replace(JSON_ESCAPE, ' ');
  } catch {
    metaText = '{}';
  }
  return haystack(metaText);
}

/** How often `needle` (" token ") occurs in a framed haystack; consecutive repeats share their space. */
function occurrences(joined: string, needle: string): number {
  let n = 0;
  for (let at = joined.indexOf(needle); at !== -1; at = joined.indexOf(needle, at + needle.length - 1)) n++;
  return n;
}

/** The scored query tokens (at most MAX_SCORE_QUERY_TOKENS), each framed by spaces, and the whole query as a framed phrase. */
function parseQuery(text: string): { needles: string[]; phrase: string } {
  const all = tokenize(text);
  return { needles: all.slice(0, MAX_SCORE_QUERY_TOKENS).map((t) => ` ${t} `), phrase: ` ${all.join(' ')} ` };
}

/**
 * The original's keyword relevance (digest §2.3) on FTS5's tokens: +20 per haystack whose tokens hold the query's
 * tokens in a row, +6 once per query token found in the key, +3 per whole-token occurrence elsewhere — including
 * its quirk that content equal to the key is scored like the key. The query is tokenized once, here: retrieval
 * scores every candidate against one query, and a 64 KiB query takes milliseconds to tokenize.
 */
export function relevanceScorer(query: string): (memory: ScorableMemory) => number {
  if (typeof query !== 'string') return () => 0;
  // The FTS tier's tokenizer, so "Python?" matches "python" and "a" matches only the word "a".
  const { needles, phrase } = parseQuery(query);
  if (needles.length === 0) return () => 0;
  return (memory) => {
    // Not an object (a caller's bad input): scored as an empty memory.
    const row: Partial<ScorableMemory> = memory !== null && typeof memory === 'object' ? memory : {};
    const key = heldOnRow(row, KEY_HAYSTACK, row.key, textHaystack);
    const content = heldOnRow(row, CONTENT_HAYSTACK, row.content, textHaystack);
    const meta = heldOnRow(row, METADATA_HAYSTACK, row.metadata, metadataHaystack);
    let score = 0;
    for (const h of [content, key, meta]) {
      if (h.includes(phrase)) score += 20;
      // The original decides "is this the key?" by comparing haystacks, hence the quirk.
      const isKey = h === key;
      for (const needle of needles) {
        if (isKey) score += h.includes(needle) ? 6 : 0;
        else score += 3 * occurrences(h, needle);
      }
    }
    return score;
  };
}

/** One memory's relevance to a query (relevanceScorer; score many memories through one scorer instead). */
export function getRelevanceScore(memory: ScorableMemory, query: string): number {
  return relevanceScorer(query)(memory);
}

/** English words too common to carry meaning in a keyword query. */
export const FTS_STOP_WORDS: ReadonlySet<string> = new Set(
  (
    'a about above after again all am an and any are as at be because been before being below between both but by ' +
    'can could did do does doing down during each few for from further had has have having he her here hers him his ' +
    'how i if in into is it its itself just me more most my myself no nor not now of off on once only or other our ours ' +
    'out over own same she should so some such than that the their theirs them then there these they this those through ' +
    'to too under until up very was we were what when where which while who whom why will with would you your yours'
  ).split(' '),
);

/**
 * Builds a safe FTS5 MATCH expression from user text: its FTS5 tokens (see tokenize), deduped, each
 * double-quoted and OR-ed (an implicit AND loses most natural-language questions; bm25 ranks rows
 * matching more and rarer tokens first). Stop-words are dropped unless nothing else is left ("who
 * are you" still matches something). Null when the text has no token at all.
 */
export function buildFtsQuery(text: unknown, opts: { maxTokens?: number } = {}): string | null {
  const terms = ftsQueryTerms(text, opts);
  return terms.length ? ftsMatchOf(terms) : null;
}

/** A MATCH expression of tokens (from ftsQueryTerms or the tokenizer): each quoted, OR-joined. */
export function ftsMatchOf(terms: readonly string[]): string {
  return terms.map((t) => `"${t}"`).join(' OR ');
}

/** The terms buildFtsQuery quotes, in query order (the keyword tier also needs them bare, for their document frequencies). */
export function ftsQueryTerms(text: unknown, opts: { maxTokens?: number } = {}): string[] {
  if (typeof text !== 'string' || text.length === 0) return [];
  const max = Math.max(1, Math.floor(opts.maxTokens ?? 32));
  // Tokens hold only letters, digits and word-internal marks: never a quote, `*`, `^`, `:`, parenthesis
  // or `-`, so a token can never close its quotes or act as an operator; AND/OR/NOT/NEAR stay literal inside quotes.
  const all = [...new Set(tokenize(text))];
  const content = all.filter((t) => !FTS_STOP_WORDS.has(t));
  return (content.length ? content : all).slice(0, max);
}

/** FTS5's bm25() constants (fts5_aux.c): the keyword score's theoretical maximum is computed with the same ones. */
export const FTS5_BM25 = { k1: 1.2, b: 0.75 } as const;

/** FTS5's idf: ln((N − n + 0.5) / (n + 0.5)), floored at 1e-6 like fts5_aux.c (a term in over half the rows weighs ~nothing). */
export function fts5Idf(rows: number, docFreq: number): number {
  const idf = Math.log((rows - docFreq + 0.5) / (docFreq + 0.5));
  return idf > 0 ? idf : 1e-6;
}

/**
 * The query's own bm25 scale: Σ idf(t), what a row of average length holding every query term once
 * scores (each term then contributes exactly its idf). Dividing a row's bm25 by it (capped at 1)
 * maps the keyword score onto [0, 1] by the query itself, not by the best row found, so a list of
 * weak matches (only the speaker's name) stays weak instead of being stretched to 1 by min-max
 * over the list. Terms the collection lacks count too: a row cannot match them, which is the point.
 */
export function bm25QueryScale(rows: number, docFreqs: readonly number[]): number {
  return docFreqs.reduce((sum, n) => sum + fts5Idf(rows, n), 0);
}

/**
 * The terms a keyword MATCH should use: a term held by more than `share` of the `rows` indexed rows
 * (its idf ≤ log(1/share − 1), ~3.9 at 2%) adds little to bm25, yet every row holding it becomes a
 * candidate FTS5 must score, so the keyword tier's cost grows with the collection. Such terms are
 * dropped while a rarer one (held by at least one row) remains; a query of only common terms keeps
 * them all, and terms no row holds are dropped when others match.
 */
export function withoutCommonTerms(terms: readonly string[], rows: number, docFreqs: readonly number[], share: number): string[] {
  if (terms.length < 2) return [...terms];
  // A term no row holds matches nothing: it must not stand in as "the rarer term" for the others.
  const present = terms.filter((_, i) => (docFreqs[i] ?? 0) > 0);
  if (present.length === 0) return [...terms];
  const kept = present.filter((t) => (docFreqs[terms.indexOf(t)] ?? 0) <= rows * share);
  return kept.length ? kept : present;
}

/** One ranked hit from one retrieval tier (rank 1 is the best). */
export interface RankedId<Id extends string | number = string | number> {
  id: Id;
  rank: number;
}

/** A fused hit: weighted RRF score and the rank it had in each input list (null where absent). */
export interface FusedHit<Id extends string | number = string | number> {
  id: Id;
  score: number;
  ranks: (number | null)[];
}

/** Weighted reciprocal rank fusion: score(id) = Σ weightᵢ / (k + rankᵢ); ties broken by more lists, then best rank, then id, so the order is deterministic. */
export function rrfFuse<Id extends string | number>(
  lists: RankedId<Id>[][],
  opts: { k?: number; weights?: number[] } = {},
): FusedHit<Id>[] {
  const k = typeof opts.k === 'number' && Number.isFinite(opts.k) && opts.k > 0 ? opts.k : 60;
  const byId = new Map<Id, FusedHit<Id>>();
  lists.forEach((list, li) => {
    const w = opts.weights?.[li];
    const weight = typeof w === 'number' && Number.isFinite(w) && w > 0 ? w : w === undefined ? 1 : 0;
    for (const hit of list ?? []) {
      if (!hit || !Number.isFinite(hit.rank) || hit.rank < 1) continue;
      let fused = byId.get(hit.id);
      if (!fused) {
        fused = { id: hit.id, score: 0, ranks: lists.map(() => null) };
        byId.set(hit.id, fused);
      }
      const prev = fused.ranks[li];
      // A duplicate id inside one list counts once, at its best rank.
      if (prev !== null && prev <= hit.rank) continue;
      if (prev !== null) fused.score -= weight / (k + prev);
      fused.ranks[li] = hit.rank;
      fused.score += weight / (k + hit.rank);
    }
  });
  // A zero-weight tier does not vote: ids only it found are not candidates.
  return sortFused([...byId.values()].filter((h) => h.score > 0), () => true);
}

/**
 * Fused hits best first: score, then present in more (voting) lists, then best rank, then id. The
 * tie-break keys are computed once per hit: computed inside the comparator they allocated two arrays
 * per comparison, ~150 KB per chat of ~200 candidates (issue #14).
 */
function sortFused<Id extends string | number>(hits: FusedHit<Id>[], votes: (list: number) => boolean): FusedHit<Id>[] {
  const keyed = hits.map((h) => {
    let present = 0;
    let best = Infinity;
    h.ranks.forEach((r, li) => {
      if (r === null || !votes(li)) return;
      present++;
      if (r < best) best = r;
    });
    return { h, present, best, id: String(h.id) };
  });
  // Signs, not differences: a fractional difference returned from the comparator is a heap number per
  // comparison. A zero or NaN difference falls through to the next key, as `||` did.
  keyed.sort((a, b) => {
    const score = b.h.score - a.h.score;
    if (score > 0) return 1;
    if (score < 0) return -1;
    const present = b.present - a.present;
    if (present !== 0) return present;
    const best = a.best - b.best;
    if (best > 0) return 1;
    if (best < 0) return -1;
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  });
  return keyed.map((k) => k.h);
}

/** One hit of one retrieval tier with its score already normalised onto [0, 1] (1 = the best possible). */
export interface NormalisedHit<Id extends string | number = string | number> {
  id: Id;
  score: number;
}

/**
 * Min-max normalisation over one ranked list: the best hit 1, the worst 0 (a lone hit, or all equal, 1).
 * For the vector tier the worst of its top-k stands for "unrelated": everything outside the list
 * scores lower still, and counts 0 in the fusion.
 */
export function minMaxNormalise<Id extends string | number>(hits: readonly { id: Id; score: number }[]): NormalisedHit<Id>[] {
  // Math.max/min folded over the finite scores: what Math.max(...finite) returns (-0 below +0, ±Infinity when
  // none), without the two arrays of scores and the spread per chat.
  let hi = -Infinity;
  let lo = Infinity;
  for (let i = 0; i < hits.length; i++) {
    const x = hits[i]!.score;
    if (!Number.isFinite(x)) continue;
    hi = Math.max(hi, x);
    lo = Math.min(lo, x);
  }
  return hits.map((h) => ({ id: h.id, score: !Number.isFinite(h.score) ? 0 : hi > lo ? (h.score - lo) / (hi - lo) : 1 }));
}

/**
 * Convex combination of normalised scores (Bruch, Gai & Ingber, "An Analysis of Fusion Functions for
 * Hybrid Retrieval", TOIS 2023): score(id) = Σ wᵢ·sᵢ / Σ wᵢ, a tier that did not return the id
 * counting 0. `ranks` holds the id's rank in each input list (null where absent). Ties: more
 * lists, then best rank, then id. A zero-weight tier does not vote (ids only it found drop out).
 */
export function convexFuse<Id extends string | number>(lists: NormalisedHit<Id>[][], weights: number[]): FusedHit<Id>[] {
  const w = lists.map((_, i) => {
    const x = weights[i];
    return typeof x === 'number' && Number.isFinite(x) && x > 0 ? x : 0;
  });
  const total = w.reduce((a, x) => a + x, 0);
  if (total === 0) return [];
  const byId = new Map<Id, FusedHit<Id>>();
  // Plain loops: ~200 hits per chat, each a closure call and a `ranks` array built by another map() before.
  for (let li = 0; li < lists.length; li++) {
    const list = lists[li]!;
    for (let i = 0; i < list.length; i++) {
      const hit = list[i];
      if (!hit || !Number.isFinite(hit.score)) continue;
      let fused = byId.get(hit.id);
      if (!fused) {
        fused = { id: hit.id, score: 0, ranks: new Array<number | null>(lists.length).fill(null) };
        byId.set(hit.id, fused);
      }
      // A duplicate id inside one list counts once, at its first (best) position.
      if (fused.ranks[li] !== null) continue;
      fused.ranks[li] = i + 1;
      fused.score += (w[li] * Math.min(1, Math.max(0, hit.score))) / total;
    }
  }
  const votes = (li: number) => w[li] > 0;
  return sortFused([...byId.values()].filter((h) => h.ranks.some((r, li) => r !== null && votes(li))), votes);
}

/**
 * convexFuse's order and scores, without its per-hit objects: what hybrid retrieval reads of the
 * fusion (issue #14: convexFuse's Map of hit objects, a `ranks` array per hit and the sort's keyed
 * copies were the largest allocation of a memory-on chat, ~45 KB of ~200 hits). The same arithmetic
 * in the same order (each score summed list by list from 0), the same filter (an id some voting list
 * holds) and the same tie-breaks in a stable sort of the same insertion order, so `ids[i]` and
 * `scores[i]` are convexFuse's `[i].id` and `[i].score` for every input (retrieval-scoring.test.ts).
 */
export function convexFuseRanking<Id extends string | number>(
  lists: readonly (readonly NormalisedHit<Id>[])[],
  weights: readonly number[],
): { ids: Id[]; scores: number[] } {
  const n = lists.length;
  const w: number[] = new Array(n);
  let total = 0;
  for (let li = 0; li < n; li++) {
    const x = weights[li];
    w[li] = typeof x === 'number' && Number.isFinite(x) && x > 0 ? x : 0;
  }
  for (let li = 0; li < n; li++) total += w[li]!;
  if (total === 0) return { ids: [], scores: [] };
  // Per fused id, by slot (first-seen order, as convexFuse's Map): the id, its score, the last list
  // that counted it (a duplicate inside one list counts once, at its first position), how many voting
  // lists hold it and its best rank in them.
  const slotOf = new Map<Id, number>();
  const ids: Id[] = [];
  const scores: number[] = [];
  const lastList: number[] = [];
  const present: number[] = [];
  const best: number[] = [];
  for (let li = 0; li < n; li++) {
    const list = lists[li]!;
    const votes = w[li]! > 0;
    for (let i = 0; i < list.length; i++) {
      const hit = list[i];
      if (!hit || !Number.isFinite(hit.score)) continue;
      let s = slotOf.get(hit.id);
      if (s === undefined) {
        s = ids.length;
        slotOf.set(hit.id, s);
        ids.push(hit.id);
        scores.push(0);
        lastList.push(-1);
        present.push(0);
        best.push(Infinity);
      } else if (lastList[s] === li) continue;
      lastList[s] = li;
      if (votes) {
        present[s]++;
        if (i + 1 < best[s]!) best[s] = i + 1;
      }
      scores[s] += (w[li]! * Math.min(1, Math.max(0, hit.score))) / total;
    }
  }
  const order: number[] = [];
  for (let s = 0; s < ids.length; s++) if (present[s]! > 0) order.push(s);
  // sortFused's comparator on the slots (signs, not differences: no heap number per comparison).
  order.sort((a, b) => {
    const score = scores[b]! - scores[a]!;
    if (score > 0) return 1;
    if (score < 0) return -1;
    const p = present[b]! - present[a]!;
    if (p !== 0) return p;
    const r = best[a]! - best[b]!;
    if (r > 0) return 1;
    if (r < 0) return -1;
    const x = String(ids[a]);
    const y = String(ids[b]);
    return x < y ? -1 : x > y ? 1 : 0;
  });
  const outIds: Id[] = new Array(order.length);
  const outScores: number[] = new Array(order.length);
  for (let i = 0; i < order.length; i++) {
    outIds[i] = ids[order[i]!]!;
    outScores[i] = scores[order[i]!]!;
  }
  return { ids: outIds, scores: outScores };
}

/** Marker appended to content cut to fit the budget. */
export const TRUNCATION_MARKER = '…';

/** Cuts `text` so that `estimateTokens` of the result is at most `maxTokens` (≤ maxTokens×4 characters, ending in "…" when cut). */
export function truncateToTokens(text: string, maxTokens: number): string {
  if (typeof text !== 'string') return '';
  const budget = Math.floor(maxTokens);
  if (!Number.isFinite(budget) || budget < 1) return '';
  if (estimateTokens(text) <= budget) return text;
  let cut = text.slice(0, budget * 4 - TRUNCATION_MARKER.length);
  // Never end on the first half of a surrogate pair.
  const last = cut.charCodeAt(cut.length - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut = cut.slice(0, -1);
  return cut.trimEnd() + TRUNCATION_MARKER;
}

/** The result of a budget walk. */
export interface BudgetSelection<T> {
  selected: T[];
  /** True when the best item alone exceeded the budget and was cut to fit. */
  truncatedFirst: boolean;
  totalTokens: number;
}

const validTokens = (t: unknown): t is number => typeof t === 'number' && Number.isFinite(t) && t >= 0;

/** Default truncation: items with a string `content` get it cut and their `tokens` recomputed; others cannot be cut (undefined). */
function truncateContent<T extends { tokens: number }>(item: T, maxTokens: number): T | undefined {
  const content = (item as { content?: unknown }).content;
  if (typeof content !== 'string') return undefined;
  const cut = truncateToTokens(content, maxTokens);
  return { ...item, content: cut, tokens: estimateTokens(cut) };
}

/** Walks items in rank order keeping every one that still fits (smaller later items can fill gaps) and never exceeds `maxTokens`; when the best item alone is larger than the budget it is returned alone, truncated to fit. */
export function selectWithinBudget<T extends { tokens: number }>(
  items: readonly T[],
  maxTokens: number,
  opts: { truncate?: (item: T, maxTokens: number) => T | undefined } = {},
): BudgetSelection<T> {
  const budget = Math.floor(maxTokens);
  const none: BudgetSelection<T> = { selected: [], truncatedFirst: false, totalTokens: 0 };
  if (!Array.isArray(items) || items.length === 0 || !Number.isFinite(budget) || budget < 1) return none;
  const first = items[0];
  if (validTokens(first.tokens) && first.tokens > budget) {
    const cut = (opts.truncate ?? truncateContent)(first, budget);
    if (cut && validTokens(cut.tokens) && cut.tokens <= budget) {
      return { selected: [cut], truncatedFirst: true, totalTokens: cut.tokens };
    }
    // An item that cannot be cut is skipped like any other that does not fit.
  }
  const selected: T[] = [];
  let total = 0;
  for (const item of items) {
    if (!validTokens(item.tokens) || total + item.tokens > budget) continue;
    selected.push(item);
    total += item.tokens;
  }
  return { selected, truncatedFirst: false, totalTokens: total };
}
