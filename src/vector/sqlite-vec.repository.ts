import type { Db } from '../db/connection';
import { candidateFilterSql, type CandidateFilter } from '../db/candidate-filter';
import { ChangeLog, logHeadSql } from '../db/change-log';
import { StatementCache } from '../db/statement-cache';
import type { PendingReindexRow, VecMeta, VecQuantization } from './types';

/** The candidate filter without the tenant (the vec0 partition carries it). */
export type VecFilterParams = Omit<CandidateFilter, 'apiKeyId'>;

/** A KNN candidate; `id` is null when the joined memory is filtered out (expired, old, other session) or gone. */
export interface KnnCandidate {
  rowId: number;
  distance: number;
  id: string | null;
}

/** A scored row that passed the filters. */
export interface ScoredRow {
  rowId: number;
  distance: number;
  id: string;
}

/** The change log's read side: what a reader needs to know whether its copy of a tenant is current. */
export interface VecLogState {
  generation: number;
  prunedBelow: number;
}

/**
 * What a search needs to know of the stored index and its change log, read in one statement
 * (`searchState`): the meta singleton, whether vec_memories exists, the log's generation, prune
 * mark and head.
 */
export interface VecSearchState {
  meta: VecMeta;
  tableExists: boolean;
  log: VecLogState;
  /** The log's newest sequence number (0 when empty and never written). */
  head: number;
}

/** Log entries kept past the newest; an in-memory copy older than that reloads its tenant. */
const LOG_KEEP = 200_000;
/** The log is pruned when a sequence number is a multiple of this. */
const LOG_PRUNE_EVERY = 4096;

/** searchState's one statement (a constant: built once, not per search). */
const SEARCH_STATE_SQL = `SELECT m.active_dim, m.embedding_signature, m.last_reset_at, m.vec_loaded, s.generation, s.pruned_below,
    ${logHeadSql('memory_vec_log')},
    EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'vec_memories'),
    m.id
  FROM (SELECT 1) LEFT JOIN memory_vec_meta m ON m.id = 1 LEFT JOIN memory_vec_log_state s ON s.id = 1`;

/** The SQL expression for a float32 blob parameter in the table's storage type ('unit' is right: vectors are normalised). */
function queryExpr(param: string, q: VecQuantization): string {
  return q === 'int8' ? `vec_quantize_int8(${param}, 'unit')` : param;
}

/** The only SQL over `vec_memories`, `memory_vec_meta` and the `needs_reindex` flags. */
export class VectorRepository {
  private readonly stmts: StatementCache;
  /** memory_vec_log, appended by every vector write here (logChange). */
  readonly log: ChangeLog;

  constructor(private readonly db: Db) {
    this.stmts = new StatementCache(db);
    this.log = new ChangeLog(db, 'memory_vec_log');
  }

  private stmt(sql: string) {
    return this.stmts.get(sql);
  }

  /** The last meta parsed by `searchState`, returned again while its four columns read the same. */
  private lastMeta: VecMeta = { activeDim: null, signature: null, lastResetAt: null, tableCreated: false };

  /**
   * The meta, the table's existence, the log state and the log head in one statement (issue #14: a
   * search used to read them in five statements, and the meta twice more: ~6 % of a memory-on chat's profile). Each value is as current as a read of
   * its own: nothing is remembered between calls but the parsed meta object, reused while it reads
   * the same.
   */
  searchState(): VecSearchState {
    const r = this.stmt(SEARCH_STATE_SQL)
      .raw(true)
      .get() as [number | null, string | null, string | null, number | null, number | null, number | null, number, number, number | null];
    const [activeDim, signature, lastResetAt, vecLoaded, generation, prunedBelow, head, tableExists, metaId] = r;
    let meta = this.lastMeta;
    const tableCreated = vecLoaded === 1;
    if (metaId === null) {
      // No meta row: what readMeta reports then.
      if (meta.activeDim !== null || meta.signature !== null || meta.lastResetAt !== null || meta.tableCreated) {
        meta = Object.freeze({ activeDim: null, signature: null, lastResetAt: null, tableCreated: false });
      }
    } else if (meta.activeDim !== activeDim || meta.signature !== signature || meta.lastResetAt !== lastResetAt || meta.tableCreated !== tableCreated) {
      meta = Object.freeze({ activeDim, signature, lastResetAt, tableCreated });
    }
    this.lastMeta = meta;
    return { meta, tableExists: tableExists === 1, log: { generation: generation ?? 0, prunedBelow: prunedBelow ?? 0 }, head };
  }

