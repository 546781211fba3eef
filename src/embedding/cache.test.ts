import crypto from 'node:crypto';
import { testEnv } from '../../test/helpers/env';
import { EmbeddingCache, embeddingCacheKey } from './cache';

const vec = (x: number) => Float32Array.from([x, 0]);

describe('embeddingCacheKey', () => {
  it('is <source>:<model>:<dim>:<sha256hex(text)> with dim 0 when unknown', () => {
    const sha = crypto.createHash('sha256').update('hello').digest('hex');
    expect(embeddingCacheKey('static', 'minishlab/potion-base-8M', 256, 'hello')).toBe(`static:minishlab/potion-base-8M:256:${sha}`);
    expect(embeddingCacheKey('remote', 'openai/text-embedding-3-small', null, 'hello')).toBe(`remote:openai/text-embedding-3-small:0:${sha}`);
  });

  it('differs by source, model, width and text', () => {
    const keys = new Set([
      embeddingCacheKey('static', 'm', 8, 't'),
      embeddingCacheKey('transformers', 'm', 8, 't'),
      embeddingCacheKey('static', 'n', 8, 't'),
      embeddingCacheKey('static', 'm', 16, 't'),
      embeddingCacheKey('static', 'm', 8, 'u'),
    ]);
    expect(keys.size).toBe(5);
  });
});

describe('EmbeddingCache', () => {
  it('evicts the least recently used entry, not the first inserted', () => {
    const c = new EmbeddingCache(2, 60_000);
    c.set('a', vec(1));
    c.set('b', vec(2));
    expect(c.get('a')).toBeDefined(); // a is now the most recently used
    c.set('c', vec(3));
    expect(c.get('b')).toBeUndefined();
    expect(c.get('a')?.[0]).toBe(1);
    expect(c.get('c')?.[0]).toBe(3);
  });

  it('expires entries after the TTL', () => {
    let now = 1_000;
    const c = new EmbeddingCache(10, 500, () => now);
    c.set('a', vec(1));
    now += 499;
    expect(c.get('a')).toBeDefined();
    now += 2;
    expect(c.get('a')).toBeUndefined();
    expect(c.stats().size).toBe(0);
  });

  it('counts hits, misses and size; clear() empties and resets', () => {
    const c = new EmbeddingCache(10, 60_000);
    c.set('a', vec(1));
    c.get('a');
    c.get('a');
    c.get('zzz');
    expect(c.stats()).toEqual({ hits: 2, misses: 1, size: 1, max: 10, ttlMs: 60_000 });
    c.clear();
    expect(c.stats()).toMatchObject({ hits: 0, misses: 0, size: 0 });
  });

  it('takes its size and TTL from env', () => {
    const c = EmbeddingCache.fromEnv(testEnv({ MEMORY_EMBEDDING_CACHE_MAX: '3', MEMORY_EMBEDDING_CACHE_TTL_MS: '1234' }));
    expect(c.stats()).toMatchObject({ max: 3, ttlMs: 1234 });
    for (const k of ['a', 'b', 'c', 'd']) c.set(k, vec(1));
    expect(c.stats().size).toBe(3);
  });
});
