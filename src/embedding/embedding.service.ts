import type { Env } from '../config/env';
import type { Logger } from '../logger';
import { operatorPolicy, outboundPolicyFromEnv, type OutboundPolicy, type Resolver } from '../net/url-policy';
import { EmbeddingCache, embeddingCacheKeyOfHash, textHash, type EmbeddingCacheStats } from './cache';
import { RemoteEmbedder } from './remote';
import { resolveEmbeddingDetail, withMeasuredDimensions, type EmbeddingResolution, type EmbeddingSettings, type ResolveEnv, type ResolutionDetail } from './resolve';
import { StaticEmbedder } from './static';
import { TransformersEmbedder } from './transformers';
import { EmbeddingError, isZeroVector, type Embedder } from './types';

export { listEmbeddingProviders, type ProviderListing } from './providers';
export { EmbeddingError } from './types';
export type { EmbeddingResolution, EmbeddingSettings } from './resolve';

export type EmbeddingEnv = ResolveEnv &
  Pick<
    Env,
    | 'MEMORY_EMBEDDING_CACHE_MAX'
    | 'MEMORY_EMBEDDING_CACHE_TTL_MS'
    | 'MEMORY_EMBEDDING_TIMEOUT_MS'
    | 'MEMORY_EMBEDDING_BATCH_SIZE'
    | 'MEMORY_EMBEDDING_CUSTOM_API_KEY'
  >;

export interface EmbeddingServiceOptions {
  log?: Logger;
  /** DNS resolver for every outbound policy (tests inject a fixed one). */
  resolver?: Resolver;
}

export interface EmbedManyResult {
  /** One entry per input; null when the text carried nothing the model knows (empty or all-unknown). */
  vectors: Array<Float32Array | null>;
  /** The resolution used, with the measured width. */
  resolution: EmbeddingResolution;
  /** Inputs answered from the cache. */
  cached: number;
  /** Inputs sent to the source (after in-call de-duplication). */
  embedded: number;
  /** Inputs whose vector is null. */
  zeroVectors: number;
  latencyMs: number;
}

export interface EmbedOneResult {
  vector: Float32Array | null;
  resolution: EmbeddingResolution;
  cached: boolean;
  latencyMs: number;
}

// Provider key shapes, bearer values, and any long unbroken token-like run (paths keep their slashes and survive).
const SECRETISH = /\b(?:sk|pk|rk|hf|nvapi|key|token)[-_][A-Za-z0-9_-]{8,}|\bBearer\s+\S+|[A-Za-z0-9_-]{32,}/g;

/** Strips URLs and anything key-shaped from an error message before it leaves the embedding layer. */
export function sanitizeEmbeddingMessage(message: string): string {
  return message.replace(/\b[a-z][a-z0-9+.-]*:\/\/\S+/gi, '[url]').replace(SECRETISH, '[redacted]').slice(0, 500);
}

/** The embedding facade: resolves the source from settings, embeds through the cache, reports measured widths. */
export class EmbeddingService {
  private readonly cache: EmbeddingCache;
  private readonly userPolicy: OutboundPolicy;
  private readonly envPolicy: OutboundPolicy;
  private readonly embedders = new Map<string, Embedder>();
  /** Measured width by `<source>|<identity>`: the first vector tells, nothing is hard-coded. */
  private readonly measured = new Map<string, number>();

  constructor(
    private readonly env: EmbeddingEnv,
    private readonly opts: EmbeddingServiceOptions = {},
  ) {
    this.cache = EmbeddingCache.fromEnv(env);
    this.userPolicy = outboundPolicyFromEnv(env, opts.resolver);
    this.envPolicy = operatorPolicy(opts.resolver);
  }

  /** The source these settings select, with the width measured in this process when known. */
  resolve(settings: EmbeddingSettings): EmbeddingResolution {
    return this.detail(settings).resolution;
  }

  private detail(settings: EmbeddingSettings): ResolutionDetail {
    const d = resolveEmbeddingDetail(settings, this.env);
    const r = d.resolution;
    const width = r.source ? this.measured.get(`${r.source}|${r.identity}`) : undefined;
    return width ? { ...d, resolution: withMeasuredDimensions(r, width) } : d;
  }

  private embedderFor(d: ResolutionDetail): Embedder {
    const r = d.resolution;
    const key = `${r.source}|${r.identity}`;
    let e = this.embedders.get(key);
    if (e) return e;
    if (r.source === 'remote' && d.remote) {
      const t = d.remote;
      const apiKey = t.keyVar ? ((this.env as unknown as Record<string, unknown>)[t.keyVar] as string | undefined) ?? null : null;
      e = new RemoteEmbedder({
        model: t.model,
        identity: t.identity,
        url: t.url,
        apiModel: t.apiModel,
        apiKey,
        batchSize: this.env.MEMORY_EMBEDDING_BATCH_SIZE,
        timeoutMs: this.env.MEMORY_EMBEDDING_TIMEOUT_MS,
        // Only the user-set custom URL is held to the private-address rule; operator env may point at a LAN or loopback server.
        policy: t.userSet ? this.userPolicy : this.envPolicy,
        extraBody: t.extraBody,
      });
    } else if (r.source === 'static') e = new StaticEmbedder(this.env, this.envPolicy);
    else if (r.source === 'transformers') e = new TransformersEmbedder(this.env);
    else throw new EmbeddingError(d.failure ?? 'unknown', null, null, r.reason);
    this.embedders.set(key, e);
    return e;
  }