  /** The signature the table was built for (null before the first rebuild); one narrow read. */
  readSignature(): string | null {
    const r = this.stmt('SELECT embedding_signature FROM memory_vec_meta WHERE id = 1').pluck(true).get() as string | null | undefined;
    return r ?? null;
  }

  readMeta(): VecMeta {
    const r = this.stmt('SELECT active_dim, embedding_signature, last_reset_at, vec_loaded FROM memory_vec_meta WHERE id = 1').get() as
      | { active_dim: number | null; embedding_signature: string | null; last_reset_at: string | null; vec_loaded: number }
      | undefined;
    if (!r) return { activeDim: null, signature: null, lastResetAt: null, tableCreated: false };
    return { activeDim: r.active_dim, signature: r.embedding_signature, lastResetAt: r.last_reset_at, tableCreated: r.vec_loaded === 1 };
  }

  writeMeta(m: VecMeta): void {
    this.stmt(
      `INSERT INTO memory_vec_meta (id, active_dim, embedding_signature, last_reset_at, vec_loaded) VALUES (1, ?, ?, ?, ?)
       ON CONFLICT(id) DO UPDATE SET active_dim = excluded.active_dim, embedding_signature = excluded.embedding_signature,
         last_reset_at = excluded.last_reset_at, vec_loaded = excluded.vec_loaded`,
    ).run(m.activeDim, m.signature, m.lastResetAt, m.tableCreated ? 1 : 0);
  }

  /** Whether vec_memories is in the schema (readable even when sqlite-vec is not loaded). */
  tableExists(): boolean {
    return this.stmt("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'vec_memories'").get() !== undefined;
  }

  /** Drops and recreates vec_memories for `dim` dimensions in the given storage type (needs sqlite-vec). */
  recreateTable(dim: number, quantization: VecQuantization): void {
    if (!Number.isInteger(dim) || dim <= 0) throw new RangeError(`invalid vector dimension ${dim}`);
    const column = quantization === 'int8' ? `int8[${dim}]` : `float[${dim}]`;
    // Cached statements may reference the old table; drop them with it.
    this.stmts.clear();
    this.db.exec('DROP TABLE IF EXISTS vec_memories');
    this.db.exec(
      `CREATE VIRTUAL TABLE vec_memories USING vec0(memory_id INTEGER PRIMARY KEY, api_key_id TEXT PARTITION KEY, embedding ${column} distance_metric=cosine)`,
    );
  }

  markAllNeedsReindex(): number {
    return this.stmt('UPDATE memories SET needs_reindex = 1 WHERE needs_reindex <> 1').run().changes;
  }

  /** The owner and current content hash of a memory, or null when it no longer exists. */
  memoryForVector(rowId: number): { apiKeyId: string; contentHash: string } | null {
    const r = this.stmt('SELECT api_key_id, content_hash FROM memories WHERE memory_id = ?').get(rowId) as
      | { api_key_id: string; content_hash: string }
      | undefined;
    return r ? { apiKeyId: r.api_key_id, contentHash: r.content_hash } : null;
  }

  /** Clears needs_reindex only while the row still holds the embedded text (a newer edit keeps its flag). */
  clearNeedsReindex(rowId: number, contentHash: string): boolean {
    return this.stmt('UPDATE memories SET needs_reindex = 0 WHERE memory_id = ? AND content_hash = ?').run(rowId, contentHash).changes > 0;
  }

  // vec0 0.1.9 rejects primary keys bound as JS numbers (bound as REAL), hence BigInt.
  /** Deletes a memory's vector and (unless `log` is false: an insert follows and logs) logs the change under the partition it was in (0007). */
  deleteVector(rowId: number, log = true): boolean {
    const owner = this.stmt('SELECT api_key_id AS apiKeyId FROM vec_memories WHERE memory_id = ?').get(BigInt(rowId)) as { apiKeyId: string } | undefined;
    if (!owner) return false;
    this.stmt('DELETE FROM vec_memories WHERE memory_id = ?').run(BigInt(rowId));
    if (log) this.logChange(owner.apiKeyId, rowId);
    return true;
  }

  /** Whether the memory has a vector row (a vec0 point lookup by primary key, ~1 µs). */
  vectorExists(rowId: number): boolean {
    return this.stmt('SELECT 1 FROM vec_memories WHERE memory_id = ?').get(BigInt(rowId)) !== undefined;
  }

