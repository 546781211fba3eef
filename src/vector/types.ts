/** How vectors are stored in sqlite-vec: float32, or int8 via `vec_quantize_int8(?, 'unit')`. */
export type VecQuantization = 'none' | 'int8';

/** The parts of an embedding resolution that identify its vector space. */
export interface SignatureInput {
  source: string | null;
  model: string | null;
  /** Remote sources sign with endpoint + model so two endpoints never share vectors. */
  identity?: string | null;
  /** Measured from the first vector; null while unknown. */
  dimensions: number | null;
}

/** The `memory_vec_meta` singleton. */
export interface VecMeta {
  activeDim: number | null;
  signature: string | null;
  lastResetAt: string | null;
  /** The `vec_loaded` column: the vec_memories table was created (not "the extension is loaded"). */
  tableCreated: boolean;
}

/** Filters applied to every vector search (by joining `memories`). */
export interface KnnFilter {
  /** Rows with `expires_at <= nowIso` are excluded. */
  nowIso: string;
  /** Retention: only rows created or re-asserted (updated_at) at or after this instant. */
  freshAfterIso?: string | null;
  /** Only this session's rows; null, undefined or '' means no session filter. */
  sessionId?: string | null;
  /** When set, the search refuses (VectorUnavailableError) unless the index has this signature. */
  signature?: string;
}

/** One vector search hit; `score` is 1 - cosine distance clamped to [0, 1]. */
export interface VectorHit {
  rowId: number;
  id: string;
  distance: number;
  score: number;
}

/** One vector to write for a memory; `contentHash` is the hash of the text that was embedded. */
export interface VectorUpsertRow {
  rowId: number;
  apiKeyId: string;
  vector: Float32Array;
  contentHash: string;
}

/** What one upsert did. */
export interface UpsertResult {
  /** A vector row now exists for the memory. */
  stored: boolean;
  /** needs_reindex is now 0 because the row's content hash still matched (false: a newer edit keeps its flag). */
  cleared: boolean;
  /** Why nothing was stored: an all-zero vector (keyword-only memory) or a memory deleted meanwhile. */
  skipped: 'zero_vector' | 'memory_missing' | null;
}

/** Totals of an upsertMany batch. */
export interface UpsertManyResult {
  stored: number;
  cleared: number;
  zeroVectors: number;
  missing: number;
}

/** Vector tier figures for health and the dashboard. */
export interface VecStats {
  /** sqlite-vec is loaded into this connection. */
  available: boolean;
  rowCount: number;
  needsReindex: number;
  activeDim: number | null;
  signature: string | null;
  lastResetAt: string | null;
}

/** A memory waiting for (re-)embedding. */
export interface PendingReindexRow {
  rowId: number;
  id: string;
  content: string;
  contentHash: string;
  apiKeyId: string;
}

/**
 * What the caller already knows of a row's liveness under the search's tenant and filters: the public
 * id when the row is the tenant's and passes them, null when it does not, undefined when the caller
 * does not know (the store then asks SQLite). Only an answer as current as SQLite may be given.
 */
export type KnownLiveness = (rowId: number) => string | null | undefined;

/** One vector search: the tenant's k nearest live memories (tenant, expiry, retention and session are the store's job). */
export interface VectorSearchQuery {
  apiKeyId: string;
  vector: Float32Array;
  k: number;
  filter: KnnFilter;
  signal?: AbortSignal;
  /** Liveness the caller holds (sqlite-vec's scan copy uses it for the rows it covers; other stores ignore it). */
  known?: KnownLiveness;
}

/** Whether a store can serve searches right now, and why not. */
export interface VectorStoreHealth {
  ok: boolean;
  reason: string;
}

/**
 * One vector tier behind one interface (STYLE 13): sqlite-vec today, Qdrant next. Tenant,
 * session and expiry filtering is part of `search`, never the caller's job; a store that cannot
 * answer throws VectorUnavailableError so retrieval falls back to keywords with a reason.
 */
export interface VectorStore {
  readonly kind: 'sqlite-vec' | 'qdrant';
  /** The store can be used at all in this process (extension loaded, client configured). */
  available(): boolean;
  /** The signature the stored vectors were built for; null before the first build. */
  activeSignature(): string | null;
  /**
   * True when `search` itself refuses, with VectorUnavailableError 'index_not_built' or
   * 'signature_mismatch', whenever the index is not built for `filter.signature` (reading the
   * signature in the statement it reads anyway): a caller may then leave its own activeSignature
   * check to the error path.
   */
  readonly searchChecksSignature?: boolean;
  /** The signature vectors of this embedding resolution get in this store (null while the width is unknown). */
  signatureFor(resolution: SignatureInput): string | null;
  /** Writes vectors; with `expectedSignature`, refuses when the index was rebuilt for another model meanwhile. */
  upsert(rows: VectorUpsertRow[], expectedSignature?: string): Promise<UpsertManyResult>;
  /** Removes the vectors of these memories; returns how many existed. */
  delete(rowIds: number[]): Promise<number>;
  search(query: VectorSearchQuery): Promise<VectorHit[]>;
  /** How many vectors the store holds. */
  count(): Promise<number>;
  health(): Promise<VectorStoreHealth>;
}

export type VectorUnavailableReason =
  | 'extension_not_loaded'
  | 'index_not_built'
  | 'signature_mismatch'
  | 'dimension_mismatch'
  | 'zero_query_vector'
  | 'aborted'
  | 'timeout'
  | 'unhealthy';

/** The vector tier cannot answer; callers fall back to keyword search. */
export class VectorUnavailableError extends Error {
  readonly code = 'vector_unavailable';
  constructor(
    readonly reason: VectorUnavailableReason,
    message: string,
  ) {
    super(message);
    this.name = 'VectorUnavailableError';
  }
}

export type VectorInputReason = 'dimension_mismatch' | 'invalid_vector' | 'tenant_mismatch' | 'invalid_signature';

/** A caller passed a vector, signature or tenant that can never be stored (a bug, not a transient state). */
export class VectorInputError extends Error {
  readonly code = 'vector_input_invalid';
  constructor(
    readonly reason: VectorInputReason,
    message: string,
  ) {
    super(message);
    this.name = 'VectorInputError';
  }
}
