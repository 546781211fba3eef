import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startFakeRerankServer, type FakeRerankServer } from '../../test/helpers/fake-rerank-server';
import { waitUntil } from '../../test/helpers/wait';
import { createLogger } from '../logger';
import { OutboundPolicy, type Resolver } from '../net/url-policy';
import { MAX_RERANK_DOCUMENTS, RERANK_PROVIDERS, Reranker, type RerankEnv, type RerankerOptions } from './rerank';

const COHERE_KEY = 'co-test-0123456789abcdef';
const JINA_KEY = 'jina-test-0123456789abcdef';
const VOYAGE_KEY = 'pa-test-0123456789abcdef';

const ENV: RerankEnv = {
  COHERE_API_KEY: COHERE_KEY,
  JINA_API_KEY: JINA_KEY,
  VOYAGE_API_KEY: VOYAGE_KEY,
  MEMORY_RERANK_TIMEOUT_MS: 2000,
};

interface Item {
  id: string;
  content: string;
}
const items = (...contents: string[]): Item[] => contents.map((content, i) => ({ id: `m${i}`, content }));
const ids = (xs: Item[]) => xs.map((x) => x.id);

const QUERY = 'what is my cat named';
const CANDIDATES = items('quarterly tax report', 'my cat is named Tom', 'the cat sleeps all day');