  /**
   * Overwrites a float vector in its chunk slot: about a third of the CPU of a delete + insert
   * (measured on 100k rows, vec0 0.1.9). Float tables only: 0.1.9 rejects an UPDATE to
   * vec_quantize_int8's output ("expected to be of type int8").
   */
  updateFloatVector(rowId: number, apiKeyId: string, blob: Buffer): boolean {
    const changed = this.stmt('UPDATE vec_memories SET embedding = ? WHERE memory_id = ?').run(blob, BigInt(rowId)).changes > 0;
    if (changed) this.logChange(apiKeyId, rowId);
    return changed;
  }

  insertVector(rowId: number, apiKeyId: string, blob: Buffer, quantization: VecQuantization): void {
    this.stmt(`INSERT INTO vec_memories (memory_id, api_key_id, embedding) VALUES (?, ?, ${queryExpr('?', quantization)})`).run(
      BigInt(rowId),
      apiKeyId,
      blob,
    );
    this.logChange(apiKeyId, rowId);
  }

  /**
   * Appends a vector change to memory_vec_log (in the writer's transaction) and, every
   * LOG_PRUNE_EVERY entries, drops all but the newest LOG_KEEP, recording the cut in pruned_below.
   */
  private logChange(apiKeyId: string, rowId: number): void {
    const seq = Number(this.stmt('INSERT INTO memory_vec_log (api_key_id, memory_id) VALUES (?, ?)').run(apiKeyId, rowId).lastInsertRowid);
    if (seq % LOG_PRUNE_EVERY === 0 && seq > LOG_KEEP) {
      const cut = seq - LOG_KEEP;
      this.stmt('DELETE FROM memory_vec_log WHERE seq <= ?').run(cut);
      this.stmt('UPDATE memory_vec_log_state SET pruned_below = max(pruned_below, ?) WHERE id = 1').run(cut);
    }
  }

  /** Empties the log and bumps the generation (a rebuild): every in-memory copy reloads. */
  resetLog(): void {
    this.stmt('DELETE FROM memory_vec_log').run();
    this.stmt(`UPDATE memory_vec_log_state SET generation = generation + 1, pruned_below = ${logHeadSql('memory_vec_log')} WHERE id = 1`).run();
  }

  logState(): VecLogState {
    const r = this.stmt('SELECT generation, pruned_below AS prunedBelow FROM memory_vec_log_state WHERE id = 1').get() as VecLogState | undefined;
    return r ?? { generation: 0, prunedBelow: 0 };
  }

  /** A memory's stored vector in the tenant's partition (raw bytes: float32 or int8), or null when it has none there. */
  vectorOf(apiKeyId: string, rowId: number): Buffer | null {
    const r = this.stmt('SELECT api_key_id AS apiKeyId, embedding FROM vec_memories WHERE memory_id = ?').get(BigInt(rowId)) as
      | { apiKeyId: string; embedding: Buffer }
      | undefined;
    return r && r.apiKeyId === apiKeyId ? r.embedding : null;
  }

  /** Every vector of the tenant's partition (raw bytes), streamed. */
  *partitionVectors(apiKeyId: string): IterableIterator<{ rowId: number; embedding: Buffer }> {
    yield* this.stmt('SELECT memory_id AS rowId, embedding FROM vec_memories WHERE api_key_id = ?').iterate(apiKeyId) as IterableIterator<{
      rowId: number;
      embedding: Buffer;
    }>;
  }

  /** How many memories the tenant has (an upper bound on its vectors; an index count). */
  countTenantMemories(apiKeyId: string): number {
    return (this.stmt('SELECT count(*) AS n FROM memories WHERE api_key_id = ?').get(apiKeyId) as { n: number }).n;
  }

  /** The public ids of those of `rowIds` that are the tenant's and pass the filters. */
  liveIds(apiKeyId: string, rowIds: number[], f: VecFilterParams): Map<number, string> {
    const params: Record<string, unknown> = { ids: JSON.stringify(rowIds) };
    const filters = candidateFilterSql({ ...f, apiKeyId }, 'm', params);
    // CROSS JOIN pins the id list as the outer loop (a primary-key lookup each): with `IN (json_each)`
    // the planner walked the tenant's index instead, ~3 ms at 10k rows per key.
    const rows = this.stmt(
      `SELECT m.memory_id AS rowId, m.id AS id FROM json_each(@ids) AS j CROSS JOIN memories m ON m.memory_id = j.value WHERE ${filters}`,
    ).all(params) as { rowId: number; id: string }[];
    return new Map(rows.map((r) => [r.rowId, r.id]));
  }

