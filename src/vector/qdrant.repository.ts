import type { Db } from '../db/connection';
import { candidateFilterSql, type CandidateFilter } from '../db/candidate-filter';
import { StatementCache } from '../db/statement-cache';
import type { VecQuantization } from './types';

/** A memory as a Qdrant point's payload needs it. */
export interface PointSourceRow {
  rowId: number;
  id: string;
  apiKeyId: string;
  sessionId: string | null;
  type: string;
  key: string | null;
  content: string;
  metadata: string;
  createdAt: string;
  expiresAt: string | null;
}

/** Turns a vec0 blob back into floats: float32 as stored, int8 (`vec_quantize_int8(…, 'unit')`) scaled back to [-1, 1]. */
export function blobToVector(blob: Buffer, quantization: VecQuantization): Float32Array {
  if (quantization === 'int8') {
    const out = new Float32Array(blob.length);
    for (let i = 0; i < blob.length; i++) out[i] = blob.readInt8(i) / 127;
    return out;
  }
  const copy = Buffer.from(blob);
  return new Float32Array(copy.buffer, copy.byteOffset, copy.byteLength / 4);
}

/** The SQLite reads the Qdrant tier needs: point sources, the vectors sqlite-vec holds, and the re-check of hits. */
export class QdrantRepository {
  private readonly stmts: StatementCache;

  constructor(private readonly db: Db) {
    this.stmts = new StatementCache(db);
  }

  private vecTableExists(): boolean {
    return this.stmts.get("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'vec_memories'").get() !== undefined;
  }

  /** The memories with these row ids (missing ones are simply absent). */
  sources(rowIds: number[]): PointSourceRow[] {
    if (rowIds.length === 0) return [];
    return this.stmts
      .get(
        `SELECT memory_id AS rowId, id, api_key_id AS apiKeyId, session_id AS sessionId, type, key, content, metadata,
                created_at AS createdAt, expires_at AS expiresAt
         FROM memories WHERE memory_id IN (SELECT value FROM json_each(?))`,
      )
      .all(JSON.stringify(rowIds)) as PointSourceRow[];
  }

  /** Row ids of the memories with these public ids (missing ones are absent). */
  rowIdsOf(memoryIds: string[]): Map<string, number> {
    if (memoryIds.length === 0) return new Map();
    const rows = this.stmts.get('SELECT id, memory_id AS rowId FROM memories WHERE id IN (SELECT value FROM json_each(?))').all(JSON.stringify(memoryIds)) as {
      id: string;
      rowId: number;
    }[];
    return new Map(rows.map((r) => [r.id, r.rowId]));
  }

  /** The vector sqlite-vec holds for each row (rows without one are absent). */
  vectors(rowIds: number[], quantization: VecQuantization): Map<number, Float32Array> {
    const out = new Map<number, Float32Array>();
    if (rowIds.length === 0 || !this.vecTableExists()) return out;
    // vec0 0.1.9 point lookups want the primary key as an integer (BigInt), one at a time. Prepared per
    // call: the reindex job drops and recreates vec_memories.
    const stmt = this.db.prepare('SELECT embedding FROM vec_memories WHERE memory_id = ?');
    for (const id of rowIds) {
      const r = stmt.get(BigInt(id)) as { embedding: Buffer } | undefined;
      if (r) out.set(id, blobToVector(r.embedding, quantization));
    }
    return out;
  }

  /** Up to `limit` memory row ids after `afterRowId`, in order (the backfill's pages). */
  rowIdPage(afterRowId: number, limit: number): number[] {
    return (this.stmts.get('SELECT memory_id FROM memories WHERE memory_id > ? ORDER BY memory_id LIMIT ?').pluck().all(afterRowId, limit) as number[]).map(Number);
  }

  /** How many memories exist after `afterRowId`. */
  countAfter(afterRowId: number): number {
    return this.stmts.get('SELECT count(*) FROM memories WHERE memory_id > ?').pluck().get(afterRowId) as number;
  }

  /** Which of these rows pass the tenant/expiry/retention/session filter right now. */
  liveRowIds(rowIds: number[], f: CandidateFilter): Set<number> {
    if (rowIds.length === 0) return new Set();
    const params: Record<string, unknown> = { ids: JSON.stringify(rowIds) };
    const where = candidateFilterSql(f, 'm', params);
    const rows = this.stmts.get(`SELECT m.memory_id AS rowId, m.id FROM memories m WHERE m.memory_id IN (SELECT value FROM json_each(@ids)) AND ${where}`).all(params) as {
      rowId: number;
      id: string;
    }[];
    return new Set(rows.map((r) => r.rowId));
  }

  /** Public ids of rows. */
  idsOf(rowIds: number[]): Map<number, string> {
    if (rowIds.length === 0) return new Map();
    const rows = this.stmts.get('SELECT memory_id AS rowId, id FROM memories WHERE memory_id IN (SELECT value FROM json_each(?))').all(JSON.stringify(rowIds)) as {
      rowId: number;
      id: string;
    }[];
    return new Map(rows.map((r) => [r.rowId, r.id]));
  }

  /** Which of these row ids no longer exist as memories (orphaned points). */
  missing(rowIds: number[]): number[] {
    if (rowIds.length === 0) return [];
    const present = new Set(this.idsOf(rowIds).keys());
    return rowIds.filter((id) => !present.has(id));
  }
}
