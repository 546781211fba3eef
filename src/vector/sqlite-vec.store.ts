import type { Db } from '../db/connection';
import { nowIso } from '../db/connection';
import { VectorRepository, type KnnCandidate, type VecFilterParams, type VecSearchState } from './sqlite-vec.repository';
import { parseSignature, vectorSignature } from './signature';
import { VecScanCache } from './vec-scan-cache';
import {
  VectorInputError,
  VectorUnavailableError,
  type KnnFilter,
  type KnownLiveness,
  type PendingReindexRow,
  type SignatureInput,
  type UpsertManyResult,
  type UpsertResult,
  type VecMeta,
  type VecQuantization,
  type VecStats,
  type VectorHit,
  type VectorSearchQuery,
  type VectorStore,
  type VectorStoreHealth,
  type VectorUpsertRow,
} from './types';

/** sqlite-vec 0.1.9 refuses `k` above 4096 in a KNN query. */
export const VEC0_MAX_K = 4096;
/** sqlite-vec 0.1.9 refuses vector columns wider than 8192. */
export const VEC0_MAX_DIM = 8192;
/**
 * When the first KNN (exactly k rows) loses rows to expiry/retention/session, the retry asks vec0
 * for this many times k. The first pass does not over-fetch: vec0 0.1.9's cost grows with k (at
 * 100k rows per key, k = 80 took ~1.7× as long as k = 20), and with no filter dropping rows the
 * k nearest are already the answer.
 */
const OVERFETCH = 4;
/**
 * When a filtered search comes up short and at most this many memories pass the filters, score
 * those rows exactly (vec0 point lookups, ~0.1 ms each) instead of widening the KNN again.
 */
const DEFAULT_EXACT_SCAN_MAX_ROWS = 2000;

export interface SqliteVecStoreOptions {
  /** sqlite-vec is loaded into this connection (DbHandle.vecLoaded). */
  vecLoaded: boolean;
  /** The quantization new signatures ask for (MEMORY_VEC_QUANTIZATION); reads follow the stored signature. */
  quantization: VecQuantization;
  exactScanMaxRows?: number;
  /**
   * Bytes of in-memory tenant copies searched by the WebAssembly SIMD scan (MEMORY_VEC_SCAN_CACHE_MB);
   * 0 (the default here) searches with vec0 only.
   */
  scanCacheBytes?: number;
}

/**
 * An L2-normalised copy of `v`, or null when it is all zeros (such a vector has no direction:
 * vec0 reports a NULL cosine distance for it, which sorts first, so it must never be stored or searched).
 */
export function normalise(v: Float32Array): Float32Array | null {
  let sum = 0;
  for (let i = 0; i < v.length; i++) {
    const x = v[i]!;
    if (!Number.isFinite(x)) throw new VectorInputError('invalid_vector', `vector component ${i} is ${x}`);
    sum += x * x;
  }
  if (sum === 0) return null;
  const inv = 1 / Math.sqrt(sum);
  const out = new Float32Array(v.length);
  for (let i = 0; i < v.length; i++) out[i] = v[i]! * inv;
  return out;
}

function toBlob(v: Float32Array): Buffer {
  return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
}

/** The stored index a search or write works against. */
interface ReadyIndex {
  dim: number;
  quantization: VecQuantization;
  signature: string;
  lastResetAt: string | null;
}

function filterParams(f: KnnFilter): VecFilterParams {
  return { nowIso: f.nowIso, freshAfterIso: f.freshAfterIso || null, sessionId: f.sessionId || null };
}

function toHit(r: { rowId: number; id: string; distance: number }): VectorHit {
  return { rowId: r.rowId, id: r.id, distance: r.distance, score: Math.min(1, Math.max(0, 1 - r.distance)) };
}

/**
 * The sqlite-vec vector tier: one vec0 table partitioned by tenant, keyed by memories.memory_id.
 * Zero vectors are skipped, never stored or thrown on upsert: the memory is then served by
 * keywords and its reindex flag is still cleared, so the reindex job does not retry it forever.
 */
export class SqliteVecStore implements VectorStore {
  readonly kind = 'sqlite-vec' as const;
  /** knn's readyIndex refuses a search whose signature is not the index's (from searchState's one statement). */
  readonly searchChecksSignature = true;
  private readonly repo: VectorRepository;
  private readonly vecLoaded: boolean;
  /** The storage type new signatures ask for (MEMORY_VEC_QUANTIZATION). */
  readonly quantization: VecQuantization;
  private readonly exactScanMaxRows: number;
  /** In-memory tenant copies scanned with WebAssembly SIMD (issue #14); vec0 serves what they cannot. */
  readonly scanCache: VecScanCache;
  /** The last index readyIndex answered for, by the meta object it came from. */
  private lastReady: { meta: VecMeta; ix: ReadyIndex } | null = null;

