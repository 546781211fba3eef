import os from 'node:os';
import { autoVecScanCacheMb, EnvError, loadEnv, memoryLimitBytes } from './env';

describe('loadEnv', () => {
  it('applies defaults', () => {
    const env = loadEnv({});
    expect(env.PORT).toBe(20128);
    expect(env.HOST).toBe('127.0.0.1');
    expect(env.QUEUE_PREFIX).toBe('engram');
    expect(env.WORKER_QUEUES.length).toBeGreaterThan(0);
    expect(env.QDRANT_CLEANUP_EVERY_MS).toBe(86_400_000);
  });

  it('names each invalid variable and what was expected', () => {
    expect(() => loadEnv({ PORT: 'abc', REDIS_URL: 'http://x', WORKER_QUEUES: 'nope' })).toThrow(EnvError);
    try {
      loadEnv({ PORT: 'abc', REDIS_URL: 'http://x', WORKER_QUEUES: 'nope' });
    } catch (err) {
      const msg = (err as Error).message;
      expect(msg).toMatch(/PORT: .*number/i);
      expect(msg).toMatch(/REDIS_URL: expected a redis:\/\//);
      expect(msg).toMatch(/WORKER_QUEUES: unknown queue\(s\) nope/);
    }
  });

  it('parses booleans strictly', () => {
    expect(loadEnv({ VECTOR_STORE_DISABLE_VEC: 'yes' }).VECTOR_STORE_DISABLE_VEC).toBe(true);
    expect(() => loadEnv({ VECTOR_STORE_DISABLE_VEC: 'maybe' })).toThrow(/VECTOR_STORE_DISABLE_VEC/);
  });

  it('parses per-queue concurrency', () => {
    expect(loadEnv({ WORKER_CONCURRENCY: 'maintenance=3' }).WORKER_CONCURRENCY).toEqual({ maintenance: 3 });
    expect(() => loadEnv({ WORKER_CONCURRENCY: 'maintenance=zero' })).toThrow(/WORKER_CONCURRENCY/);
  });

  it('rejects a short MANAGEMENT_TOKEN', () => {
    expect(() => loadEnv({ MANAGEMENT_TOKEN: 'short' })).toThrow(/MANAGEMENT_TOKEN: must be at least 16/);
  });

  it('reads TRUST_PROXY as express takes it, and refuses what proxy-addr would not', () => {
    expect(loadEnv({}).TRUST_PROXY).toEqual(['loopback']);
    expect(loadEnv({ TRUST_PROXY: 'false' }).TRUST_PROXY).toBe(false);
    expect(loadEnv({ TRUST_PROXY: 'TRUE' }).TRUST_PROXY).toBe(true);
    expect(loadEnv({ TRUST_PROXY: '2' }).TRUST_PROXY).toBe(2);
    expect(loadEnv({ TRUST_PROXY: 'loopback, 10.0.0.0/8,192.168.1.0/255.255.255.0, fd00::/8, 2001:db8::1' }).TRUST_PROXY).toEqual([
      'loopback',
      '10.0.0.0/8',
      '192.168.1.0/255.255.255.0',
      'fd00::/8',
      '2001:db8::1',
    ]);
    expect(() => loadEnv({ TRUST_PROXY: 'loopback,proxy.example.com' })).toThrow(/TRUST_PROXY: .*not one: proxy\.example\.com/);
    expect(() => loadEnv({ TRUST_PROXY: '10.0.0.0/33' })).toThrow(/TRUST_PROXY/);
    expect(() => loadEnv({ TRUST_PROXY: '10.0.0.0/255.0.255.0' })).toThrow(/TRUST_PROXY/);
    // Forms a newer address parser takes but express's does not (it would throw at startup instead).
    for (const v of ['127.1', '1.5', '1.2.3.4/4294967295']) expect(() => loadEnv({ TRUST_PROXY: v })).toThrow(/TRUST_PROXY: .*not one/);
  });

  it("MEMORY_VEC_SCAN_CACHE_MB: 'auto' (the default) is a quarter of the process's memory limit, at most 256; a number is taken as is", () => {
    expect(autoVecScanCacheMb(24 * 1024 ** 3)).toBe(256);
    expect(autoVecScanCacheMb(1024 ** 3)).toBe(256);
    expect(autoVecScanCacheMb(512 * 1024 ** 2)).toBe(128);
    expect(autoVecScanCacheMb(100 * 1024 ** 2)).toBe(25);
    expect(autoVecScanCacheMb(0)).toBe(0);
    const limit = memoryLimitBytes();
    expect(limit).toBeGreaterThan(0);
    expect(limit).toBeLessThanOrEqual(os.totalmem());
    expect(loadEnv({}).MEMORY_VEC_SCAN_CACHE_MB).toBe(autoVecScanCacheMb(limit));
    expect(loadEnv({ MEMORY_VEC_SCAN_CACHE_MB: 'auto' }).MEMORY_VEC_SCAN_CACHE_MB).toBe(autoVecScanCacheMb(limit));
    expect(loadEnv({ MEMORY_VEC_SCAN_CACHE_MB: '0' }).MEMORY_VEC_SCAN_CACHE_MB).toBe(0);
    expect(loadEnv({ MEMORY_VEC_SCAN_CACHE_MB: '512' }).MEMORY_VEC_SCAN_CACHE_MB).toBe(512);
    expect(() => loadEnv({ MEMORY_VEC_SCAN_CACHE_MB: 'lots' })).toThrow(/MEMORY_VEC_SCAN_CACHE_MB: expected 'auto' or an integer/);
  });
});
