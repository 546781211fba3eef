import crypto from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Env } from '../config/env';

export interface EmbeddingCacheStats {
  hits: number;
  misses: number;
  size: number;
  max: number;
  ttlMs: number;
}

/** The cache key `<source>:<model>:<dim>:<sha256hex(text)>` (dim "0" while unknown). */
export function embeddingCacheKey(source: string, model: string, dimensions: number | null, text: string): string {
  return embeddingCacheKeyOfHash(source, model, dimensions, textHash(text));
}

/** The text's part of the cache key (sha256, hex, of its UTF-8): one-shot, without a Hash object per text. */
export function textHash(text: string): string {
  return crypto.hash('sha256', text, 'hex');
}

/** embeddingCacheKey with the text's hash (textHash) already computed. */
export function embeddingCacheKeyOfHash(source: string, model: string, dimensions: number | null, hash: string): string {
  return `${source}:${model}:${dimensions && dimensions > 0 ? dimensions : 0}:${hash}`;
}

/** Embedding vectors by key: a true LRU (reads refresh recency) whose entries expire after a TTL. */
export class EmbeddingCache {
  private readonly lru: LRUCache<string, Float32Array>;
  private hits = 0;
  private misses = 0;

  constructor(
    readonly max: number,
    readonly ttlMs: number,
    /** Clock in ms; injectable so TTL tests need not sleep. */
    now?: () => number,
  ) {
    // updateAgeOnGet stays false: a hot entry keeps its place (recency) but is still re-embedded once its TTL ends.
    this.lru = new LRUCache({ max, ttl: ttlMs, updateAgeOnGet: false, ttlResolution: 0, ...(now ? { perf: { now } } : {}) });
  }

  /** A cache sized by MEMORY_EMBEDDING_CACHE_MAX and MEMORY_EMBEDDING_CACHE_TTL_MS. */
  static fromEnv(env: Pick<Env, 'MEMORY_EMBEDDING_CACHE_MAX' | 'MEMORY_EMBEDDING_CACHE_TTL_MS'>): EmbeddingCache {
    return new EmbeddingCache(env.MEMORY_EMBEDDING_CACHE_MAX, env.MEMORY_EMBEDDING_CACHE_TTL_MS);
  }

  get(key: string): Float32Array | undefined {
    const v = this.lru.get(key);
    if (v) this.hits++;
    else this.misses++;
    return v;
  }

  set(key: string, vector: Float32Array): void {
    this.lru.set(key, vector);
  }

  /** Drops every entry and resets the counters. */
  clear(): void {
    this.lru.clear();
    this.hits = 0;
    this.misses = 0;
  }

  stats(): EmbeddingCacheStats {
    // Expired entries linger until touched; drop them so `size` counts only live vectors.
    this.lru.purgeStale();
    return { hits: this.hits, misses: this.misses, size: this.lru.size, max: this.max, ttlMs: this.ttlMs };
  }
}