  constructor(
    private readonly db: Db,
    opts: SqliteVecStoreOptions,
  ) {
    this.repo = new VectorRepository(db);
    this.vecLoaded = opts.vecLoaded;
    this.quantization = opts.quantization;
    this.exactScanMaxRows = opts.exactScanMaxRows ?? DEFAULT_EXACT_SCAN_MAX_ROWS;
    this.scanCache = new VecScanCache(this.repo, opts.scanCacheBytes ?? 0);
  }

  /** Whether sqlite-vec is loaded into this connection. */
  available(): boolean {
    return this.vecLoaded;
  }

  /** The memory_vec_meta singleton. */
  meta(): VecMeta {
    return this.repo.readMeta();
  }

  /** The signature the current vec_memories table was built for (null before the first rebuild). */
  currentSignature(): string | null {
    return this.repo.readSignature();
  }

  /** The signature vectors of this resolution get here (`…:int8` when stored as int8), or null while the width is unknown. */
  signatureFor(resolution: SignatureInput, quantization: VecQuantization = this.quantization): string | null {
    const dim = resolution.dimensions;
    if (dim === null || !Number.isInteger(dim) || dim <= 0) return null;
    return vectorSignature(resolution, quantization);
  }

  activeSignature(): string | null {
    return this.currentSignature();
  }

  /** True when the vec table exists and was built for exactly this signature; never changes anything. */
  isCompatible(signature: string): boolean {
    if (!this.vecLoaded || !this.repo.tableExists()) return false;
    return this.repo.readMeta().signature === signature;
  }

  /**
   * Drops and recreates vec_memories for `signature`, flags every memory for reindex and records
   * the new meta, all in one transaction; only the reindex job calls this. Returns how many rows were flagged.
   */
  rebuild(signature: string, dim: number): { flagged: number } {
    if (!this.vecLoaded) throw new VectorUnavailableError('extension_not_loaded', 'sqlite-vec is not loaded');
    const parsed = parseSignature(signature);
    if (!parsed) throw new VectorInputError('invalid_signature', `signature ${JSON.stringify(signature)} does not end in :<dim>[:int8]`);
    if (parsed.dim !== dim) throw new VectorInputError('dimension_mismatch', `signature ${signature} is for ${parsed.dim} dimensions, not ${dim}`);
    if (!Number.isInteger(dim) || dim <= 0 || dim > VEC0_MAX_DIM) {
      throw new VectorInputError('dimension_mismatch', `sqlite-vec supports 1..${VEC0_MAX_DIM} dimensions, got ${dim}`);
    }
    return this.db
      .transaction(() => {
        this.repo.recreateTable(dim, parsed.quantization);
        this.repo.resetLog();
        const flagged = this.repo.markAllNeedsReindex();
        this.repo.writeMeta({ activeDim: dim, signature, lastResetAt: nowIso(), tableCreated: true });
        return { flagged };
      })
      .immediate();
  }

  // The table's shape comes from the stored signature, never from the env: flipping
  // MEMORY_VEC_QUANTIZATION only takes effect at the next rebuild.
  private readyIndex(expectedSignature: string | undefined, state?: VecSearchState): ReadyIndex {
    if (!this.vecLoaded) throw new VectorUnavailableError('extension_not_loaded', 'sqlite-vec is not loaded');
    const meta = state ? state.meta : this.repo.readMeta();
    if (!(state ? state.tableExists : this.repo.tableExists()) || meta.activeDim === null || meta.signature === null) {
      throw new VectorUnavailableError('index_not_built', 'the vector index has not been built yet');
    }
    if (expectedSignature !== undefined && meta.signature !== expectedSignature) {
      throw new VectorUnavailableError('signature_mismatch', `the vector index is for ${meta.signature}, not ${expectedSignature}`);
    }
    // The same meta object (searchState reuses it while it reads the same) gives the same answer: not parsed again.
    if (this.lastReady?.meta === meta) return this.lastReady.ix;
    const parsed = parseSignature(meta.signature);
    const ix: ReadyIndex = { dim: meta.activeDim, quantization: parsed?.quantization ?? 'none', signature: meta.signature, lastResetAt: meta.lastResetAt };
    this.lastReady = { meta, ix };
    return ix;
  }

