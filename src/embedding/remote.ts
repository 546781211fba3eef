import { guardedFetch, OutboundUrlError, type OutboundPolicy } from '../net/url-policy';
import { EmbeddingError, clipText, l2Normalize, MAX_INPUT_CHARS, type Embedder } from './types';

export interface RemoteEmbedderOptions {
  /** Model as settings name it (`provider/model` or `memory-custom/<id>`). */
  model: string;
  identity: string;
  /** Full `…/embeddings` URL. */
  url: string;
  /** Model name sent in the request body. */
  apiModel: string;
  apiKey: string | null;
  batchSize: number;
  timeoutMs: number;
  /** Policy the URL and every redirect hop must pass. */
  policy: OutboundPolicy;
  extraBody?: Record<string, unknown>;
}

interface EmbeddingsResponse {
  data?: Array<{ embedding?: unknown; index?: unknown }>;
}

function isAbort(err: unknown): boolean {
  const e = err as { name?: string; cause?: { name?: string } } | null;
  return !!e && (e.name === 'AbortError' || e.name === 'TimeoutError' || e.cause?.name === 'AbortError' || e.cause?.name === 'TimeoutError');
}

/** Any OpenAI-compatible `POST /embeddings`, batched, through the outbound URL policy. */
export class RemoteEmbedder implements Embedder {
  readonly source = 'remote' as const;
  readonly model: string;
  readonly identity: string;

  constructor(private readonly opts: RemoteEmbedderOptions) {
    this.model = opts.model;
    this.identity = opts.identity;
  }

  private fail(reason: EmbeddingError['reason'], message: string): EmbeddingError {
    return new EmbeddingError(reason, 'remote', this.model, message);
  }

  async embed(texts: string[], signal?: AbortSignal): Promise<Float32Array[]> {
    const out: Float32Array[] = [];
    const size = Math.max(1, this.opts.batchSize);
    // One batch at a time: providers rate-limit per request, and a failure stops the rest.
    for (let i = 0; i < texts.length; i += size) out.push(...(await this.request(texts.slice(i, i + size), signal)));
    return out;
  }

  private async request(batch: string[], signal?: AbortSignal): Promise<Float32Array[]> {
    const timeout = AbortSignal.timeout(this.opts.timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
    if (this.opts.apiKey) headers.authorization = `Bearer ${this.opts.apiKey}`;
    const body = JSON.stringify({ ...this.opts.extraBody, model: this.opts.apiModel, input: batch.map((t) => clipText(t, MAX_INPUT_CHARS)) });
    let json: EmbeddingsResponse;
    try {
      const res = await guardedFetch(this.opts.url, { method: 'POST', headers, body, signal: combined }, this.opts.policy);
      if (!res.ok) {
        await res.body?.cancel().catch(() => undefined);
        if (res.status === 401 || res.status === 403) throw this.fail('no_key', `embeddings provider refused the credentials (HTTP ${res.status})`);
        if (res.status === 429) throw this.fail('rate_limited', 'embeddings provider rate-limited the request (HTTP 429)');
        throw this.fail('request_failed', `embeddings request failed (HTTP ${res.status})`);
      }
      try {
        json = (await res.json()) as EmbeddingsResponse;
      } catch (err) {
        if (isAbort(err) || combined.aborted) throw err;
        throw this.fail('request_failed', 'embeddings response was not valid JSON');
      }
    } catch (err) {
      if (err instanceof EmbeddingError) throw err;
      if (err instanceof OutboundUrlError) throw this.fail('request_failed', `embeddings endpoint refused by the outbound URL policy (${err.code})`);
      if (isAbort(err) || combined.aborted) throw this.fail('timeout', `embeddings request did not finish within ${this.opts.timeoutMs} ms`);
      // Network error text can name the host; say only what kind of failure it was.
      const code = (err as { cause?: { code?: unknown } }).cause?.code;
      throw this.fail('request_failed', `embeddings request failed (${typeof code === 'string' ? code : 'network error'})`);
    }
    return this.parse(json, batch.length);
  }

  private parse(json: EmbeddingsResponse, count: number): Float32Array[] {
    const data = json?.data;
    if (!Array.isArray(data)) throw this.fail('request_failed', 'embeddings response has no data array');
    if (data.length !== count) throw this.fail('request_failed', `embeddings response has ${data.length} vectors for ${count} inputs`);
    // Providers may return items out of order; `index` says where each belongs.
    const ordered = data.every((d) => typeof d.index === 'number') ? [...data].sort((a, b) => (a.index as number) - (b.index as number)) : data;
    let width = -1;
    return ordered.map((d) => {
      const e = d.embedding;
      if (!Array.isArray(e) || e.length === 0 || !e.every((x) => typeof x === 'number' && Number.isFinite(x))) {
        throw this.fail('request_failed', 'embeddings response holds a malformed vector');
      }
      if (width === -1) width = e.length;
      else if (e.length !== width) throw this.fail('request_failed', 'embeddings response mixes vector widths');
      return l2Normalize(Float32Array.from(e as number[]));
    });
  }
}