  /**
   * The tenant's k nearest vectors (the tenant is the vec0 partition constraint, so other tenants
   * never take slots), each joined to its memory; filtered-out rows come back with a null id so the
   * caller can tell "filtered" from "partition exhausted".
   */
  knnCandidates(apiKeyId: string, blob: Buffer, k: number, quantization: VecQuantization, f: VecFilterParams): KnnCandidate[] {
    const params: Record<string, unknown> = { query: blob, k };
    const filters = candidateFilterSql({ ...f, apiKeyId }, 'm', params);
    return this.stmt(
      `WITH knn AS MATERIALIZED (
         SELECT memory_id, distance FROM vec_memories
         WHERE embedding MATCH ${queryExpr('@query', quantization)} AND k = @k AND api_key_id = @apiKeyId
       )
       SELECT knn.memory_id AS rowId, knn.distance AS distance, m.id AS id
       FROM knn LEFT JOIN memories m ON m.memory_id = knn.memory_id AND ${filters}
       ORDER BY knn.distance, knn.memory_id`,
    ).all(params) as KnnCandidate[];
  }

  /** Exact nearest rows among the memories that pass the filters (driven from `memories`, vec0 point lookups). */
  exactScan(apiKeyId: string, blob: Buffer, limit: number, quantization: VecQuantization, f: VecFilterParams): ScoredRow[] {
    const params: Record<string, unknown> = { query: blob, limit };
    const filters = candidateFilterSql({ ...f, apiKeyId }, 'm', params);
    // CROSS JOIN pins memories as the outer loop: a vec0 full scan would ignore the filters' indexes.
    return this.stmt(
      `SELECT m.memory_id AS rowId, m.id AS id, vec_distance_cosine(v.embedding, ${queryExpr('@query', quantization)}) AS distance
       FROM memories m CROSS JOIN vec_memories v ON v.memory_id = m.memory_id
       WHERE ${filters}
       ORDER BY distance, m.memory_id
       LIMIT @limit`,
    ).all(params) as ScoredRow[];
  }

  /** How many of the tenant's memories pass the filters (an upper bound on what a search can return). */
  countEligible(apiKeyId: string, f: VecFilterParams): number {
    const params: Record<string, unknown> = {};
    const filters = candidateFilterSql({ ...f, apiKeyId }, 'm', params);
    return (this.stmt(`SELECT count(*) AS n FROM memories m WHERE ${filters}`).get(params) as { n: number }).n;
  }

  rowCount(): number {
    return (this.stmt('SELECT count(*) AS n FROM vec_memories').get() as { n: number }).n;
  }

  countPending(): number {
    return (this.stmt('SELECT count(*) AS n FROM memories WHERE needs_reindex = 1').get() as { n: number }).n;
  }

  /** Flagged memories after a memory_id cursor, in memory_id order (the flag itself is the checkpoint). */
  pendingReindex(limit: number, afterRowId: number): PendingReindexRow[] {
    return this.stmt(
      `SELECT memory_id AS rowId, id, content, content_hash AS contentHash, api_key_id AS apiKeyId
       FROM memories WHERE needs_reindex = 1 AND memory_id > ? ORDER BY memory_id LIMIT ?`,
    ).all(afterRowId, limit) as PendingReindexRow[];
  }

  /**
   * Memory ids that have a vector but no memory (left behind by a process that ran without sqlite-vec, or a
   * delete made outside Engram), at most `limit`. Read from vec0's own rowid table (`vec_memories_rowids`,
   * whose rowid is the memory_id): 3 ms at 100k vectors and 39 ms at 1M, where the same anti-join over vec0
   * itself reads every chunk (32 / 410 ms). A sqlite-vec without that table is asked through vec0.
   */
  orphanCandidates(limit: number): number[] {
    const sql = (from: string, id: string) => `SELECT ${id} AS rowId FROM ${from} WHERE ${id} NOT IN (SELECT memory_id FROM memories) LIMIT ?`;
    let rows: { rowId: number }[];
    try {
      rows = this.stmt(sql('vec_memories_rowids', 'rowid')).all(limit) as { rowId: number }[];
    } catch (err) {
      if (!/no such (table|column)/.test((err as Error).message)) throw err;
      rows = this.stmt(sql('vec_memories', 'memory_id')).all(limit) as { rowId: number }[];
    }
    return rows.map((r) => r.rowId);
  }

  /** Deletes the vectors of `rowIds` whose memory is still gone (call in a write transaction); returns how many. */
  deleteOrphans(rowIds: readonly number[]): number {
    const exists = this.stmt('SELECT 1 FROM memories WHERE memory_id = ?');
    return rowIds.filter((id) => exists.get(id) === undefined && this.deleteVector(id)).length;
  }
}
