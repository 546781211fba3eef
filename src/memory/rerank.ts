import { performance } from 'node:perf_hooks';
import type { Response as UndiciResponse } from 'undici';
import type { Env } from '../config/env';
import { clipText, MAX_INPUT_CHARS } from '../embedding/types';
import type { Logger } from '../logger';
import { endpointUrl, guardedFetch, OutboundPolicy, OutboundUrlError, operatorPolicy, type Resolver } from '../net/url-policy';
import { RERANK_PROVIDERS, type RerankKeyEnv, type RerankProvider, type RerankProviderId, type RerankProviderListing } from './rerank-providers';

export { RERANK_PROVIDERS, type RerankProvider, type RerankProviderId, type RerankProviderListing };

/** The env variables the reranker reads. */
export type RerankEnv = RerankKeyEnv & Pick<Env, 'MEMORY_RERANK_TIMEOUT_MS'>;

/** Why rerank did not reorder; every value is a fixed code, never provider text, a URL or a key. */
export type RerankReason =
  | 'no_items'
  | 'empty_query'
  | 'single_item'
  | 'unknown_provider'
  | 'invalid_model'
  | 'not_configured'
  | 'no_key'
  | 'blocked_url'
  | 'timeout'
  | 'aborted'
  | 'network_error'
  | `http_${number}`
  | 'invalid_response';

export interface RerankResult<T> {
  /** Reranked order (ranked items first, unmentioned ones after in original order), or the original order. */
  items: T[];
  applied: boolean;
  /** Null when applied. */
  reason: RerankReason | null;
  /** Provider relevance per returned item; null for items the provider did not score. */
  scores: Array<number | null>;
  latencyMs: number;
}

export interface RerankerOptions {
  log?: Logger;
  /** One policy for every call (tests); by default hosted URLs get a public-only policy and operator URLs the operator policy. */
  policy?: OutboundPolicy;
  /** DNS resolver for the policies built here (ignored when `policy` is given). */
  resolver?: Resolver;
  /**
   * Operator-written endpoints per provider: a base (`…/rerank` is appended) or the full `…/rerank` URL.
   * Private addresses are allowed (self-hosted), metadata is not; never feed a user-settable URL here
   * without also passing `policy: outboundPolicyFromEnv(env)`.
   */
  baseUrls?: Partial<Record<RerankProviderId, string>>;
  /** Bearer key for the `custom` endpoint, if it wants one. */
  customApiKey?: string;
  /** Overrides MEMORY_RERANK_TIMEOUT_MS. */
  timeoutMs?: number;
}

/** Providers cap a request at 1000 documents (Cohere, Voyage); the rest keep their place after the ranked ones. */
export const MAX_RERANK_DOCUMENTS = 1000;
/** Providers cap query tokens (2k–8k); a long chat turn's first 8000 characters carry its intent. */
export const MAX_RERANK_QUERY_CHARS = 8000;
/** A provider answer for 1000 documents is well under 200 KiB; more is a broken or hostile server. */
const MAX_RESPONSE_BYTES = 2 * 1024 * 1024;

type Target =
  | { ok: false; reason: RerankReason; provider: string | null; model: string | null }
  | { ok: true; provider: RerankProvider; model: string; base: string; operatorUrl: boolean; key: string | null };

class ResponseTooLarge extends Error {}

function nonEmpty(v: unknown): string | null {
  return typeof v === 'string' && v.trim() !== '' ? v.trim() : null;
}

/** The body as text, refusing more than `max` bytes without buffering them. */
async function readBounded(res: UndiciResponse, max: number): Promise<string> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel().catch(() => undefined);
      throw new ResponseTooLarge();
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Valid `{index, relevance_score}` entries, best first; out-of-range, duplicate or unscored entries are ignored. */
function parseRanking(json: unknown, count: number): Array<{ index: number; score: number }> | null {
  if (!json || typeof json !== 'object') return null;
  const obj = json as { results?: unknown; data?: unknown };
  const list = Array.isArray(obj.results) ? obj.results : Array.isArray(obj.data) ? obj.data : null;
  if (!list) return null;
  const seen = new Set<number>();
  const out: Array<{ index: number; score: number }> = [];
  for (const entry of list) {
    if (!entry || typeof entry !== 'object') continue;
    const { index, relevance_score: score } = entry as { index?: unknown; relevance_score?: unknown };
    if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= count || seen.has(index)) continue;
    if (typeof score !== 'number' || !Number.isFinite(score)) continue;
    seen.add(index);
    out.push({ index, score });
  }
  if (out.length === 0) return null;
  // Providers already sort, but a self-hosted server may not; the sort is stable, so ties keep the provider's order.
  return out.sort((a, b) => b.score - a.score);
}