describe('Reranker against a fake rerank server on 127.0.0.1', () => {
  let server: FakeRerankServer;
  let logLines: string[];
  const owned: Array<{ close(): Promise<void> }> = [];

  function reranker(opts: RerankerOptions = {}, env: RerankEnv = ENV): Reranker {
    const log = createLogger('debug', 'test', { write: (line: string) => void logLines.push(line) });
    const r = new Reranker(env, {
      log,
      baseUrls: { cohere: server.baseUrl, jina: server.baseUrl, voyage: server.baseUrl, custom: server.baseUrl },
      ...opts,
    });
    owned.push(r);
    return r;
  }

  function expectNoLeak(reason: string | null): void {
    const text = `${reason ?? ''}\n${logLines.join('\n')}`;
    for (const secret of [COHERE_KEY, JINA_KEY, VOYAGE_KEY, 'sk-live-SECRET', '127.0.0.1', '169.254', 'example.com', 'Tom']) {
      expect(text).not.toContain(secret);
    }
  }

  beforeEach(async () => {
    logLines = [];
    server = await startFakeRerankServer();
  });
  afterEach(async () => {
    await Promise.all(owned.splice(0).map((o) => o.close()));
    await server.close();
  });

  it('reorders by relevance, returns aligned scores and leaves the input array alone', async () => {
    const input = [...CANDIDATES];
    const r = await reranker().rerank(QUERY, input, 'cohere/rerank-v3.5');
    // The whole result: the items themselves (not copies) in the new order, one score each.
    expect(r).toEqual({ items: [CANDIDATES[1], CANDIDATES[2], CANDIDATES[0]], applied: true, reason: null, scores: [0.8, 0.2, 0], latencyMs: expect.any(Number) });
    expect(r.items[0]).toBe(CANDIDATES[1]);
    expect(ids(input)).toEqual(['m0', 'm1', 'm2']);
    // The server answered this one (nothing was cut short).
    expect(server.requests).toMatchObject([{ closedEarly: false }]);
  });

  it('sends what Cohere expects: POST …/rerank {model, query, documents, top_n} with the Bearer key', async () => {
    await reranker().rerank(`  ${QUERY}  `, CANDIDATES, 'cohere/rerank-v3.5');
    expect(server.requests).toHaveLength(1);
    const req = server.requests[0];
    expect(req).toMatchObject({ method: 'POST', path: '/v1/rerank', authorization: `Bearer ${COHERE_KEY}` });
    expect(req.body).toEqual({ model: 'rerank-v3.5', query: QUERY, documents: CANDIDATES.map((c) => c.content), top_n: 3 });
  });

  it('sends what Jina expects (top_n, no documents echoed) with the Jina key', async () => {
    const r = await reranker().rerank(QUERY, CANDIDATES, 'jina/jina-reranker-v2-base-multilingual');
    expect(r.applied).toBe(true);
    expect(server.requests[0].authorization).toBe(`Bearer ${JINA_KEY}`);
    expect(server.requests[0].body).toEqual({
      model: 'jina-reranker-v2-base-multilingual',
      query: QUERY,
      documents: CANDIDATES.map((c) => c.content),
      top_n: 3,
      return_documents: false,
    });
  });

  it('sends what Voyage expects (top_k) and reads its `data` list', async () => {
    server.behave({ kind: 'ok', field: 'data' });
    const r = await reranker().rerank(QUERY, CANDIDATES, 'voyage/rerank-2.5');
    expect(server.requests[0].authorization).toBe(`Bearer ${VOYAGE_KEY}`);
    expect(server.requests[0].body).toEqual({ model: 'rerank-2.5', query: QUERY, documents: CANDIDATES.map((c) => c.content), top_k: 3 });
    expect(r).toMatchObject({ applied: true, reason: null, scores: [0.8, 0.2, 0] });
    expect(ids(r.items)).toEqual(['m1', 'm2', 'm0']);
  });

  it('custom: splits provider/model on the first slash, sends no Authorization without a key, a Bearer with one', async () => {
    const r = await reranker().rerank(QUERY, CANDIDATES, 'custom/BAAI/bge-reranker-v2-m3');
    expect(r.applied).toBe(true);
    expect(server.requests[0].body.model).toBe('BAAI/bge-reranker-v2-m3');
    expect(server.requests[0].authorization).toBeUndefined();
    await reranker({ customApiKey: 'local-key-0123456789' }).rerank(QUERY, CANDIDATES, 'custom/bge');
    expect(server.requests[1].authorization).toBe('Bearer local-key-0123456789');
  });

  it('accepts a full …/rerank endpoint as the base URL without doubling the path', async () => {
    await reranker({ baseUrls: { cohere: `${server.baseUrl}/rerank/` } }).rerank(QUERY, CANDIDATES, 'cohere/rerank-v3.5');
    expect(server.requests[0].path).toBe('/v1/rerank');
  });

  it('appends unmentioned indices in original order with null scores; ignores out-of-range, duplicate and unscored entries', async () => {
    server.behave({
      kind: 'results',
      results: [
        { index: 2, relevance_score: 0.9 },
        { index: 2, relevance_score: 0.1 },
        { index: 7, relevance_score: 5 },
        { index: -1, relevance_score: 4 },
        { index: 1.5, relevance_score: 3 },
        { index: '0', relevance_score: 2 },
        { index: 0, relevance_score: 'high' },
        null,
        { index: 3, relevance_score: 0.5 },
      ],
    });
    const r = await reranker().rerank('anything', items('a', 'b', 'c', 'd', 'e'), 'cohere/rerank-v3.5');
    expect(r).toMatchObject({ applied: true, reason: null });
    expect(ids(r.items)).toEqual(['m2', 'm3', 'm0', 'm1', 'm4']);
    expect(r.scores).toEqual([0.9, 0.5, null, null, null]);
  });

  it('orders by score even when a server lists results unsorted (stable for ties)', async () => {
    server.behave({
      kind: 'results',
      results: [
        { index: 0, relevance_score: 0.1 },
        { index: 1, relevance_score: 0.7 },
        { index: 2, relevance_score: 0.7 },
      ],
    });
    const r = await reranker().rerank('q', items('a', 'b', 'c'), 'custom/m');
    expect(ids(r.items)).toEqual(['m1', 'm2', 'm0']);
  });

  it('401 keeps the original order with reason http_401, and nothing of the body, key or URL leaks', async () => {
    server.behave({ kind: 'status', status: 401 });
    const r = await reranker().rerank(QUERY, CANDIDATES, 'cohere/rerank-v3.5');
    expect(r).toEqual({ items: CANDIDATES, applied: false, reason: 'http_401', scores: [null, null, null], latencyMs: expect.any(Number) });
    // The failure is logged (so the leak check below has something to read), by code only.
    expect(logLines.join('\n')).toContain('http_401');
    expectNoLeak(r.reason);
    server.behave({ kind: 'status', status: 503 });
    expect((await reranker().rerank(QUERY, CANDIDATES, 'cohere/rerank-v3.5')).reason).toBe('http_503');
  });

  it('no key configured → no_key, and no request is made', async () => {
    const r = await reranker({}, { ...ENV, COHERE_API_KEY: undefined }).rerank(QUERY, CANDIDATES, 'cohere/rerank-v3.5');
    expect(r).toMatchObject({ items: CANDIDATES, applied: false, reason: 'no_key' });
    expect(server.requests).toHaveLength(0);
  });

  it('a server slower than the timeout → original order, reason timeout, and the request is cut, not awaited', async () => {
    // Never answers: only the reranker's timeout can end this call.
    server.behave({ kind: 'delay', ms: 600_000 });
    const r = await reranker({}, { ...ENV, MEMORY_RERANK_TIMEOUT_MS: 200 }).rerank(QUERY, CANDIDATES, 'cohere/rerank-v3.5');
    expect(r).toMatchObject({ items: CANDIDATES, applied: false, reason: 'timeout', scores: [null, null, null] });
    expect(server.requests).toHaveLength(1);
    await waitUntil(() => server.requests[0].closedEarly, 5000, 'the request to be closed');
  });

  it("the caller's abort signal ends the call early with reason aborted; an already-aborted signal makes no request", async () => {
    // Never answers, and the reranker's own timeout (2 s) is not what ends it: the abort is.
    server.behave({ kind: 'delay', ms: 600_000 });
    const ctl = new AbortController();
    const pending = reranker().rerank(QUERY, CANDIDATES, 'cohere/rerank-v3.5', ctl.signal);
    await waitUntil(() => server.requests.length === 1, 5000, 'the request to arrive');
    ctl.abort();
    const r = await pending;
    expect(r).toMatchObject({ items: CANDIDATES, applied: false, reason: 'aborted' });
    await waitUntil(() => server.requests[0].closedEarly, 5000, 'the request to be closed');
    const before = server.requests.length;
    const again = await reranker().rerank(QUERY, CANDIDATES, 'cohere/rerank-v3.5', AbortSignal.abort());
    expect(again.reason).toBe('aborted');
    expect(server.requests).toHaveLength(before);
  });

  it('malformed JSON or an empty ranking → invalid_response with the original order', async () => {
    for (const b of [{ kind: 'bad_json' as const }, { kind: 'results' as const, results: [] }]) {
      server.behave(b);
      const r = await reranker().rerank(QUERY, CANDIDATES, 'cohere/rerank-v3.5');
      expect(r).toMatchObject({ items: CANDIDATES, applied: false, reason: 'invalid_response', scores: [null, null, null] });
    }
  });

  it('empty or whitespace query, no items and a single item skip without a request', async () => {
    const rr = reranker();
    expect((await rr.rerank('', CANDIDATES, 'cohere/rerank-v3.5')).reason).toBe('empty_query');
    expect((await rr.rerank(' \n\t ', CANDIDATES, 'cohere/rerank-v3.5')).reason).toBe('empty_query');
    expect(await rr.rerank(QUERY, [], 'cohere/rerank-v3.5')).toMatchObject({ items: [], applied: false, reason: 'no_items', scores: [] });
    const one = await rr.rerank(QUERY, CANDIDATES.slice(0, 1), 'cohere/rerank-v3.5');
    expect(one).toMatchObject({ items: CANDIDATES.slice(0, 1), applied: false, reason: 'single_item', scores: [null] });
    expect(server.requests).toHaveLength(0);
  });

  it('unusable provider/model settings are reported without a request', async () => {
    const rr = reranker({ baseUrls: { cohere: server.baseUrl } });
    expect((await rr.rerank(QUERY, CANDIDATES, 'openai/gpt-4o')).reason).toBe('unknown_provider');
    expect((await rr.rerank(QUERY, CANDIDATES, '')).reason).toBe('unknown_provider');
    expect((await rr.rerank(QUERY, CANDIDATES, 'cohere/')).reason).toBe('invalid_model');
    expect((await rr.rerank(QUERY, CANDIDATES, 'cohere')).reason).toBe('invalid_model');
    expect((await rr.rerank(QUERY, CANDIDATES, 'custom/bge-reranker')).reason).toBe('not_configured');
    expect(server.requests).toHaveLength(0);
  });

  it('a base URL at the cloud metadata address is refused before connecting → blocked_url, URL never echoed', async () => {
    const r = await reranker({ baseUrls: { cohere: 'http://169.254.169.254/v1' } }).rerank(QUERY, CANDIDATES, 'cohere/rerank-v3.5');
    expect(r).toMatchObject({ items: CANDIDATES, applied: false, reason: 'blocked_url' });
    expectNoLeak(r.reason);
  });

  it('a hostname that resolves to the metadata address is refused at connect time → blocked_url', async () => {
    const looked: string[] = [];
    const resolver: Resolver = async (host) => {
      looked.push(host);
      return [{ address: '169.254.169.254', family: 4 }];
    };
    const r = await reranker({ resolver, baseUrls: { cohere: 'http://rerank.example.com/v1' } }).rerank(QUERY, CANDIDATES, 'cohere/rerank-v3.5');
    expect(r.reason).toBe('blocked_url');
    expect(looked).toEqual(['rerank.example.com']);
    expectNoLeak(r.reason);
  });

  it('a redirect to the metadata address is refused → blocked_url, and the server saw one request only', async () => {
    server.behave({ kind: 'redirect', location: 'http://169.254.169.254/latest/meta-data' });
    const r = await reranker().rerank(QUERY, CANDIDATES, 'cohere/rerank-v3.5');
    expect(r.reason).toBe('blocked_url');
    expect(server.requests).toHaveLength(1);
  });

  it('an injected public-only policy refuses the loopback server without contacting it', async () => {
    const policy = new OutboundPolicy({ allowPrivate: false });
    owned.push(policy);
    const r = await reranker({ policy }).rerank(QUERY, CANDIDATES, 'cohere/rerank-v3.5');
    expect(r.reason).toBe('blocked_url');
    expect(server.requests).toHaveLength(0);
  });

  it('hosted defaults go to the provider host under a public-only policy (a private answer is refused)', async () => {
    const looked: string[] = [];
    const resolver: Resolver = async (host) => {
      looked.push(host);
      return [{ address: '10.0.0.7', family: 4 }];
    };
    const rr = reranker({ resolver, baseUrls: {} });
    expect((await rr.rerank(QUERY, CANDIDATES, 'cohere/rerank-v3.5')).reason).toBe('blocked_url');
    expect((await rr.rerank(QUERY, CANDIDATES, 'voyage/rerank-2.5')).reason).toBe('blocked_url');
    expect(looked).toEqual(['api.cohere.com', 'api.voyageai.com']);
    expect(RERANK_PROVIDERS.filter((p) => p.defaultUrl).map((p) => p.defaultUrl)).toEqual([
      'https://api.cohere.com/v2/rerank',
      'https://api.jina.ai/v1/rerank',
      'https://api.voyageai.com/v1/rerank',
    ]);
  });

  it('a refused connection → network_error with the original order', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const r = await reranker({ baseUrls: { cohere: `http://127.0.0.1:${port}/v1` } }).rerank(QUERY, CANDIDATES, 'cohere/rerank-v3.5');
    expect(r).toMatchObject({ items: CANDIDATES, applied: false, reason: 'network_error' });
    expectNoLeak(r.reason);
  });

  it(`sends at most ${MAX_RERANK_DOCUMENTS} documents and keeps the rest after the ranked ones`, async () => {
    const many = Array.from({ length: MAX_RERANK_DOCUMENTS + 2 }, (_, i) => ({ id: `m${i}`, content: i === 5 ? 'cat named Tom' : `memory ${i}` }));
    const r = await reranker().rerank(QUERY, many, 'cohere/rerank-v3.5');
    expect(server.requests[0].body.documents).toHaveLength(MAX_RERANK_DOCUMENTS);
    expect(server.requests[0].body.top_n).toBe(MAX_RERANK_DOCUMENTS);
    expect(r.applied).toBe(true);
    expect(r.items).toHaveLength(many.length);
    expect(r.items[0].id).toBe('m5');
    expect(ids(r.items.slice(-2))).toEqual([`m${MAX_RERANK_DOCUMENTS}`, `m${MAX_RERANK_DOCUMENTS + 1}`]);
    expect(r.scores.slice(-2)).toEqual([null, null]);
  });

  it('rerankProviders lists every provider with key, endpoint and availability', async () => {
    const listing = reranker({ baseUrls: {} }, { ...ENV, JINA_API_KEY: undefined }).rerankProviders();
    const by = Object.fromEntries(listing.map((p) => [p.provider, p]));
    expect(Object.keys(by)).toEqual(['cohere', 'jina', 'voyage', 'custom']);
    expect(by.cohere).toMatchObject({ hasKey: true, keyRequired: true, configured: true, available: true });
    expect(by.cohere.models).toContain('cohere/rerank-v3.5');
    expect(by.jina).toMatchObject({ hasKey: false, configured: true, available: false });
    expect(by.custom).toMatchObject({ hasKey: false, keyRequired: false, configured: false, available: false });
    const withCustom = reranker({ baseUrls: { custom: 'http://10.0.0.5:7997' } }).rerankProviders();
    expect(withCustom.find((p) => p.provider === 'custom')).toMatchObject({ configured: true, available: true });
    expect(JSON.stringify(listing)).not.toContain(COHERE_KEY);
  });
});
