/**
 * Issue #10 item 4: optional refinements of hybrid retrieval, each behind a memory setting and off
 * unless it won on the labelled sets (bench/README.md, "Issue #10 item 4"). Pure functions only: the
 * hooks in RetrievalService are a few lines each.
 */
import { FTS_STOP_WORDS, type NormalisedHit } from './retrieval-scoring';
import { tokenize } from './tokenize';
import type { MemorySettings } from './settings';

/** The extras in effect for one call (null = off). */
export interface RetrievalExtras {
  /** Convex fusion: keyword candidates whose normalised bm25 (bm25 ÷ Σ idf) is below this drop out. */
  keywordFloor: number | null;
  /** Convex fusion: vector hits whose min-max normalised cosine is below this drop out. */
  vectorFloor: number | null;
  /** Hybrid: added to the fused score of memories dated inside the window the query names ("in May 2023", "yesterday"). */
  temporalBoost: number | null;
  /** Convex fusion: weight (× the keyword weight) of an RM3 expansion list built from the top keyword hits. */
  prfWeight: number | null;
}

/** The call's overrides (retrieve-preview), else the settings. */
export function extrasFor(
  settings: Pick<MemorySettings, 'hybridKeywordFloor' | 'hybridVectorFloor' | 'hybridTemporalBoost' | 'hybridPrfWeight'>,
  override?: Partial<RetrievalExtras>,
): RetrievalExtras {
  return {
    keywordFloor: override?.keywordFloor !== undefined ? override.keywordFloor : settings.hybridKeywordFloor,
    vectorFloor: override?.vectorFloor !== undefined ? override.vectorFloor : settings.hybridVectorFloor,
    temporalBoost: override?.temporalBoost !== undefined ? override.temporalBoost : settings.hybridTemporalBoost,
    prfWeight: override?.prfWeight !== undefined ? override.prfWeight : settings.hybridPrfWeight,
  };
}

/**
 * Drops the hits whose normalised score is below `floor` (null or ≤ 0: the list unchanged). A
 * keyword list of name-only matches (each scoring a small share of the query's idf mass) then
 * leaves room for vector-only hits instead of sitting above them in the fusion. Ids in `exempt` stay
 * whatever their score (a temporal question's dated rows: the date is the evidence, not the words).
 */
export function applyScoreFloor<Id extends string | number>(hits: NormalisedHit<Id>[], floor: number | null, exempt?: ReadonlySet<Id>): NormalisedHit<Id>[] {
  if (floor === null || !(floor > 0)) return hits;
  return hits.filter((h) => exempt?.has(h.id) || (Number.isFinite(h.score) && h.score >= floor));
}

/** A half-open window of calendar days, UTC: `from` ≤ day < `to`, both `YYYY-MM-DD`. */
export interface DateWindow {
  from: string;
  to: string;
}

const MONTHS = ['january', 'february', 'march', 'april', 'may', 'june', 'july', 'august', 'september', 'october', 'november', 'december'];
const MONTH_RE = '(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)';

const MAY_NAME_A_DATE = /\d|yesterday|today|last |jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec/;
// The patterns naming a month, compiled once (they were built per call: four RegExp compilations per question that
// passes MAY_NAME_A_DATE). None has the g or y flag, so String.match keeps no state in them between calls.
const DAY_OF_MONTH_YEAR = new RegExp(`\\b(\\d{1,2})(?:st|nd|rd|th)? (?:of )?${MONTH_RE},? ((?:19|20)\\d\\d)\\b`);
const MONTH_DAY_YEAR = new RegExp(`\\b${MONTH_RE} (\\d{1,2})(?:st|nd|rd|th)?,? ((?:19|20)\\d\\d)\\b`);
const MONTH_YEAR = new RegExp(`\\b${MONTH_RE},? ((?:19|20)\\d\\d)\\b`);
const RELATIVE_MONTH = new RegExp(`\\b(last|in|during|since) ${MONTH_RE}\\b`);

const day = (y: number, m0: number, d: number): string => new Date(Date.UTC(y, m0, d)).toISOString().slice(0, 10);
const monthIndex = (name: string): number => MONTHS.findIndex((m) => m.startsWith(name.toLowerCase().slice(0, 3)));
const monthWindow = (y: number, m0: number): DateWindow => ({ from: day(y, m0, 1), to: day(y, m0 + 1, 1) });
const dayWindow = (y: number, m0: number, d: number): DateWindow => ({ from: day(y, m0, d), to: day(y, m0, d + 1) });

/**
 * The calendar window a question names, relative to `now` (UTC), or null when it names none.
 * Absolute: `2023-05-17`, `17 May 2023`, `May 17, 2023`, `May 2023`, `2023-05`, `in 2023`.
 * Relative: `yesterday`, `today`, `last week` (the 7 days before today), `last month`, `last year`,
 * `last May` / `in May` (the latest May before this month; `in May` includes the current month).
 * The first (most specific) pattern that matches wins; a bare number is never read as a year
 * unless it follows "in"/"during"/"since" … and looks like one (1900–2099).
 */