/** Reorders retrieval candidates with a hosted or self-hosted reranker; every failure keeps the original order. */
export class Reranker {
  private readonly log?: Logger;
  private readonly injected: OutboundPolicy | null;
  private readonly resolver?: Resolver;
  private readonly baseUrls: Partial<Record<RerankProviderId, string>>;
  private readonly customApiKey: string | null;
  private readonly timeoutMs: number;
  private publicPolicy: OutboundPolicy | null = null;
  private privatePolicy: OutboundPolicy | null = null;

  constructor(
    private readonly env: RerankEnv,
    opts: RerankerOptions = {},
  ) {
    this.log = opts.log;
    this.injected = opts.policy ?? null;
    this.resolver = opts.resolver;
    this.baseUrls = { ...opts.baseUrls };
    this.customApiKey = nonEmpty(opts.customApiKey);
    this.timeoutMs = opts.timeoutMs ?? env.MEMORY_RERANK_TIMEOUT_MS;
  }

  /** Every rerank provider with whether it has a key and an endpoint (engine status, pickers). */
  rerankProviders(): RerankProviderListing[] {
    return RERANK_PROVIDERS.map((p) => {
      const hasKey = this.keyFor(p) !== null;
      const configured = this.baseFor(p) !== null;
      const keyRequired = p.keyVar !== null;
      return {
        provider: p.id,
        name: p.name,
        hasKey,
        keyRequired,
        configured,
        available: configured && (hasKey || !keyRequired),
        models: p.models.map((m) => `${p.id}/${m}`),
      };
    });
  }

  /**
   * Reranks `items` by relevance to `query` with `provider/model`; never throws.
   * Skips without a call for no items, an empty query or a single item (one item has only one order).
   */
  async rerank<T extends { content: string }>(query: string, items: T[], providerModel: string, signal?: AbortSignal): Promise<RerankResult<T>> {
    const started = performance.now();
    const original = Array.isArray(items) ? [...items] : [];
    const elapsed = () => Math.round(performance.now() - started);
    const keep = (reason: RerankReason): RerankResult<T> => ({ items: original, applied: false, reason, scores: original.map(() => null), latencyMs: elapsed() });
    let target: Target | null = null;
    try {
      if (original.length === 0) return keep('no_items');
      if (typeof query !== 'string' || query.trim() === '') return keep('empty_query');
      if (original.length === 1) return keep('single_item');
      target = this.target(providerModel);
      if (!target.ok) {
        this.log?.debug({ provider: target.provider, model: target.model, reason: target.reason }, 'rerank skipped: not usable');
        return keep(target.reason);
      }
      if (signal?.aborted) return keep('aborted');
      const ranking = await this.call(target, query.trim(), original, signal);
      if (!Array.isArray(ranking)) {
        this.log?.warn({ provider: target.provider.id, model: target.model, reason: ranking, latencyMs: elapsed() }, 'rerank failed; original order kept');
        return keep(ranking);
      }
      const used = new Set(ranking.map((r) => r.index));
      const out: T[] = ranking.map((r) => original[r.index]);
      const scores: Array<number | null> = ranking.map((r) => r.score);
      original.forEach((item, i) => {
        if (used.has(i)) return;
        out.push(item);
        scores.push(null);
      });
      return { items: out, applied: true, reason: null, scores, latencyMs: elapsed() };
    } catch {
      // Only a programming error reaches here (call() maps every I/O failure); retrieval must still get its items.
      const provider = target?.ok ? target.provider.id : null;
      this.log?.warn({ provider, reason: 'invalid_response' }, 'rerank failed unexpectedly; original order kept');
      return keep('invalid_response');
    }
  }

  /** Closes the connection pools this reranker built (an injected policy belongs to its owner). */
  async close(): Promise<void> {
    const owned = [this.publicPolicy, this.privatePolicy];
    this.publicPolicy = null;
    this.privatePolicy = null;
    await Promise.all(owned.map((p) => p?.close()));
  }