  /**
   * Embeds each text (cache first); throws EmbeddingError when no source is usable or the source fails.
   * `useCache: false` (bulk jobs: reindex) neither reads nor fills the cache: each text is embedded once
   * anyway, and 100k rows would only evict the queries the cache is for. `cacheScope` (an API key)
   * partitions the cache: a hit answers far faster than a remote embedding, so one shared cache let
   * a key time its query and learn whether another key had just asked the same text.
   */
  async embedMany(texts: string[], settings: EmbeddingSettings, signal?: AbortSignal, opts: { useCache?: boolean; cacheScope?: string } = {}): Promise<EmbedManyResult> {
    const useCache = opts.useCache ?? true;
    const started = performance.now();
    const d = this.detail(settings);
    let res = d.resolution;
    if (!res.source) throw new EmbeddingError(d.failure ?? 'unknown', settings.embeddingSource === 'auto' ? null : settings.embeddingSource, null, res.reason);
    const embedder = this.embedderFor(d);
    const idKey = `${res.source}|${res.identity}`;
    const cacheModel = res.identity ?? res.model ?? 'unknown';
    const scope = opts.cacheScope ?? '';
    // The text's hash, computed once per text for the read and the write of its entry (issue 14: twice per chat before).
    const hashes = new Map<string, string>();
    const keyOf = (text: string, dim: number | null) => {
      let hash = hashes.get(text);
      if (hash === undefined) hashes.set(text, (hash = textHash(text)));
      return `${embeddingCacheKeyOfHash(res.source as string, cacheModel, dim, hash)}:${scope}`;
    };

    const vectors: Array<Float32Array | null> = new Array(texts.length).fill(null);
    const pending = new Map<string, number[]>();
    let cached = 0;
    let width = this.measured.get(idKey) ?? 0;
    texts.forEach((text, i) => {
      // An empty text has no meaning to embed; providers reject it anyway.
      if (text.trim() === '') return;
      const hit = useCache ? this.cache.get(keyOf(text, this.measured.get(idKey) ?? res.dimensions)) : undefined;
      if (hit) {
        cached++;
        width ||= hit.length;
        vectors[i] = hit;
        return;
      }
      const at = pending.get(text);
      if (at) at.push(i);
      else pending.set(text, [i]);
    });

    const missing = [...pending.keys()];
    if (missing.length) {
      let fresh: Float32Array[];
      try {
        fresh = await embedder.embed(missing, signal);
      } catch (err) {
        const e =
          err instanceof EmbeddingError
            ? new EmbeddingError(err.reason, err.source, err.model, sanitizeEmbeddingMessage(err.message))
            : new EmbeddingError('unknown', res.source, res.model, sanitizeEmbeddingMessage((err as Error)?.message ?? 'embedding failed'));
        this.opts.log?.warn({ source: e.source, model: e.model, reason: e.reason, count: missing.length }, 'embedding failed');
        throw e;
      }
      if (fresh.length !== missing.length) throw new EmbeddingError('request_failed', res.source, res.model, 'source returned a wrong number of vectors');
      width = fresh[0].length;
      if (fresh.some((v) => v.length !== width)) throw new EmbeddingError('request_failed', res.source, res.model, 'source returned vectors of different widths');
      this.measured.set(idKey, width);
      missing.forEach((text, n) => {
        if (useCache) this.cache.set(keyOf(text, width), fresh[n]);
        for (const i of pending.get(text) ?? []) vectors[i] = fresh[n];
      });
    }

    // Copies: the cache keeps its own vectors whatever callers do with theirs.
    const out = vectors.map((v) => (v && !isZeroVector(v) ? v.slice() : null));
    const zeroVectors = out.filter((v) => v === null).length;
    if (width) res = withMeasuredDimensions(res, width);
    this.opts.log?.debug({ source: res.source, model: res.model, count: texts.length, cached, embedded: missing.length, zeroVectors }, 'embedded');
    return { vectors: out, resolution: res, cached, embedded: missing.length, zeroVectors, latencyMs: performance.now() - started };
  }

  /**
   * Loads an in-process model (static, transformers) before the first job needs it and measures its
   * width; null for a remote source or none (a boot never calls out). Throws what embedMany throws.
   */
  async warm(settings: EmbeddingSettings): Promise<{ source: string; ms: number } | null> {
    const source = this.detail(settings).resolution.source;
    if (source !== 'static' && source !== 'transformers') return null;
    const started = performance.now();
    await this.embedMany(['engram warm-up'], settings, undefined, { useCache: false });
    return { source, ms: Math.round(performance.now() - started) };
  }

  /** Embeds one text; `vector` is null when it carries nothing the model knows. */
  async embedOne(text: string, settings: EmbeddingSettings, signal?: AbortSignal, cacheScope?: string): Promise<EmbedOneResult> {
    const r = await this.embedMany([text], settings, signal, { cacheScope });
    return { vector: r.vectors[0], resolution: r.resolution, cached: r.cached === 1, latencyMs: r.latencyMs };
  }

  cacheStats(): EmbeddingCacheStats {
    return this.cache.stats();
  }

  /** Empties the embedding cache (after a model change or an operator request). */
  clearCache(): void {
    this.cache.clear();
  }

  /** Closes pooled outbound connections. */
  async close(): Promise<void> {
    await Promise.all([this.userPolicy.close(), this.envPolicy.close()]);
  }
}
