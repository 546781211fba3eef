import crypto from 'node:crypto';
import { QdrantClient } from '@qdrant/js-client-rest';
import type { Db } from '../db/connection';
import { operatorPolicy, OutboundUrlError, type OutboundPolicy } from '../net/url-policy';
import { TimeoutError, withTimeout } from '../timeout';
import { QdrantRepository, type PointSourceRow } from './qdrant.repository';
import { parseSignature, vectorSignature } from './signature';
import type { SqliteVecStore } from './sqlite-vec.store';
import {
  VectorUnavailableError,
  type SignatureInput,
  type UpsertManyResult,
  type VectorHit,
  type VectorSearchQuery,
  type VectorStore,
  type VectorStoreHealth,
  type VectorUpsertRow,
} from './types';

/** The client's generated REST API (each operation takes its payload and a RequestInit). */
type Api = ReturnType<QdrantClient['api']>;

/** The `kind` payload value of every point Engram writes (cleanup and searches filter on it). */
export const QDRANT_POINT_KIND = 'engram_memory';
/** Qdrant searches return at most this many hits (the original clamped to 20). */
export const QDRANT_MAX_TOP_K = 100;
/** Why Qdrant does not serve yet before the first backfill completed (no alias): retrieval's fallbackReason and health's reason. */
export const QDRANT_INDEX_PENDING = 'qdrant index not built yet (backfill pending)';
/** How long a looked-up alias target is trusted before asking Qdrant again. */
const ALIAS_CACHE_MS = 2000;

export type QdrantQuantization = 'none' | 'int8' | 'binary';

/** Where and how to reach Qdrant; read on every call, so a settings change takes effect at once. */
export interface QdrantConfig {
  enabled: boolean;
  /** http(s)://host:port, or null when no host is configured. */
  url: string | null;
  apiKey: string | null;
  /** The alias searches use; physical collections are `<collection>_<signature slug>`. */
  collection: string;
  quantization: QdrantQuantization;
  /** Every request (jobs, health). */
  timeoutMs: number;
  /** Searches on the request path. */
  searchTimeoutMs: number;
}

/** A point as Engram writes it: id = memories.memory_id, payload as DESIGN §7 / the digest §8.3 (with the real type). */
export interface QdrantPayload {
  kind: string;
  memoryId: string;
  rowId: number;
  apiKeyId: string;
  sessionId: string | null;
  type: string;
  key: string | null;
  content: string;
  metadata: Record<string, unknown>;
  createdAtUnix: number;
  expiresAtUnix: number | null;
}

/** What health reports (GET /api/settings/qdrant/health). */
export interface QdrantHealth extends VectorStoreHealth {
  enabled: boolean;
  /** Qdrant answered /readyz (with this api key); `ok` further needs the collection of the active embedding behind the alias. */
  reachable: boolean;
  latencyMs: number | null;
  alias: string;
  aliasTarget: string | null;
  collectionExists: boolean;
  dimension: number | null;
  expectedDimension: number | null;
  pointCount: number | null;
  quantization: QdrantQuantization;
}

/** The signature a Qdrant collection is built for: the sqlite-vec one without its storage suffix (Qdrant stores floats). */
export function qdrantSignature(sqliteSignature: string): string {
  return sqliteSignature.replace(/:int8$/, '');
}

/** `<base>_<slug>_<hash8>`: readable, safe in a URL path, unique per signature. */
export function physicalCollectionName(base: string, signature: string): string {
  const slug = signature.replace(/[^A-Za-z0-9_-]+/g, '_').replace(/_+/g, '_').slice(0, 80);
  const hash = crypto.createHash('sha256').update(signature).digest('hex').slice(0, 8);
  return `${base}_${slug}_${hash}`;
}

/** A message safe to log or answer: no URL credentials, no api key, bounded. */
export function sanitizeQdrantMessage(message: string, apiKey: string | null): string {
  let m = message;
  if (apiKey) m = m.split(apiKey).join('***');
  return m.replace(/\/\/[^/@\s]*@/g, '//').slice(0, 300);
}

function statusOf(err: unknown): number | null {
  const s = (err as { status?: unknown }).status;
  return typeof s === 'number' ? s : null;
}

