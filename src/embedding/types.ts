/** Where vectors come from (DESIGN §7). */
export type EmbeddingSource = 'remote' | 'static' | 'transformers';

/** Why an embedding could not be produced (the original's reasons). */
export type EmbeddingErrorReason = 'no_key' | 'model_load_failed' | 'request_failed' | 'rate_limited' | 'timeout' | 'unknown';

/** A failed embedding: a stable reason plus a message that never carries keys, URLs or the embedded text. */
export class EmbeddingError extends Error {
  constructor(
    readonly reason: EmbeddingErrorReason,
    readonly source: EmbeddingSource | null,
    readonly model: string | null,
    message: string,
  ) {
    super(message);
    this.name = 'EmbeddingError';
  }
}

/** One loaded source: texts in, one L2-normalised vector per text out (a zero vector when nothing was known). */
export interface Embedder {
  readonly source: EmbeddingSource;
  /** The model as settings and signatures name it. */
  readonly model: string;
  /** What makes two embedders interchangeable (model, or endpoint URL|model for a custom endpoint). */
  readonly identity: string;
  embed(texts: string[], signal?: AbortSignal): Promise<Float32Array[]>;
}

/** Scales a vector to unit length in place; a zero (or non-finite) vector becomes all zeros, never NaN. */
export function l2Normalize(v: Float32Array): Float32Array {
  let sum = 0;
  for (let i = 0; i < v.length; i++) sum += v[i] * v[i];
  const norm = Math.sqrt(sum);
  if (!Number.isFinite(norm) || norm === 0) {
    v.fill(0);
    return v;
  }
  for (let i = 0; i < v.length; i++) v[i] /= norm;
  return v;
}

/** True when every component is zero (an all-unknown text). */
export function isZeroVector(v: Float32Array): boolean {
  for (let i = 0; i < v.length; i++) if (v[i] !== 0) return false;
  return true;
}

/** Cosine similarity of two vectors of the same length (0 when either is zero). */
export function cosine(a: Float32Array, b: Float32Array): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}

/** Clips text to at most `max` UTF-16 units without splitting a surrogate pair. */
export function clipText(text: string, max: number): string {
  if (text.length <= max) return text;
  const code = text.charCodeAt(max - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? max - 1 : max);
}

/** Longest input sent to any source: long chat queries otherwise overflow model context and fail the whole request. */
export const MAX_INPUT_CHARS = 20_000;
