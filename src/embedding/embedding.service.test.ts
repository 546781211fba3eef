import path from 'node:path';
import { testEnv, tempDir } from '../../test/helpers/env';
import { startFakeEmbeddingsServer, type FakeEmbeddingsServer } from '../../test/helpers/fake-embeddings-server';
import { shareTypedArraysWithNative, topicModelSpec, writeModel2VecFolder, writeTransformersModel } from '../../test/helpers/model-fixtures';
import * as cacheModule from './cache';
import { EmbeddingCache, embeddingCacheKey } from './cache';
import { EmbeddingService, listEmbeddingProviders, sanitizeEmbeddingMessage } from './embedding.service';
import type { EmbeddingSettings } from './resolve';
import { forgetStaticModels } from './static';
import { cosine, EmbeddingError } from './types';

shareTypedArraysWithNative();

const base: EmbeddingSettings = {
  embeddingSource: 'auto',
  embeddingProviderModel: null,
  staticEnabled: false,
  transformersEnabled: false,
  customBaseUrl: null,
  customModelId: null,
};

describe('EmbeddingService', () => {
  const services: EmbeddingService[] = [];
  const make = (env: ReturnType<typeof testEnv>) => {
    const svc = new EmbeddingService(env);
    services.push(svc);
    return svc;
  };
  afterEach(async () => {
    forgetStaticModels();
    await Promise.all(services.splice(0).map((s) => s.close()));
  });

  describe('static source', () => {
    const folder = writeModel2VecFolder(path.join(tempDir('svc'), 'm2v'), topicModelSpec(16));
    const settings: EmbeddingSettings = { ...base, staticEnabled: true };

    it('embeds through the cache per text, measures the width and reports it in the resolution', async () => {
      const svc = make(testEnv({ MEMORY_STATIC_MODEL: folder }));
      expect(svc.resolve(settings).dimensions).toBeNull();
      const first = await svc.embedMany(['cat', 'kitten', 'cat', 'pizza'], settings);
      expect(first).toMatchObject({ cached: 0, embedded: 3, zeroVectors: 0 });
      expect(first.resolution).toMatchObject({ source: 'static', dimensions: 16, signature: `static:${folder}:16` });
      const [cat, kitten, cat2, pizza] = first.vectors as Float32Array[];
      expect(Array.from(cat2)).toEqual(Array.from(cat));
      expect(cosine(cat, kitten)).toBeGreaterThan(cosine(cat, pizza));

      const second = await svc.embedMany(['cat', 'snow'], settings);
      expect(second).toMatchObject({ cached: 1, embedded: 1 });
      expect(svc.cacheStats()).toMatchObject({ size: 4 });
      // The measured width sticks for later resolutions in this process.
      expect(svc.resolve(settings).dimensions).toBe(16);

      const one = await svc.embedOne('cat', settings);
      expect(one.cached).toBe(true);
      expect(one.vector?.length).toBe(16);
      svc.clearCache();
      expect(svc.cacheStats()).toMatchObject({ size: 0, hits: 0, misses: 0 });
    });

    it('hashes a text once per call for its cache read and write, under the same keys as before', async () => {
      const svc = make(testEnv({ MEMORY_STATIC_MODEL: folder }));
      await svc.embedOne('warm the width', settings);
      const hash = jest.spyOn(cacheModule, 'textHash');
      const set = jest.spyOn(EmbeddingCache.prototype, 'set');
      try {
        expect((await svc.embedOne('cat pizza', settings, undefined, 'key-a')).cached).toBe(false);
        expect(hash).toHaveBeenCalledTimes(1);
        expect(set.mock.calls[0]![0]).toBe(`${embeddingCacheKey('static', folder, 16, 'cat pizza')}:key-a`);
        await svc.embedMany(['cat', 'snow', 'cat'], settings);
        expect(hash).toHaveBeenCalledTimes(3);
      } finally {
        hash.mockRestore();
        set.mockRestore();
      }
      expect((await svc.embedOne('cat pizza', settings, undefined, 'key-a')).cached).toBe(true);
    });

    it('keeps a cache per scope (API key): one key never answers from another key\'s query', async () => {
      const svc = make(testEnv({ MEMORY_STATIC_MODEL: folder }));
      expect((await svc.embedOne('cat pizza', settings, undefined, 'key-a')).cached).toBe(false);
      expect((await svc.embedOne('cat pizza', settings, undefined, 'key-a')).cached).toBe(true);
      expect((await svc.embedOne('cat pizza', settings, undefined, 'key-b')).cached).toBe(false);
      expect((await svc.embedOne('cat pizza', settings)).cached).toBe(false);
    });

    it('returns null (not NaN) for all-unknown or empty texts and counts them', async () => {
      const svc = make(testEnv({ MEMORY_STATIC_MODEL: folder }));
      const r = await svc.embedMany(['qqqq zzzz', '', '   ', 'rain'], settings);
      expect(r.vectors.map((v) => (v === null ? null : v.length))).toEqual([null, null, null, 16]);
      expect(r.zeroVectors).toBe(3);
      expect(r.vectors[3]!.some(Number.isNaN)).toBe(false);
      const again = await svc.embedOne('qqqq zzzz', settings);
      expect(again).toMatchObject({ vector: null, cached: true });
    });
  });

  it('uses the transformers source when it is the one enabled', async () => {
    const folder = writeTransformersModel(path.join(tempDir('svc'), 'tf'), topicModelSpec(8));
    const svc = make(testEnv({ MEMORY_TRANSFORMERS_MODEL: folder }));
    const r = await svc.embedMany(['bug in the compiler', 'python function', 'sunny'], { ...base, transformersEnabled: true });
    expect(r.resolution).toMatchObject({ source: 'transformers', dimensions: 8 });
    const [a, b, c] = r.vectors as Float32Array[];
    expect(cosine(a, b)).toBeGreaterThan(cosine(a, c));
  });

  describe('remote source', () => {
    let server: FakeEmbeddingsServer;
    beforeEach(async () => {
      server = await startFakeEmbeddingsServer({ dim: 24 });
    });
    afterEach(() => server.close());

    it('calls an operator-configured ollama endpoint on loopback (no key) and measures the width', async () => {
      const svc = make(testEnv({ OLLAMA_BASE_URL: server.baseUrl.replace(/\/v1$/, ''), MEMORY_EMBEDDING_BATCH_SIZE: '2' }));
      const settings = { ...base, embeddingProviderModel: 'ollama/all-minilm' };
      const r = await svc.embedMany(['one', 'two', 'three'], settings);
      expect(server.requests.map((q) => q.body)).toEqual([
        { model: 'all-minilm', input: ['one', 'two'] },
        { model: 'all-minilm', input: ['three'] },
      ]);
      // The registry said 384; the server answers 24 wide, and the measurement wins.
      expect(r.resolution).toMatchObject({ dimensions: 24, signature: 'remote:ollama/all-minilm:24' });
    });

    it('holds the user-set custom endpoint to the private-address rule', async () => {
      const settings = { ...base, customBaseUrl: server.baseUrl, customModelId: 'my-embedder' };
      const strict = make(testEnv({ OMNIROUTE_ALLOW_PRIVATE_PROVIDER_URLS: 'false' }));
      await expect(strict.embedMany(['x'], settings)).rejects.toMatchObject({ reason: 'request_failed', source: null });
      expect(server.requests).toHaveLength(0);

      const allowed = make(testEnv({ OMNIROUTE_ALLOW_PRIVATE_PROVIDER_URLS: 'true', MEMORY_EMBEDDING_CUSTOM_API_KEY: 'custom-key-123' }));
      const r = await allowed.embedMany(['x'], settings);
      expect(r.resolution).toMatchObject({ model: 'memory-custom/my-embedder', identity: `${server.baseUrl}/embeddings|my-embedder`, dimensions: 24 });
      expect(server.requests[0]).toMatchObject({ authorization: 'Bearer custom-key-123', body: { model: 'my-embedder', input: ['x'] } });
    });

    it('surfaces typed errors: 401 → no_key, 429 → rate_limited, slow → timeout', async () => {
      const svc = make(testEnv({ OLLAMA_BASE_URL: server.baseUrl.replace(/\/v1$/, ''), MEMORY_EMBEDDING_TIMEOUT_MS: '200' }));
      const settings = { ...base, embeddingProviderModel: 'ollama/nomic-embed-text' };
      server.behave({ kind: 'status', status: 401 });
      await expect(svc.embedOne('a', settings)).rejects.toMatchObject({ reason: 'no_key', source: 'remote', model: 'ollama/nomic-embed-text' });
      server.behave({ kind: 'status', status: 429 });
      await expect(svc.embedOne('b', settings)).rejects.toMatchObject({ reason: 'rate_limited' });
      server.behave({ kind: 'delay', ms: 3000 });
      await expect(svc.embedOne('c', settings)).rejects.toMatchObject({ reason: 'timeout' });
      // Failures are not cached.
      server.behave({ kind: 'ok' });
      expect((await svc.embedOne('a', settings)).cached).toBe(false);
    });
  });

  it('throws EmbeddingError when no source is usable, with the resolution reason', async () => {
    const svc = make(testEnv({}));
    const err = await svc.embedOne('x', { ...base, embeddingProviderModel: 'openai/text-embedding-3-small' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EmbeddingError);
    expect(err).toMatchObject({ reason: 'no_key', source: null });
    expect((err as Error).message).toContain('OPENAI_API_KEY is not set');
  });
});

describe('listEmbeddingProviders', () => {
  it('lists every provider with hasKey from env and provider/model ids with documented widths', () => {
    const list = listEmbeddingProviders(testEnv({ OPENAI_API_KEY: 'sk-x', VOYAGE_API_KEY: undefined }));
    const byId = Object.fromEntries(list.map((p) => [p.provider, p]));
    expect(Object.keys(byId)).toEqual(expect.arrayContaining(['openai', 'mistral', 'together', 'jina', 'voyage', 'nvidia', 'openrouter', 'ollama']));
    expect(byId.openai.hasKey).toBe(true);
    expect(byId.voyage.hasKey).toBe(false);
    expect(byId.ollama.hasKey).toBe(true);
    expect(byId.openai.models).toEqual(
      expect.arrayContaining([
        { id: 'openai/text-embedding-3-small', name: 'text-embedding-3-small', dimensions: 1536 },
        { id: 'openai/text-embedding-3-large', name: 'text-embedding-3-large', dimensions: 3072 },
        { id: 'openai/text-embedding-ada-002', name: 'text-embedding-ada-002', dimensions: 1536 },
      ]),
    );
    expect(byId.mistral.models[0]).toMatchObject({ id: 'mistral/mistral-embed', dimensions: 1024 });
    expect(byId.jina.models).toContainEqual(expect.objectContaining({ id: 'jina/jina-embeddings-v3', dimensions: 1024 }));
    expect(byId.nvidia.models).toContainEqual(expect.objectContaining({ id: 'nvidia/nv-embedqa-e5-v5', dimensions: 1024 }));
    expect(byId.ollama.models).toContainEqual(expect.objectContaining({ id: 'ollama/nomic-embed-text', dimensions: 768 }));
    expect(JSON.stringify(list)).not.toContain('sk-x');
  });
});

describe('sanitizeEmbeddingMessage', () => {
  it('removes URLs and key-shaped strings', () => {
    const out = sanitizeEmbeddingMessage('failed at https://api.example.com/v1/embeddings with Bearer sk-abcdef0123456789 and key sk-live-abcdefgh12345');
    expect(out).not.toMatch(/example\.com|sk-abc|sk-live/);
  });
});