function unix(iso: string | null, round: (x: number) => number = Math.floor): number | null {
  if (!iso) return null;
  const t = Date.parse(iso);
  return Number.isFinite(t) ? round(t / 1000) : null;
}

export function payloadOf(r: PointSourceRow): QdrantPayload {
  let metadata: Record<string, unknown> = {};
  try {
    const m = JSON.parse(r.metadata) as unknown;
    if (m && typeof m === 'object' && !Array.isArray(m)) metadata = m as Record<string, unknown>;
  } catch {
    // stored metadata is always JSON; an unreadable value becomes {}
  }
  return {
    kind: QDRANT_POINT_KIND,
    memoryId: r.id,
    rowId: r.rowId,
    apiKeyId: r.apiKeyId,
    sessionId: r.sessionId,
    type: r.type,
    key: r.key,
    content: r.content,
    metadata,
    createdAtUnix: unix(r.createdAt) ?? 0,
    // Rounded up: cleanup deletes `expiresAtUnix <= floor(now)`, which must never hit a memory live for the rest of its second.
    expiresAtUnix: unix(r.expiresAt, Math.ceil),
  };
}

/**
 * The Qdrant vector tier (DESIGN §7) on @qdrant/js-client-rest. Searches go through an alias
 * (`collection`) that always names a complete collection; writes go to the collection of the
 * signature sqlite-vec holds, with the very vectors sqlite-vec holds. Every search filters by
 * kind, tenant, session and expiry in Qdrant, and every hit is re-checked against SQLite
 * (tenant, expiry, retention, session, existence) before it is returned.
 */
export class QdrantVectorStore implements VectorStore {
  readonly kind = 'qdrant' as const;
  private readonly repo: QdrantRepository;
  private client: { key: string; client: QdrantClient } | null = null;
  private aliasCache: { at: number; base: string; target: string | null } | null = null;
  private readonly ensured = new Set<string>();
  private readonly ensuring = new Map<string, Promise<string>>();

  private readonly policy: OutboundPolicy;

  constructor(
    db: Db,
    private readonly sqlite: SqliteVecStore,
    private readonly config: () => QdrantConfig,
    opts: { policy?: OutboundPolicy } = {},
  ) {
    this.repo = new QdrantRepository(db);
    // The operator's policy (private hosts allowed, metadata never), re-checked on every connection.
    this.policy = opts.policy ?? operatorPolicy();
  }

  /** The current configuration (api key included: callers must mask it). */
  currentConfig(): QdrantConfig {
    return this.config();
  }

  available(): boolean {
    const c = this.config();
    return c.enabled && !!c.url;
  }

  /**
   * The generated REST API of the client for the current configuration (rebuilt when url or key change).
   * Every request goes through call(), which hands it its RequestInit: the client's own timeout is off
   * because its middleware would replace that init's signal.
   */
  private qc(): Api {
    const c = this.config();
    if (!c.url) throw new VectorUnavailableError('unhealthy', 'Qdrant is not configured (no host)');
    const key = JSON.stringify([c.url, c.apiKey]);
    if (this.client?.key !== key) {
      // The api key goes in a header we set ourselves: the client's apiKey option also forces https and warns on stdout.
      const client = new QdrantClient({ url: c.url, timeout: Infinity, checkCompatibility: false, headers: c.apiKey ? { 'api-key': c.apiKey } : {} });
      this.client = { key, client };
      this.ensured.clear();
      this.aliasCache = null;
    }
    return this.client.client.api();
  }