  private upsertInTx(row: VectorUpsertRow, dim: number, quantization: VecQuantization): UpsertResult {
    if (row.vector.length !== dim) {
      throw new VectorInputError('dimension_mismatch', `vector has ${row.vector.length} dimensions, the index has ${dim}`);
    }
    const unit = normalise(row.vector);
    const owner = this.repo.memoryForVector(row.rowId);
    if (!owner) {
      // Deleted while it was being embedded: storing now would leave an orphan.
      this.repo.deleteVector(row.rowId);
      return { stored: false, cleared: false, skipped: 'memory_missing' };
    }
    if (owner.apiKeyId !== row.apiKeyId) {
      throw new VectorInputError('tenant_mismatch', `memory ${row.rowId} belongs to another API key`);
    }
    // The tenant is the vec0 partition and a memory never changes owner, so an existing row is overwritten in place.
    // Every branch appends one memory_vec_log entry (the api's in-memory scan copies catch up from it).
    const exists = this.repo.vectorExists(row.rowId);
    if (!unit) {
      if (exists) this.repo.deleteVector(row.rowId);
    } else if (!exists) {
      this.repo.insertVector(row.rowId, row.apiKeyId, toBlob(unit), quantization);
    } else if (quantization === 'none') {
      this.repo.updateFloatVector(row.rowId, row.apiKeyId, toBlob(unit));
    } else {
      this.repo.deleteVector(row.rowId, false);
      this.repo.insertVector(row.rowId, row.apiKeyId, toBlob(unit), quantization);
    }
    const cleared = this.repo.clearNeedsReindex(row.rowId, row.contentHash);
    return { stored: unit !== null, cleared, skipped: unit ? null : 'zero_vector' };
  }

  /**
   * Replaces a memory's vector and clears its reindex flag only if `contentHash` still matches
   * (a stale embedding never clears a newer edit's flag); with `expectedSignature`, refuses when a
   * rebuild for another model happened since the caller checked.
   */
  upsertOne(rowId: number, apiKeyId: string, vector: Float32Array, contentHash: string, expectedSignature?: string): UpsertResult {
    return this.db
      .transaction(() => {
        const ix = this.readyIndex(expectedSignature);
        return this.upsertInTx({ rowId, apiKeyId, vector, contentHash }, ix.dim, ix.quantization);
      })
      .immediate();
  }

  /** Upserts a batch in one transaction (all or nothing); see `upsertOne`. */
  upsertMany(rows: VectorUpsertRow[], expectedSignature?: string): UpsertManyResult {
    return this.db
      .transaction(() => {
        const ix = this.readyIndex(expectedSignature);
        const out: UpsertManyResult = { stored: 0, cleared: 0, zeroVectors: 0, missing: 0 };
        for (const row of rows) {
          const r = this.upsertInTx(row, ix.dim, ix.quantization);
          if (r.stored) out.stored++;
          if (r.cleared) out.cleared++;
          if (r.skipped === 'zero_vector') out.zeroVectors++;
          if (r.skipped === 'memory_missing') out.missing++;
        }
        return out;
      })
      .immediate();
  }

  async upsert(rows: VectorUpsertRow[], expectedSignature?: string): Promise<UpsertManyResult> {
    return this.upsertMany(rows, expectedSignature);
  }

  async delete(rowIds: number[]): Promise<number> {
    if (rowIds.length === 0) return 0;
    return this.db.transaction(() => rowIds.filter((id) => this.deleteInTx(id)).length).immediate();
  }

  /** Deletes a memory's vector within the caller's transaction (the memory delete hook); a no-op without sqlite-vec or before the table exists. */
  deleteInTx(rowId: number): boolean {
    if (!this.vecLoaded || !this.repo.tableExists()) return false;
    return this.repo.deleteVector(rowId);
  }

