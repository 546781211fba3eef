/** Evidence recall@k and MRR per question, and their means per slice of the question set. */
import { QUESTION_KINDS, QUESTION_TAGS, type SetQuestion } from './types';

export interface QuestionScore {
  r5: number;
  r10: number;
  r20: number;
  /** 1 / rank of the first evidence turn in the top 20, else 0. */
  rr: number;
  /** 1-based rank of each evidence turn in the answer (null: not in the top 20). */
  ranks: (number | null)[];
}

export function scoreAnswer(evidence: string[], ids: string[]): QuestionScore {
  const top = ids.slice(0, 20);
  const ranks = evidence.map((e) => {
    const i = top.indexOf(e);
    return i < 0 ? null : i + 1;
  });
  const within = (k: number) => ranks.filter((r) => r !== null && r <= k).length / evidence.length;
  const first = Math.min(...ranks.map((r) => r ?? Infinity));
  return { r5: within(5), r10: within(10), r20: within(20), rr: Number.isFinite(first) ? 1 / first : 0, ranks };
}

export interface SliceStats {
  n: number;
  r5: number;
  r10: number;
  r20: number;
  mrr: number;
  p50ms: number;
}

/** The slices every table reports: all questions, each kind, each tag. */
export const SLICES: { name: string; has: (q: SetQuestion) => boolean }[] = [
  { name: 'all', has: () => true },
  ...QUESTION_KINDS.map((k) => ({ name: k, has: (q: SetQuestion) => q.kind === k })),
  ...QUESTION_TAGS.map((t) => ({ name: t, has: (q: SetQuestion) => q.tags.includes(t) })),
];

export function median(xs: number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);

export function sliceStats(questions: SetQuestion[], scores: Map<string, QuestionScore>, ms: Map<string, number>): Record<string, SliceStats> {
  const out: Record<string, SliceStats> = {};
  for (const s of SLICES) {
    const qs = questions.filter(s.has);
    const sc = qs.map((q) => scores.get(q.id)!);
    out[s.name] = {
      n: qs.length,
      r5: mean(sc.map((x) => x.r5)),
      r10: mean(sc.map((x) => x.r10)),
      r20: mean(sc.map((x) => x.r20)),
      mrr: mean(sc.map((x) => x.rr)),
      p50ms: median(qs.map((q) => ms.get(q.id)!)),
    };
  }
  return out;
}
