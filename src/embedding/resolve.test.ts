import path from 'node:path';
import { testEnv, tempDir } from '../../test/helpers/env';
import { topicModelSpec, writeModel2VecFolder, writeTransformersModel } from '../../test/helpers/model-fixtures';
import { DEFAULT_MEMORY_SETTINGS } from '../memory/settings';
import { embeddingSignature, resolveEmbedding, resolveEmbeddingDetail, withMeasuredDimensions, type EmbeddingSettings } from './resolve';

const base: EmbeddingSettings = {
  embeddingSource: DEFAULT_MEMORY_SETTINGS.embeddingSource,
  embeddingProviderModel: null,
  staticEnabled: false,
  transformersEnabled: false,
  customBaseUrl: null,
  customModelId: null,
};
const s = (over: Partial<EmbeddingSettings>): EmbeddingSettings => ({ ...base, ...over });
const noKeys = testEnv({ OPENAI_API_KEY: undefined, NVIDIA_API_KEY: undefined });
const withOpenAi = testEnv({ OPENAI_API_KEY: 'sk-test-key' });

describe('resolveEmbedding: auto', () => {
  it('nothing configured → null:null:null with an English reason', () => {
    const r = resolveEmbedding(base, noKeys);
    expect(r).toMatchObject({ source: null, model: null, dimensions: null, identity: null, signature: 'null:null:null' });
    expect(r.reason).toMatch(/^auto: no embedding source available; remote skipped \(embeddingProviderModel not configured\); static disabled; transformers disabled$/);
  });

  it('remote only when the chosen provider really has a key', () => {
    const settings = s({ embeddingProviderModel: 'openai/text-embedding-3-small' });
    const r = resolveEmbedding(settings, withOpenAi);
    expect(r).toMatchObject({
      source: 'remote',
      model: 'openai/text-embedding-3-small',
      dimensions: 1536,
      signature: 'remote:openai/text-embedding-3-small:1536',
    });
    expect(r.reason).toContain('OPENAI_API_KEY');
    const missing = resolveEmbedding(settings, noKeys);
    expect(missing.source).toBeNull();
    expect(missing.reason).toContain('OPENAI_API_KEY is not set');
    expect(resolveEmbeddingDetail(settings, noKeys).failure).toBe('no_key');
  });

  it('a missing key falls back to static when enabled, then to transformers', () => {
    const settings = s({ embeddingProviderModel: 'openai/text-embedding-3-small', staticEnabled: true, transformersEnabled: true });
    const st = resolveEmbedding(settings, noKeys);
    expect(st).toMatchObject({ source: 'static', model: 'minishlab/potion-base-8M', dimensions: null, signature: 'static:minishlab/potion-base-8M:null' });
    expect(st.reason).toMatch(/remote skipped \(OPENAI_API_KEY is not set\)/);
    const tf = resolveEmbedding({ ...settings, staticEnabled: false }, noKeys);
    expect(tf).toMatchObject({ source: 'transformers', model: 'Xenova/all-MiniLM-L6-v2', signature: 'transformers:Xenova/all-MiniLM-L6-v2:null' });
    expect(tf.reason).toMatch(/static disabled/);
  });

  it('ollama needs no key; unknown custom models have null dimensions', () => {
    expect(resolveEmbedding(s({ embeddingProviderModel: 'ollama/nomic-embed-text' }), noKeys)).toMatchObject({
      source: 'remote',
      dimensions: 768,
      signature: 'remote:ollama/nomic-embed-text:768',
    });
    expect(resolveEmbedding(s({ embeddingProviderModel: 'local/some-new-model' }), noKeys)).toMatchObject({
      source: 'remote',
      model: 'ollama/some-new-model',
      dimensions: null,
      signature: 'remote:ollama/some-new-model:null',
    });
  });

  it('registry widths for known NVIDIA models, with the API model name looked up', () => {
    const env = testEnv({ NVIDIA_API_KEY: 'nvapi-test' });
    const d = resolveEmbeddingDetail(s({ embeddingProviderModel: 'nvidia/nv-embedqa-e5-v5' }), env);
    expect(d.resolution).toMatchObject({ source: 'remote', dimensions: 1024, signature: 'remote:nvidia/nv-embedqa-e5-v5:1024' });
    expect(d.remote).toMatchObject({ apiModel: 'nvidia/nv-embedqa-e5-v5', url: 'https://integrate.api.nvidia.com/v1/embeddings' });
  });

  it('a custom endpoint is remote with model memory-custom/<id> and identity <url>|<id>, key optional', () => {
    const env = testEnv({ OMNIROUTE_ALLOW_PRIVATE_PROVIDER_URLS: 'true' });
    const settings = s({ customBaseUrl: 'http://10.0.0.5:8080/v1/', customModelId: 'bge-m3' });
    const r = resolveEmbedding(settings, env);
    expect(r).toMatchObject({
      source: 'remote',
      model: 'memory-custom/bge-m3',
      identity: 'http://10.0.0.5:8080/v1/embeddings|bge-m3',
      dimensions: null,
      signature: 'remote:http://10.0.0.5:8080/v1/embeddings|bge-m3:null',
    });
  });

  it('a blocked custom endpoint is skipped in auto (and the reason never shows the URL)', () => {
    const settings = s({ customBaseUrl: 'http://169.254.169.254/v1', customModelId: 'x', staticEnabled: true });
    const r = resolveEmbedding(settings, testEnv({ OMNIROUTE_ALLOW_PRIVATE_PROVIDER_URLS: 'true' }));
    expect(r.source).toBe('static');
    expect(r.reason).toContain('custom embedding endpoint is invalid or blocked (metadata_blocked)');
    expect(r.reason).not.toContain('169.254');
    const priv = resolveEmbedding(s({ customBaseUrl: 'http://192.168.1.2/v1', customModelId: 'x' }), noKeys);
    expect(priv.source).toBeNull();
    expect(priv.reason).toContain('private_blocked');
  });
});