  /**
   * The tenant's k nearest live memories by cosine similarity. Tenant isolation is the vec0
   * partition constraint; expiry, retention and session are applied by joining memories, with
   * over-fetch, doubling retries and an exact scan when the filters are selective. Throws
   * VectorUnavailableError whenever the caller should fall back to keywords.
   */
  knn(apiKeyId: string, vector: Float32Array, k: number, filter: KnnFilter, known?: KnownLiveness): VectorHit[] {
    // One statement for everything below needs to know of the index and its change log.
    const state = this.vecLoaded ? this.repo.searchState() : undefined;
    const ix = this.readyIndex(filter.signature, state);
    if (vector.length !== ix.dim) {
      throw new VectorUnavailableError('dimension_mismatch', `query has ${vector.length} dimensions, the index has ${ix.dim}`);
    }
    const unit = normalise(vector);
    if (!unit) throw new VectorUnavailableError('zero_query_vector', 'the query embedding is all zeros');
    const want = Math.min(Math.floor(k), VEC0_MAX_K);
    if (!(want > 0)) return [];
    const blob = toBlob(unit);
    const f = filterParams(filter);

    // The tenant's in-memory copy when it has one (WebAssembly SIMD scan, exact cosine), else vec0.
    const scanned = (n: number): KnnCandidate[] | null => {
      const top = this.scanCache.search(apiKeyId, ix, unit, n, state);
      if (!top) return null;
      const out: KnnCandidate[] = new Array(top.length);
      let unknown: number[] | null = null;
      for (let i = 0; i < top.length; i++) {
        const t = top[i]!;
        const id = known ? known(t.rowId) : undefined;
        out[i] = { rowId: t.rowId, distance: t.distance, id: id ?? null };
        if (id === undefined) (unknown ??= []).push(t.rowId);
      }
      // The rows the caller could not vouch for: one statement joins them to memories under the filters.
      if (unknown) {
        const live = this.repo.liveIds(apiKeyId, unknown, f);
        for (const c of out) if (c.id === null) c.id = live.get(c.rowId) ?? null;
      }
      return out;
    };
    let fetch = want;
    let eligible: number | null = null;
    for (let pass = 0; ; pass++) {
      const candidates = scanned(fetch) ?? this.repo.knnCandidates(apiKeyId, blob, fetch, ix.quantization, f);
      const hits = candidates.filter((c): c is KnnCandidate & { id: string } => c.id !== null);
      // Fewer candidates than asked for means the partition is exhausted: nothing more exists.
      if (hits.length >= want || candidates.length < fetch) return hits.slice(0, want).map(toHit);
      eligible ??= this.repo.countEligible(apiKeyId, f);
      if (hits.length >= eligible) return hits.map(toHit);
      if (eligible <= this.exactScanMaxRows || fetch >= VEC0_MAX_K) break;
      fetch = Math.min(pass === 0 ? want * OVERFETCH : fetch * 2, VEC0_MAX_K);
    }
    // Either the filters are selective or vec0's k cap was reached: rank the eligible rows exactly.
    return this.repo.exactScan(apiKeyId, blob, want, ix.quantization, f).map(toHit);
  }

  async search(q: VectorSearchQuery): Promise<VectorHit[]> {
    if (q.signal?.aborted) throw new VectorUnavailableError('aborted', 'the search was cancelled');
    return this.knn(q.apiKeyId, q.vector, q.k, q.filter, q.known);
  }

  async count(): Promise<number> {
    return this.vecLoaded && this.repo.tableExists() ? this.repo.rowCount() : 0;
  }

  async health(): Promise<VectorStoreHealth> {
    if (!this.vecLoaded) return { ok: false, reason: 'sqlite-vec is not loaded' };
    const meta = this.repo.readMeta();
    if (!this.repo.tableExists() || meta.signature === null) return { ok: false, reason: 'no vector index yet (built by the reindex job once an embedding source is configured)' };
    return { ok: true, reason: `sqlite-vec active, dim=${meta.activeDim}` };
  }

  /** Row count, pending reindex count and the active signature. */
  stats(): VecStats {
    const meta = this.repo.readMeta();
    const rowCount = this.vecLoaded && this.repo.tableExists() ? this.repo.rowCount() : 0;
    return {
      available: this.vecLoaded,
      rowCount,
      needsReindex: this.repo.countPending(),
      activeDim: meta.activeDim,
      signature: meta.signature,
      lastResetAt: meta.lastResetAt,
    };
  }

  /** Up to `limit` memories still needing a vector, after `afterRowId`, in memory_id order. */
  pendingReindex(limit: number, afterRowId = 0): PendingReindexRow[] {
    return this.repo.pendingReindex(limit, afterRowId);
  }

  /** How many memories still need a vector. */
  countPending(): number {
    return this.repo.countPending();
  }

  /** Flags every memory for reindex without touching the table; returns how many flags changed. */
  markAllNeedsReindex(): number {
    return this.db.transaction(() => this.repo.markAllNeedsReindex()).immediate();
  }

  /** Deletes vectors whose memory no longer exists, at most `limit` (the repair sweep); 0 without sqlite-vec or a table. */
  pruneOrphans(limit = 1000): number {
    if (!this.vecLoaded || !this.repo.tableExists()) return 0;
    // Found outside the write lock (a scan of every vector's id), deleted under it after checking each memory is still gone.
    const candidates = this.repo.orphanCandidates(limit);
    if (candidates.length === 0) return 0;
    return this.db.transaction(() => this.repo.deleteOrphans(candidates)).immediate();
  }
}