  /** Runs a client call with a deadline and an optional caller signal; any failure is a VectorUnavailableError with a clean message. */
  private async call<T>(what: string, fn: (api: Api, init: RequestInit) => Promise<{ data: { result?: T | null } }>, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<T> {
    const cfg = this.config();
    const client = this.qc();
    if (opts.signal?.aborted) throw new VectorUnavailableError('aborted', 'the search was cancelled');
    const ms = opts.timeoutMs ?? cfg.timeoutMs;
    // Aborted when the call settles for any reason (deadline, caller's abort, answer): a request never
    // outlives its call, so an abandoned search does not hold a pooled socket for the job timeout.
    const done = new AbortController();
    // Qdrant never redirects; following one would carry the api-key header to wherever it points.
    // The guarded dispatcher checks the address a host name resolves to at connect time (metadata refused).
    const init: RequestInit = { signal: done.signal, redirect: 'error', dispatcher: this.policy.dispatcher } as RequestInit;
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(new VectorUnavailableError('aborted', 'the search was cancelled'));
      opts.signal?.addEventListener('abort', onAbort, { once: true });
    });
    aborted.catch(() => undefined);
    try {
      const answer = withTimeout(Promise.race([fn(client, init), aborted]), ms, `Qdrant ${what} timed out after ${ms} ms`);
      return resultOf((await answer).data);
    } catch (err) {
      if (err instanceof VectorUnavailableError) throw err;
      if (err instanceof TimeoutError || (err as Error).name === 'QdrantClientTimeoutError') {
        throw new VectorUnavailableError('timeout', `Qdrant ${what} timed out after ${ms} ms`);
      }
      const status = statusOf(err);
      const detail = sanitizeQdrantMessage(qdrantErrorText(err), cfg.apiKey);
      const e = new VectorUnavailableError(status === 404 ? 'index_not_built' : 'unhealthy', `Qdrant ${what} failed${status ? ` (HTTP ${status})` : ''}: ${detail}`);
      (e as VectorUnavailableError & { status?: number | null }).status = status;
      throw e;
    } finally {
      done.abort();
      if (onAbort) opts.signal?.removeEventListener('abort', onAbort);
    }
  }

  /** The collection the alias points to now (cached for 2 s; `fresh` asks Qdrant). */
  async aliasTarget(fresh = false, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<string | null> {
    const base = this.config().collection;
    if (!fresh && this.aliasCache && this.aliasCache.base === base && Date.now() - this.aliasCache.at < ALIAS_CACHE_MS) return this.aliasCache.target;
    const res = await this.call('alias lookup', (api, init) => api.getCollectionsAliases({}, init), opts);
    const target = res.aliases.find((a) => a.alias_name === base)?.collection_name ?? null;
    this.aliasCache = { at: Date.now(), base, target };
    return target;
  }

  /** The collection vectors of `signature` are written to. */
  collectionFor(signature: string): string {
    return physicalCollectionName(this.config().collection, qdrantSignature(signature));
  }

  /** sqlite-vec's signature when the alias (as last looked up) names its collection; null otherwise. */
  activeSignature(): string | null {
    const sig = this.sqlite.activeSignature();
    return sig && this.aliasCache?.target === this.collectionFor(sig) ? sig : null;
  }

  signatureFor(resolution: SignatureInput): string | null {
    const dim = resolution.dimensions;
    if (dim === null || !Number.isInteger(dim) || dim <= 0) return null;
    return vectorSignature(resolution, 'none');
  }

  /**
   * Creates the collection of `signature` if it does not exist (cosine, measured width, optional
   * quantization) with its payload indexes. It does not touch the alias: searches use a collection
   * only once a backfill has filled it. Throws on a width mismatch with an existing collection.
   */
  async ensureCollection(signature: string, dim: number): Promise<string> {
    const name = this.collectionFor(signature);
    if (this.ensured.has(name)) return name;
    // Concurrent jobs of this process share one bootstrap; other processes are handled by the 409s below.
    let p = this.ensuring.get(name);
    if (!p) {
      p = this.bootstrap(name, dim).finally(() => this.ensuring.delete(name));
      this.ensuring.set(name, p);
    }
    return p;
  }

  private async bootstrap(name: string, dim: number): Promise<string> {
    const cfg = this.config();
    const exists = await this.call('collection lookup', (api, init) => api.collectionExists({ collection_name: name }, init));
    if (!exists.exists) {
      const quantization_config =
        cfg.quantization === 'int8'
          ? { scalar: { type: 'int8' as const, quantile: 0.99, always_ram: true } }
          : cfg.quantization === 'binary'
            ? { binary: { always_ram: true } }
            : undefined;
      try {
        await this.call('collection create', (api, init) =>
          api.createCollection({ collection_name: name, vectors: { size: dim, distance: 'Cosine' }, ...(quantization_config ? { quantization_config } : {}) }, init),
        );
      } catch (err) {
        // Another worker created it meanwhile: fine.
        if ((err as { status?: number }).status !== 409) throw err;
      }
      // Qdrant's multitenancy advice: the tenant field is a keyword index with is_tenant.
      await this.call('payload index', (api, init) =>
        api.createFieldIndex({ collection_name: name, field_name: 'apiKeyId', field_schema: { type: 'keyword', is_tenant: true }, wait: true }, init),
      );
      for (const [field, type] of [
        ['kind', 'keyword'],
        ['sessionId', 'keyword'],
        ['expiresAtUnix', 'integer'],
        ['rowId', 'integer'],
        ['memoryId', 'keyword'],
      ] as const) {
        await this.call('payload index', (api, init) => api.createFieldIndex({ collection_name: name, field_name: field, field_schema: type, wait: true }, init));
      }
    } else {
      const width = await this.collectionDim(name);
      if (width !== null && width !== dim) throw new VectorUnavailableError('dimension_mismatch', `Qdrant collection ${name} has ${width} dimensions, the embedding has ${dim}`);
    }
    // The alias is never pointed here: only a completed backfill (QdrantSyncService.backfill) switches it,
    // so a collection that holds the first synced points but not the existing corpus is never searched.
    this.ensured.add(name);
    return name;
  }

  private async collectionDim(name: string): Promise<number | null> {
    const info = await this.call('collection info', (api, init) => api.getCollection({ collection_name: name }, init));
    const v = info.config.params.vectors as { size?: number } | Record<string, { size?: number }> | undefined;
    if (!v) return null;
    if (typeof (v as { size?: number }).size === 'number') return (v as { size: number }).size;
    const first = Object.values(v as Record<string, { size?: number }>)[0];
    return typeof first?.size === 'number' ? first.size : null;
  }

  /** Points the alias at `collection` in one atomic request (delete + create); searches never see a gap. */
  async switchAlias(collection: string): Promise<string | null> {
    const base = this.config().collection;
    const previous = await this.aliasTarget(true);
    if (previous === collection) return previous;
    const actions = [
      ...(previous ? [{ delete_alias: { alias_name: base } }] : []),
      { create_alias: { collection_name: collection, alias_name: base } },
    ];
    await this.call('alias switch', (api, init) => api.updateAliases({ actions }, init));
    this.aliasCache = { at: Date.now(), base, target: collection };
    return previous;
  }

  /** Drops a collection (after an alias switch); never the one the alias names. */
  async dropCollection(name: string): Promise<boolean> {
    if ((await this.aliasTarget(true)) === name) return false;
    this.ensured.delete(name);
    const r = await this.call('collection delete', (api, init) => api.deleteCollection({ collection_name: name }, init));
    return r === true;
  }

  /** Physical collections of this alias base other than `keep` (left over from older signatures). */
  async staleCollections(keep: string): Promise<string[]> {
    const base = this.config().collection;
    const all = await this.call('collection list', (api, init) => api.getCollections({}, init));
    // Only names physicalCollectionName makes for this base (`<base>_<slug>_<hash8>`, the slug starting with
    // the signature's embedding source): the slug may hold underscores, so `<base>_` alone also matches
    // another Engram's base that extends ours (engram_memory_eu_…).
    const ours = new RegExp(`^${base.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&')}_(?:remote|static|transformers|null)_[A-Za-z0-9_-]+_[0-9a-f]{8}$`);
    // Never a collection any alias names: that one is live for whoever owns the alias.
    const aliased = new Set((await this.call('alias list', (api, init) => api.getCollectionsAliases({}, init))).aliases.map((a) => a.collection_name));
    return all.collections.map((c) => c.name).filter((n) => n !== keep && ours.test(n) && !aliased.has(n));
  }

  /**
   * Writes points for these rows with the vectors given (the sqlite-vec ones) into the collection of
   * `expectedSignature` (default: the signature sqlite-vec holds). Rows whose memory is gone are skipped.
   */
  async upsert(rows: VectorUpsertRow[], expectedSignature?: string): Promise<UpsertManyResult> {
    const out: UpsertManyResult = { stored: 0, cleared: 0, zeroVectors: 0, missing: 0 };
    if (rows.length === 0) return out;
    const signature = expectedSignature ?? this.sqlite.activeSignature();
    const parsed = signature ? parseSignature(signature) : null;
    if (!signature || !parsed) throw new VectorUnavailableError('index_not_built', 'no vector signature yet');
    const collection = await this.ensureCollection(signature, parsed.dim);
    const sources = new Map(this.repo.sources(rows.map((r) => r.rowId)).map((s) => [s.rowId, s]));
    const points: { id: number; vector: number[]; payload: Record<string, unknown> }[] = [];
    const gone: number[] = [];
    for (const r of rows) {
      const src = sources.get(r.rowId);
      if (!src || src.apiKeyId !== r.apiKeyId) {
        out.missing++;
        gone.push(r.rowId);
        continue;
      }
      if (!r.vector.some((x) => x !== 0)) {
        out.zeroVectors++;
        gone.push(r.rowId);
        continue;
      }
      points.push({ id: r.rowId, vector: Array.from(r.vector), payload: payloadOf(src) as unknown as Record<string, unknown> });
    }
    if (points.length) await this.call('upsert', (api, init) => api.upsertPoints({ collection_name: collection, wait: true, points }, init));
    if (gone.length) await this.deleteFrom(collection, gone);
    out.stored = points.length;
    return out;
  }

  /** Deletes points by row id from one collection. */
  async deleteFrom(collection: string, rowIds: number[]): Promise<void> {
    if (rowIds.length === 0) return;
    await this.call('delete', (api, init) => api.deletePoints({ collection_name: collection, wait: true, points: rowIds }, init));
  }

  /** Removes these memories' points from the collection the alias names and from the one being written; returns how many were asked. */
  async delete(rowIds: number[]): Promise<number> {
    if (rowIds.length === 0) return 0;
    for (const collection of await this.writeTargets()) await this.deleteFrom(collection, rowIds);
    return rowIds.length;
  }

  /** The collections writes must reach: the alias target and the collection of sqlite-vec's signature (they differ during a reindex). */
  async writeTargets(): Promise<string[]> {
    const out = new Set<string>();
    const target = await this.aliasTarget();
    if (target) out.add(target);
    const sig = this.sqlite.activeSignature();
    if (sig) {
      const name = this.collectionFor(sig);
      const exists = this.ensured.has(name) || (await this.call('collection lookup', (api, init) => api.collectionExists({ collection_name: name }, init))).exists;
      if (exists) out.add(name);
    }
    return [...out];
  }

  /**
   * The tenant's k nearest live memories through the alias. Qdrant filters kind, tenant, session
   * and expiry; SQLite then re-checks every hit (existence, tenant, expiry, retention, session), so
   * a point left behind by a missed sync never comes back.
   */
  async search(q: VectorSearchQuery): Promise<VectorHit[]> {
    const cfg = this.config();
    if (!this.available()) throw new VectorUnavailableError('unhealthy', 'Qdrant is not enabled');
    const want = Math.min(Math.floor(q.k), QDRANT_MAX_TOP_K);
    if (!(want > 0)) return [];
    if (!q.vector.some((x) => x !== 0)) throw new VectorUnavailableError('zero_query_vector', 'the query embedding is all zeros');
    // One deadline for the whole search (alias lookup + query): the request path must fall back in time.
    const deadline = performance.now() + cfg.searchTimeoutMs;
    const left = () => Math.max(1, Math.round(deadline - performance.now()));
    const target = await this.aliasTarget(false, { timeoutMs: left(), signal: q.signal });
    if (!target) throw new VectorUnavailableError('index_not_built', `${QDRANT_INDEX_PENDING}: the alias ${cfg.collection} does not exist yet`);
    if (q.filter.signature !== undefined) {
      const wanted = this.collectionFor(q.filter.signature);
      if (wanted !== target) {
        throw new VectorUnavailableError('signature_mismatch', `the Qdrant alias names ${target}, not the collection of the current embedding (${wanted})`);
      }
    }
    const nowUnix = Math.floor(Date.parse(q.filter.nowIso) / 1000);
    const must: Record<string, unknown>[] = [
      { key: 'kind', match: { value: QDRANT_POINT_KIND } },
      { key: 'apiKeyId', match: { value: q.apiKeyId } },
      { should: [{ is_null: { key: 'expiresAtUnix' } }, { key: 'expiresAtUnix', range: { gt: nowUnix } }] },
    ];
    if (q.filter.sessionId) must.push({ key: 'sessionId', match: { value: q.filter.sessionId } });
    // Retention and second-precision expiry are re-checked in SQLite: ask for some spare hits.
    const limit = Math.min(QDRANT_MAX_TOP_K * 2, want * 2);
    const res = await this.call(
      'search',
      (api, init) =>
        api.queryPoints(
          {
            collection_name: cfg.collection,
            query: Array.from(q.vector),
            filter: { must },
            limit,
            with_payload: ['memoryId', 'apiKeyId'],
            ...(cfg.quantization !== 'none' ? { params: { quantization: { rescore: true } } } : {}),
          },
          init,
        ),
      { timeoutMs: left(), signal: q.signal },
    );
    const hits = res.points
      .map((p) => ({ rowId: Number(p.id), score: p.score, apiKeyId: (p.payload as { apiKeyId?: unknown } | null | undefined)?.apiKeyId }))
      .filter((h) => Number.isSafeInteger(h.rowId) && h.apiKeyId === q.apiKeyId);
    const live = this.repo.liveRowIds(
      hits.map((h) => h.rowId),
      { apiKeyId: q.apiKeyId, nowIso: q.filter.nowIso, freshAfterIso: q.filter.freshAfterIso || null, sessionId: q.filter.sessionId || null },
    );
    const ids = this.repo.idsOf([...live]);
    return hits
      .filter((h) => live.has(h.rowId))
      .slice(0, want)
      .map((h) => {
        const score = Math.min(1, Math.max(0, h.score));
        return { rowId: h.rowId, id: ids.get(h.rowId)!, distance: 1 - h.score, score };
      });
  }

  /** The sqlite-vec signature and storage type the vectors are read in; null before the first index build. */
  private sqliteIndex(): { signature: string; dim: number; quantization: 'none' | 'int8' } | null {
    const signature = this.sqlite.activeSignature();
    const parsed = signature ? parseSignature(signature) : null;
    return signature && parsed ? { signature, dim: parsed.dim, quantization: parsed.quantization } : null;
  }

  /**
   * Makes Qdrant match SQLite for these memories (the qdrant-sync job): a memory that exists with a
   * vector in sqlite-vec is upserted with exactly that vector; one that is gone or has no vector
   * loses its point. Reads current state only, so retries, duplicates and reordering converge.
   */
  async syncMemories(memoryIds: string[]): Promise<{ upserted: number; removed: number; passes: number }> {
    // Read, write, read again: when another sync (or an edit) changed the rows while this one was
    // writing, this one may have just overwritten a newer point with older data; writing again from
    // the fresh read fixes that, so whichever sync writes last leaves Qdrant matching SQLite.
    let plan = this.syncPlan(memoryIds);
    for (let pass = 1; ; pass++) {
      const upserted = await this.applySyncPlan(plan);
      const again = this.syncPlan(memoryIds);
      if (again.fingerprint === plan.fingerprint || pass >= 5) return { upserted, removed: plan.noVector.length + plan.gone.length, passes: pass };
      plan = again;
    }
  }

  /** What Qdrant must hold for these memories right now, with a fingerprint of it. */
  private syncPlan(memoryIds: string[]) {
    const ix = this.sqliteIndex();
    const rowIdsById = this.repo.rowIdsOf(memoryIds);
    const gone = memoryIds.filter((id) => !rowIdsById.has(id));
    const rowIds = [...rowIdsById.values()].sort((a, b) => a - b);
    const vectors = ix ? this.repo.vectors(rowIds, ix.quantization) : new Map<number, Float32Array>();
    const sources = new Map(this.repo.sources(rowIds).map((r) => [r.rowId, r]));
    const upserts = rowIds
      .filter((id) => vectors.has(id) && sources.has(id))
      .map((rowId) => ({ rowId, apiKeyId: sources.get(rowId)!.apiKeyId, vector: vectors.get(rowId)!, contentHash: '' }));
    const noVector = rowIds.filter((id) => !vectors.has(id));
    const h = crypto.createHash('sha256').update(JSON.stringify([ix?.signature ?? null, gone, noVector]));
    for (const u of upserts) {
      h.update(JSON.stringify(payloadOf(sources.get(u.rowId)!)));
      h.update(Buffer.from(u.vector.buffer, u.vector.byteOffset, u.vector.byteLength));
    }
    return { signature: ix?.signature ?? null, upserts, noVector, gone, fingerprint: h.digest('hex') };
  }

  private async applySyncPlan(plan: ReturnType<QdrantVectorStore['syncPlan']>): Promise<number> {
    let upserted = 0;
    if (plan.signature && plan.upserts.length) upserted = (await this.upsert(plan.upserts, plan.signature)).stored;
    for (const collection of await this.writeTargets()) {
      if (plan.noVector.length) await this.deleteFrom(collection, plan.noVector);
      if (plan.gone.length) await this.deleteWhere(collection, { must: [{ key: 'memoryId', match: { any: plan.gone } }] });
    }
    return upserted;
  }

  /**
   * One backfill page: the memories after `afterRowId` (in row order) written to the collection of
   * `signature` with their sqlite-vec vectors; rows without a vector are removed there.
   */
  async backfillPage(signature: string, afterRowId: number, limit: number): Promise<{ rows: number; stored: number; lastRowId: number }> {
    const ix = this.sqliteIndex();
    if (!ix || ix.signature !== signature) throw new VectorUnavailableError('signature_mismatch', `sqlite-vec now holds ${ix?.signature ?? 'no index'}, not ${signature}`);
    const rowIds = this.repo.rowIdPage(afterRowId, limit);
    if (rowIds.length === 0) return { rows: 0, stored: 0, lastRowId: afterRowId };
    // The same read-write-verify as qdrant-sync: a sync or an embed racing this page cannot be undone by it.
    const res = await this.syncMemories([...this.repo.idsOf(rowIds).values()]);
    return { rows: rowIds.length, stored: res.upserted, lastRowId: rowIds[rowIds.length - 1]! };
  }

  /** How many memories a backfill from `afterRowId` still has to page through. */
  remainingAfter(afterRowId: number): number {
    return this.repo.countAfter(afterRowId);
  }

  /** Which of these point ids (row ids) no longer have a memory. */
  orphans(rowIds: number[]): number[] {
    return this.repo.missing(rowIds);
  }

  /** The collection sqlite-vec's current signature writes to (null before the first index build). */
  currentCollection(): { signature: string; collection: string; dim: number } | null {
    const ix = this.sqliteIndex();
    return ix ? { signature: ix.signature, collection: this.collectionFor(ix.signature), dim: ix.dim } : null;
  }

  /** Tenant-scoped test search (settings route): re-checked hits with their payload from Qdrant. */
  async searchWithPayload(q: VectorSearchQuery): Promise<{ id: string; rowId: number; score: number; payload: Record<string, unknown> | null }[]> {
    const hits = await this.search(q);
    if (hits.length === 0) return [];
    const sources = new Map(this.repo.sources(hits.map((h) => h.rowId)).map((r) => [r.rowId, r]));
    return hits.map((h) => {
      const src = sources.get(h.rowId);
      return { id: h.id, rowId: h.rowId, score: h.score, payload: src ? (payloadOf(src) as unknown as Record<string, unknown>) : null };
    });
  }

  async count(): Promise<number> {
    if (!this.available()) return 0;
    const target = await this.aliasTarget();
    if (!target) return 0;
    const r = await this.call('count', (api, init) =>
      api.countPoints({ collection_name: target, exact: true, filter: { must: [{ key: 'kind', match: { value: QDRANT_POINT_KIND } }] } }, init),
    );
    return r.count;
  }

  /** Points matching a filter in the alias target (cleanup counts first). */
  async countWhere(collection: string, filter: Record<string, unknown>): Promise<number> {
    const r = await this.call('count', (api, init) => api.countPoints({ collection_name: collection, exact: true, filter }, init));
    return r.count;
  }

  /** Deletes the points matching a filter. */
  async deleteWhere(collection: string, filter: Record<string, unknown>): Promise<void> {
    await this.call('delete', (api, init) => api.deletePoints({ collection_name: collection, wait: true, filter }, init));
  }

  /** One page of point ids (row ids) in a collection, for the orphan sweep. */
  async scrollIds(collection: string, offset: number | null, limit: number): Promise<{ ids: number[]; next: number | null }> {
    const r = await this.call('scroll', (api, init) =>
      api.scrollPoints(
        { collection_name: collection, limit, with_payload: false, with_vector: false, filter: { must: [{ key: 'kind', match: { value: QDRANT_POINT_KIND } }] }, ...(offset !== null ? { offset } : {}) },
        init,
      ),
    );
    const next = r.next_page_offset;
    return { ids: r.points.map((p) => Number(p.id)), next: typeof next === 'number' ? next : next === null || next === undefined ? null : Number(next) };
  }

  async health(): Promise<VectorStoreHealth> {
    const h = await this.details();
    return { ok: h.ok, reason: h.reason };
  }

  /** readyz, latency, alias target, whether it exists, its width against the active embedding, point count. Changes nothing. */
  async details(): Promise<QdrantHealth> {
    const cfg = this.config();
    const sig = this.sqlite.activeSignature();
    const expectedDimension = sig ? (parseSignature(sig)?.dim ?? null) : null;
    const base: QdrantHealth = {
      ok: false,
      reason: '',
      enabled: cfg.enabled,
      reachable: false,
      latencyMs: null,
      alias: cfg.collection,
      aliasTarget: null,
      collectionExists: false,
      dimension: null,
      expectedDimension,
      pointCount: null,
      quantization: cfg.quantization,
    };
    if (!cfg.url) return { ...base, reason: 'not_configured' };
    const started = performance.now();
    try {
      await this.call('readyz', async (_api, init) => {
        const res = await fetch(new URL('/readyz', cfg.url!).toString(), { ...init, headers: cfg.apiKey ? { 'api-key': cfg.apiKey } : {} });
        await res.arrayBuffer();
        if (!res.ok) throw Object.assign(new Error(`readyz answered HTTP ${res.status}`), { status: res.status });
        return { data: { result: true } };
      });
      base.latencyMs = Math.round((performance.now() - started) * 10) / 10;
      base.reachable = true;
      base.aliasTarget = await this.aliasTarget(true);
      if (!base.aliasTarget) return { ...base, reason: `${QDRANT_INDEX_PENDING}: the alias ${cfg.collection} does not exist yet` };
      base.collectionExists = true;
      base.dimension = await this.collectionDim(base.aliasTarget);
      base.pointCount = await this.count();
      if (expectedDimension !== null && base.dimension !== null && base.dimension !== expectedDimension) {
        return { ...base, reason: `dimension mismatch: collection ${base.aliasTarget} has ${base.dimension} dimensions, the active embedding has ${expectedDimension}` };
      }
      if (sig && this.collectionFor(sig) !== base.aliasTarget) {
        return { ...base, ok: false, reason: `the alias names ${base.aliasTarget}, not the collection of the active embedding (a backfill will switch it)` };
      }
      if (!cfg.enabled) return { ...base, reason: 'reachable, but Qdrant is not enabled in the settings' };
      return { ...base, ok: true, reason: `Qdrant ready, ${base.pointCount} points in ${base.aliasTarget}` };
    } catch (err) {
      if (base.latencyMs === null) base.latencyMs = Math.round((performance.now() - started) * 10) / 10;
      return { ...base, reason: (err as Error).message };
    }
  }
}

/** A Qdrant answer's `result` (the client's own methods refuse an answer without one the same way). */
function resultOf<T>(data: { result?: T | null }): T {
  if (data.result === undefined || data.result === null) throw new Error('Qdrant answered without a result');
  return data.result;
}

/** The most useful text of a client error (the outbound policy's refusal, Qdrant's `status.error`, its message). */
function qdrantErrorText(err: unknown): string {
  for (let c: unknown = err, i = 0; c && i < 5; c = (c as { cause?: unknown }).cause, i++) {
    if (c instanceof OutboundUrlError) return c.message;
    // Node's own fetch re-wraps a dispatcher's error as a plain Error named in its message.
    const m = /^OutboundUrlError: (.*)$/.exec((c as Error).message ?? '');
    if (m) return m[1]!;
  }
  const e = err as { message?: string; data?: { status?: { error?: string } } };
  return e.data?.status?.error ?? e.message ?? String(err);
}
