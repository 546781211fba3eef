import { maskApiKey, normalizeQdrantSettings, qdrantBaseUrl, qdrantSettingsUpdateSchema } from './qdrant-settings';

const noEnv = { QDRANT_HOST: undefined, QDRANT_PORT: undefined, QDRANT_API_KEY: undefined, QDRANT_COLLECTION: undefined };

describe('Qdrant settings (the original normalisation, digest §8.3)', () => {
  it('defaults, then env fallbacks for host/port/key/collection; only boolean true enables', () => {
    expect(normalizeQdrantSettings({}, noEnv)).toEqual({ enabled: false, host: '', port: 6333, apiKey: null, collection: 'engram_memory', embeddingModel: 'same-as-memory', quantization: 'none' });
    const env = { QDRANT_HOST: 'qdrant', QDRANT_PORT: '7000', QDRANT_API_KEY: 'envkey', QDRANT_COLLECTION: 'mem' };
    expect(normalizeQdrantSettings({ qdrantEnabled: 'true' }, env)).toMatchObject({ enabled: false, host: 'qdrant', port: 7000, apiKey: 'envkey', collection: 'mem' });
    expect(normalizeQdrantSettings({ qdrantEnabled: true, qdrantHost: ' h ', qdrantPort: '6334', qdrantApiKey: ' k ', qdrantQuantization: 'int8' }, env)).toMatchObject({
      enabled: true,
      host: 'h',
      port: 6334,
      apiKey: 'k',
      quantization: 'int8',
    });
    // An invalid stored port falls back to 6333 (not to env), an unknown quantization to none.
    expect(normalizeQdrantSettings({ qdrantPort: 'abc', qdrantQuantization: 'pq' }, env)).toMatchObject({ port: 6333, quantization: 'none' });
  });

  it('base URL: trailing slashes stripped, http:// added, the port added when the URL has none; metadata hosts and credentials refused', () => {
    expect(qdrantBaseUrl('qdrant', 6333)).toBe('http://qdrant:6333');
    expect(qdrantBaseUrl('https://q.example.com///', 6333)).toBe('https://q.example.com:6333');
    expect(qdrantBaseUrl('http://127.0.0.1:7000/', 6333)).toBe('http://127.0.0.1:7000');
    expect(qdrantBaseUrl('', 6333)).toBeNull();
    expect(() => qdrantBaseUrl('http://169.254.169.254', 6333)).toThrow();
    expect(() => qdrantBaseUrl('http://user:pw@qdrant', 6333)).toThrow();
  });

  it('masks the key as *** + last 4 (nothing of a short key), and the update schema is strict', () => {
    expect(maskApiKey(null)).toBeNull();
    expect(maskApiKey('abcdefghijkl')).toBe('***ijkl');
    expect(maskApiKey('short')).toBe('***');
    expect(qdrantSettingsUpdateSchema.safeParse({ enabled: true, extra: 1 }).success).toBe(false);
    expect(qdrantSettingsUpdateSchema.safeParse({ collection: 'bad name/..' }).success).toBe(false);
    expect(qdrantSettingsUpdateSchema.safeParse({ quantization: 'int8', port: 6333, apiKey: '' }).success).toBe(true);
  });
});