export function dateWindowOf(query: string, now: Date): DateWindow | null {
  const q = query.toLowerCase();
  // Every pattern below needs a digit, "yesterday", "today", "last " or a month's first three letters:
  // one scan rules most questions out before a dozen (issue 14: once per hybrid chat).
  if (!MAY_NAME_A_DATE.test(q)) return null;
  const Y = now.getUTCFullYear();
  const M = now.getUTCMonth();
  const D = now.getUTCDate();
  let m: RegExpMatchArray | null;
  if ((m = q.match(/\b((?:19|20)\d\d)-(\d\d)-(\d\d)\b/))) return dayWindow(Number(m[1]), Number(m[2]) - 1, Number(m[3]));
  if ((m = q.match(DAY_OF_MONTH_YEAR))) return dayWindow(Number(m[3]), monthIndex(m[2]), Number(m[1]));
  if ((m = q.match(MONTH_DAY_YEAR))) return dayWindow(Number(m[3]), monthIndex(m[1]), Number(m[2]));
  if ((m = q.match(MONTH_YEAR))) return monthWindow(Number(m[2]), monthIndex(m[1]));
  if ((m = q.match(/\b((?:19|20)\d\d)-(\d\d)\b/))) return monthWindow(Number(m[1]), Number(m[2]) - 1);
  if (/\byesterday\b/.test(q)) return dayWindow(Y, M, D - 1);
  if (/\btoday\b/.test(q)) return dayWindow(Y, M, D);
  if (/\blast week\b/.test(q)) return { from: day(Y, M, D - 7), to: day(Y, M, D) };
  if (/\blast month\b/.test(q)) return monthWindow(Y, M - 1);
  if (/\blast year\b/.test(q)) return { from: day(Y - 1, 0, 1), to: day(Y, 0, 1) };
  if ((m = q.match(RELATIVE_MONTH))) {
    const mi = monthIndex(m[2]);
    // "may" after "in" is too often the verb ("in may be"); only "last May" reads it as the month.
    if (m[2] === 'may' && m[1] !== 'last') return null;
    const year = mi < M || (mi === M && m[1] !== 'last') ? Y : Y - 1;
    return monthWindow(year, mi);
  }
  if ((m = q.match(/\b(?:in|during) ((?:19|20)\d\d)\b/))) return { from: day(Number(m[1]), 0, 1), to: day(Number(m[1]) + 1, 0, 1) };
  return null;
}

/** The day a memory is about: its metadata `date` when that starts with `YYYY-MM-DD`, else its created_at day. */
export function memoryDay(metadata: Record<string, unknown> | null | undefined, createdAt: string): string {
  const d = metadata?.date;
  if (typeof d === 'string' && /^\d{4}-\d{2}-\d{2}/.test(d)) return d.slice(0, 10);
  return createdAt.slice(0, 10);
}

export const inWindow = (w: DateWindow, dayIso: string): boolean => dayIso >= w.from && dayIso < w.to;

/**
 * Adds `boost` to the score of the items dated inside the window and re-sorts (stable: ties keep the
 * fusion's order). null/≤ 0 boost or no window: unchanged.
 */
export function boostInWindow<T extends { score: number }>(items: T[], dayOf: (x: T) => string | null, window: DateWindow | null, boost: number | null): T[] {
  if (!window || boost === null || !(boost > 0)) return items;
  return items
    .map((x, i) => {
      const d = dayOf(x);
      return { x: d !== null && inWindow(window, d) ? { ...x, score: x.score + boost } : x, i };
    })
    .sort((a, b) => b.x.score - a.x.score || a.i - b.i)
    .map((e) => e.x);
}

/** `a` then the items of `b` whose id `a` lacks. */
export function mergeById<T>(a: T[], b: T[], id: (x: T) => string): T[] {
  const seen = new Set(a.map(id));
  return [...a, ...b.filter((x) => !seen.has(id(x)))];
}

/** RM3's feedback set and expansion size (Abdul-Jaleel et al., UMass at TREC 2004; Lv & Zhai 2009). */
export const PRF_FEEDBACK_DOCS = 5;
export const PRF_EXPANSION_TERMS = 5;
/** Terms of the relevance model re-weighted by idf (the rest are dropped before the idf lookups). */
export const PRF_CANDIDATE_TERMS = 30;

/**
 * RM3's relevance model over the feedback rows: P(t|R) ∝ Σ_D w(D)·tf(t, D)/|D|, with w(D) the row's
 * normalised keyword score; the query's own terms, stop-words and one-character tokens excluded.
 * Returns the top `max` terms by that weight, best first (ties by term), for the caller to re-weight.
 */
export function relevanceModel(feedback: readonly { text: string; weight: number }[], exclude: ReadonlySet<string>, max = PRF_CANDIDATE_TERMS): { term: string; weight: number }[] {
  const acc = new Map<string, number>();
  for (const { text, weight } of feedback) {
    if (!(weight > 0)) continue;
    const toks = tokenize(text);
    if (toks.length === 0) continue;
    for (const t of toks) {
      if (t.length < 2 || exclude.has(t) || FTS_STOP_WORDS.has(t)) continue;
      acc.set(t, (acc.get(t) ?? 0) + weight / toks.length);
    }
  }
  return [...acc.entries()]
    .map(([term, weight]) => ({ term, weight }))
    .sort((a, b) => b.weight - a.weight || (a.term < b.term ? -1 : a.term > b.term ? 1 : 0))
    .slice(0, max);
}

/**
 * The expansion terms: the relevance model's weight × idf (a word every row holds expands nothing),
 * top `n` with a positive product, best first.
 */
export function expansionTerms(model: readonly { term: string; weight: number }[], idf: (term: string) => number, n = PRF_EXPANSION_TERMS): string[] {
  return model
    .map((m) => ({ term: m.term, w: m.weight * Math.max(0, idf(m.term)) }))
    .filter((m) => m.w > 0)
    .sort((a, b) => b.w - a.w || (a.term < b.term ? -1 : a.term > b.term ? 1 : 0))
    .slice(0, n)
    .map((m) => m.term);
}
