import { LRUCache } from 'lru-cache';
import type { MemoryRecord } from './types';

/** The read cache for `get`: a true LRU with TTL; misses are never cached. */
export class MemoryReadCache {
  private readonly lru: LRUCache<string, MemoryRecord>;
  hits = 0;
  misses = 0;

  constructor(max: number, ttlMs: number) {
    this.lru = new LRUCache({ max, ttl: ttlMs, updateAgeOnGet: false });
  }

  get(id: string): MemoryRecord | undefined {
    const v = this.lru.get(id);
    if (v) this.hits++;
    else this.misses++;
    return v;
  }

  set(r: MemoryRecord): void {
    this.lru.set(r.id, r);
  }

  invalidate(id: string): void {
    this.lru.delete(id);
  }

  clear(): void {
    this.lru.clear();
  }

  stats(): { hits: number; misses: number; size: number; hitRate: number } {
    const total = this.hits + this.misses;
    return { hits: this.hits, misses: this.misses, size: this.lru.size, hitRate: total ? this.hits / total : 0 };
  }
}