describe('resolveEmbedding: explicit source', () => {
  it('remote without a model or key → null, with why', () => {
    expect(resolveEmbedding(s({ embeddingSource: 'remote' }), noKeys)).toMatchObject({
      source: null,
      signature: 'null:null:null',
      reason: 'remote selected but unusable: embeddingProviderModel not configured',
    });
    expect(resolveEmbedding(s({ embeddingSource: 'remote', embeddingProviderModel: 'nope/x' }), withOpenAi).reason).toMatch(/not a known provider/);
  });

  it('static/transformers need their enabled flag', () => {
    expect(resolveEmbedding(s({ embeddingSource: 'static' }), noKeys)).toMatchObject({ source: null, reason: 'static selected but staticEnabled is false' });
    expect(resolveEmbedding(s({ embeddingSource: 'static', staticEnabled: true }), noKeys).source).toBe('static');
    expect(resolveEmbedding(s({ embeddingSource: 'transformers' }), noKeys).source).toBeNull();
    expect(resolveEmbedding(s({ embeddingSource: 'transformers', transformersEnabled: true }), noKeys).source).toBe('transformers');
  });

  it('explicit static does not silently switch to remote even when a key exists', () => {
    const r = resolveEmbedding(s({ embeddingSource: 'static', embeddingProviderModel: 'openai/text-embedding-3-small' }), withOpenAi);
    expect(r.source).toBeNull();
  });

  it('local folders become the identity; a missing folder is unusable', () => {
    const dir = tempDir('resolve');
    const m2v = writeModel2VecFolder(path.join(dir, 'm2v'), topicModelSpec(8));
    const tf = writeTransformersModel(path.join(dir, 'tf'), topicModelSpec(8));
    const env = testEnv({ MEMORY_STATIC_MODEL: m2v, MEMORY_TRANSFORMERS_MODEL: tf });
    expect(resolveEmbedding(s({ embeddingSource: 'static', staticEnabled: true }), env)).toMatchObject({ identity: m2v, signature: `static:${m2v}:null` });
    expect(resolveEmbedding(s({ embeddingSource: 'transformers', transformersEnabled: true }), env)).toMatchObject({ identity: tf });
    const gone = testEnv({ MEMORY_STATIC_MODEL: path.join(dir, 'nope'), MEMORY_TRANSFORMERS_MODEL: path.join(dir, 'nope') });
    expect(resolveEmbedding(s({ embeddingSource: 'static', staticEnabled: true }), gone).reason).toMatch(/folder not found/);
    expect(resolveEmbedding(s({ embeddingSource: 'transformers', transformersEnabled: true }), gone).reason).toMatch(/folder not found/);
  });
});

describe('withMeasuredDimensions and the signature', () => {
  it('fills an unknown width and rebuilds the signature from the identity', () => {
    const r = resolveEmbedding(s({ embeddingSource: 'static', staticEnabled: true }), noKeys);
    const m = withMeasuredDimensions(r, 256);
    expect(m).toMatchObject({ dimensions: 256, signature: 'static:minishlab/potion-base-8M:256' });
    expect(m.reason).toMatch(/dim=256 measured$/);
    expect(r.dimensions).toBeNull(); // input untouched
  });

  it('a measured width overrides a registry hint that was wrong; equal widths return the input', () => {
    const r = resolveEmbedding(s({ embeddingProviderModel: 'openai/text-embedding-3-small' }), withOpenAi);
    expect(withMeasuredDimensions(r, 1536)).toBe(r);
    expect(withMeasuredDimensions(r, 512).signature).toBe('remote:openai/text-embedding-3-small:512');
  });

  it('ignores nonsense widths and null sources', () => {
    const r = resolveEmbedding(s({ embeddingSource: 'static', staticEnabled: true }), noKeys);
    for (const w of [0, -1, 1.5, NaN]) expect(withMeasuredDimensions(r, w)).toBe(r);
    const none = resolveEmbedding(base, noKeys);
    expect(withMeasuredDimensions(none, 8)).toBe(none);
  });

  it('is deterministic', () => {
    expect(embeddingSignature('remote', 'a/b', 3)).toBe('remote:a/b:3');
    expect(embeddingSignature(null, null, null)).toBe('null:null:null');
    const settings = s({ embeddingProviderModel: 'openai/text-embedding-3-large' });
    expect(resolveEmbedding(settings, withOpenAi).signature).toBe(resolveEmbedding(settings, withOpenAi).signature);
  });
});
