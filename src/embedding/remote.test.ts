import { startFakeEmbeddingsServer, type FakeEmbeddingsServer } from '../../test/helpers/fake-embeddings-server';
import { OutboundPolicy } from '../net/url-policy';
import { RemoteEmbedder, type RemoteEmbedderOptions } from './remote';
import { cosine, EmbeddingError } from './types';

const norm = (v: Float32Array) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const KEY = 'sk-test-0123456789abcdef';

describe('RemoteEmbedder against a fake OpenAI-compatible server', () => {
  let server: FakeEmbeddingsServer;
  const policies: OutboundPolicy[] = [];

  function embedder(over: Partial<RemoteEmbedderOptions> = {}): RemoteEmbedder {
    const policy = new OutboundPolicy({ allowPrivate: true });
    policies.push(policy);
    return new RemoteEmbedder({
      model: 'openai/text-embedding-3-small',
      identity: 'openai/text-embedding-3-small',
      url: `${server.baseUrl}/embeddings`,
      apiModel: 'text-embedding-3-small',
      apiKey: KEY,
      batchSize: 64,
      timeoutMs: 2000,
      policy,
      ...over,
    });
  }

  async function failure(p: Promise<unknown>): Promise<EmbeddingError> {
    const err = await p.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(EmbeddingError);
    return err as EmbeddingError;
  }

  beforeEach(async () => {
    server = await startFakeEmbeddingsServer({ dim: 12 });
  });
  afterEach(async () => {
    await Promise.all(policies.splice(0).map((p) => p.close()));
    await server.close();
  });

  it('posts {model, input[]} with a Bearer key and returns unit vectors in input order', async () => {
    const vs = await embedder().embed(['the cat sat', 'a cat sat down', 'quarterly tax report']);
    expect(server.requests).toHaveLength(1);
    const r = server.requests[0];
    expect(r).toMatchObject({ method: 'POST', path: '/v1/embeddings', authorization: `Bearer ${KEY}` });
    expect(r.body).toEqual({ model: 'text-embedding-3-small', input: ['the cat sat', 'a cat sat down', 'quarterly tax report'] });
    expect(vs.map((v) => v.length)).toEqual([12, 12, 12]);
    for (const v of vs) expect(norm(v)).toBeCloseTo(1, 5);
    expect(cosine(vs[0], vs[1])).toBeGreaterThan(cosine(vs[0], vs[2]));
  });

  it('batches: 150 texts with batch size 64 make 3 requests of 64, 64, 22', async () => {
    const texts = Array.from({ length: 150 }, (_, i) => `text number ${i}`);
    const vs = await embedder({ batchSize: 64 }).embed(texts);
    expect(vs).toHaveLength(150);
    expect(server.requests.map((r) => r.body.input?.length)).toEqual([64, 64, 22]);
    expect(server.requests[2].body.input?.[21]).toBe('text number 149');
  });

  it('clips each input to 20000 characters and sends no Authorization without a key', async () => {
    await embedder({ apiKey: null }).embed(['x'.repeat(25_000)]);
    expect(server.requests[0].body.input?.[0]).toHaveLength(20_000);
    expect(server.requests[0].authorization).toBeUndefined();
  });

  it('puts vectors back in input order when the server returns them out of order', async () => {
    server.behave({ kind: 'ok' });
    const inOrder = await embedder().embed(['alpha', 'beta gamma']);
    server.behave({ kind: 'shuffled' });
    const shuffled = await embedder().embed(['alpha', 'beta gamma']);
    expect(Array.from(shuffled[0])).toEqual(Array.from(inOrder[0]));
  });

  it('maps 401/403 to no_key and 429 to rate_limited, never echoing the key or the URL', async () => {
    for (const [status, reason] of [
      [401, 'no_key'],
      [403, 'no_key'],
      [429, 'rate_limited'],
      [500, 'request_failed'],
      [400, 'request_failed'],
    ] as const) {
      server.behave({ kind: 'status', status });
      const err = await failure(embedder().embed(['hi']));
      expect(err).toMatchObject({ reason, source: 'remote', model: 'openai/text-embedding-3-small' });
      expect(err.message).not.toMatch(/sk-|SECRET|127\.0\.0\.1|http/);
    }
  });

  it('maps a slow server to timeout within the configured bound', async () => {
    server.behave({ kind: 'delay', ms: 5000 });
    const t0 = Date.now();
    const err = await failure(embedder({ timeoutMs: 200 }).embed(['slow']));
    expect(err.reason).toBe('timeout');
    expect(Date.now() - t0).toBeLessThan(2000);
  });

  it('maps a caller abort to timeout', async () => {
    server.behave({ kind: 'delay', ms: 5000 });
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 50);
    expect((await failure(embedder().embed(['x'], ac.signal))).reason).toBe('timeout');
  });

  it('maps bad JSON and a wrong number of vectors to request_failed', async () => {
    server.behave({ kind: 'bad_json' });
    expect((await failure(embedder().embed(['x']))).reason).toBe('request_failed');
    server.behave({ kind: 'wrong_count' });
    const err = await failure(embedder().embed(['x', 'y']));
    expect(err.reason).toBe('request_failed');
    expect(err.message).toMatch(/1 vectors for 2 inputs/);
  });

  it('maps an outbound-policy refusal to request_failed', async () => {
    const strict = new OutboundPolicy({ allowPrivate: false });
    policies.push(strict);
    const err = await failure(embedder({ policy: strict }).embed(['x']));
    expect(err.reason).toBe('request_failed');
    expect(err.message).toMatch(/private_blocked/);
    expect(server.requests).toHaveLength(0);
  });

  it('maps a refused connection to request_failed without naming the host', async () => {
    const port = Number(new URL(server.baseUrl).port);
    await server.close();
    const err = await failure(embedder({ url: `http://127.0.0.1:${port}/v1/embeddings` }).embed(['x']));
    expect(err.reason).toBe('request_failed');
    expect(err.message).not.toContain('127.0.0.1');
    server = await startFakeEmbeddingsServer();
  });
});