  private keyFor(p: RerankProvider): string | null {
    if (!p.keyVar) return this.customApiKey;
    return nonEmpty(this.env[p.keyVar]);
  }

  private baseFor(p: RerankProvider): string | null {
    return nonEmpty(this.baseUrls[p.id]) ?? p.defaultUrl;
  }

  private target(providerModel: string): Target {
    const value = typeof providerModel === 'string' ? providerModel : '';
    const slash = value.indexOf('/');
    const id = (slash >= 0 ? value.slice(0, slash) : value).trim().toLowerCase();
    // Split on the first slash only: model ids such as `BAAI/bge-reranker-v2-m3` carry their own.
    const model = slash >= 0 ? value.slice(slash + 1).trim() : '';
    const provider = RERANK_PROVIDERS.find((p) => p.id === id);
    if (!provider) return { ok: false, reason: 'unknown_provider', provider: null, model: null };
    if (!model) return { ok: false, reason: 'invalid_model', provider: provider.id, model: null };
    const base = this.baseFor(provider);
    if (!base) return { ok: false, reason: 'not_configured', provider: provider.id, model };
    const key = this.keyFor(provider);
    if (provider.keyVar && !key) return { ok: false, reason: 'no_key', provider: provider.id, model };
    return { ok: true, provider, model, base, operatorUrl: nonEmpty(this.baseUrls[provider.id]) !== null, key };
  }

  private policyFor(operatorUrl: boolean): OutboundPolicy {
    if (this.injected) return this.injected;
    // Hosted endpoints are public by definition; an operator's endpoint may well be on the LAN.
    if (operatorUrl) return (this.privatePolicy ??= operatorPolicy(this.resolver));
    return (this.publicPolicy ??= new OutboundPolicy({ allowPrivate: false, resolver: this.resolver }));
  }

  /** One request; the ranking, or the reason it could not be had. */
  private async call<T extends { content: string }>(
    target: Extract<Target, { ok: true }>,
    query: string,
    items: T[],
    signal?: AbortSignal,
  ): Promise<Array<{ index: number; score: number }> | RerankReason> {
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const documents = items.slice(0, MAX_RERANK_DOCUMENTS).map((it) => clipText(String(it?.content ?? ''), MAX_INPUT_CHARS));
    const body = JSON.stringify({
      ...target.provider.extraBody,
      model: target.model,
      query: clipText(query, MAX_RERANK_QUERY_CHARS),
      documents,
      [target.provider.topField]: documents.length,
    });
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
    if (target.key) headers.authorization = `Bearer ${target.key}`;
    try {
      const url = endpointUrl(target.base, 'rerank');
      const res = await guardedFetch(url, { method: 'POST', headers, body, signal: combined }, this.policyFor(target.operatorUrl));
      if (!res.ok) {
        await res.body?.cancel().catch(() => undefined);
        return `http_${res.status}`;
      }
      let json: unknown;
      try {
        json = JSON.parse(await readBounded(res, MAX_RESPONSE_BYTES));
      } catch (err) {
        if (err instanceof ResponseTooLarge || err instanceof SyntaxError) return 'invalid_response';
        throw err;
      }
      return parseRanking(json, documents.length) ?? 'invalid_response';
    } catch (err) {
      if (err instanceof OutboundUrlError) return 'blocked_url';
      if (signal?.aborted) return 'aborted';
      if (timeout.aborted) return 'timeout';
      // Network error text can name the host; only the kind of failure is reported.
      return 'network_error';
    }
  }
}

/** The reranker as the operator configured it (hosted providers by key; a self-hosted one by URL). */
export function rerankerFromEnv(env: RerankEnv & Pick<Env, 'MEMORY_RERANK_CUSTOM_BASE_URL' | 'MEMORY_RERANK_CUSTOM_API_KEY'>, log?: Logger): Reranker {
  return new Reranker(env, {
    log,
    baseUrls: env.MEMORY_RERANK_CUSTOM_BASE_URL ? { custom: env.MEMORY_RERANK_CUSTOM_BASE_URL } : undefined,
    customApiKey: env.MEMORY_RERANK_CUSTOM_API_KEY,
  });
}
