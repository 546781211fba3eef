import { catchUp, RELOAD } from '../db/change-log';
import { DotScanMatrix, dotScanModule, type ScanHit } from './dot-scan';
import type { VectorRepository } from './sqlite-vec.repository';
import type { VecQuantization } from './types';

/** The stored table a copy belongs to: a rebuild (new signature, reset instant or log generation) invalidates every copy. */
export interface VecTableIdentity {
  signature: string;
  lastResetAt: string | null;
  dim: number;
  quantization: VecQuantization;
}

/** The change log's generation and head, read by the caller (sqlite-vec.repository.ts searchState). */
export interface VecLogSnapshot {
  log: { generation: number };
  head: number;
}

interface TenantCopy {
  matrix: DotScanMatrix;
  /** The change-log sequence number this copy reflects. */
  seq: number;
}

/** A vec0 row's raw bytes as an L2-normalised float32 vector (int8 rows are dequantised, then normalised), or null for a zero vector. */
export function decodeVector(raw: Buffer, dim: number, quantization: VecQuantization): Float32Array | null {
  const out = new Float32Array(dim);
  if (quantization === 'int8') {
    if (raw.byteLength !== dim) return null;
    for (let i = 0; i < dim; i++) out[i] = raw.readInt8(i);
  } else {
    if (raw.byteLength !== dim * 4) return null;
    new Uint8Array(out.buffer).set(raw);
  }
  let sum = 0;
  for (let i = 0; i < dim; i++) sum += out[i]! * out[i]!;
  if (!(sum > 0)) return null;
  const inv = 1 / Math.sqrt(sum);
  for (let i = 0; i < dim; i++) out[i]! *= inv;
  return out;
}

/**
 * Per-tenant in-memory copies of vec_memories, searched by a WebAssembly SIMD scan (issue #14).
 * A copy is loaded whole at the tenant's first search and brought up to date before every search
 * from memory_vec_log (migration 0007: every vector write appends (tenant, memory_id) in its
 * transaction, whichever process made it). Copies past `budgetBytes` are dropped least recently
 * searched first; a tenant that alone exceeds the budget is not copied (the caller uses vec0).
 * Only this tenant's rows are ever scanned: tenant restriction before the scan.
 */
export class VecScanCache {
  private readonly copies = new Map<string, TenantCopy>();
  /** The table and log generation the copies belong to. */
  private identity: (VecTableIdentity & { generation: number }) | null = null;
  private held = 0;

  constructor(
    private readonly repo: VectorRepository,
    private readonly budgetBytes: number,
  ) {}

  /** Whether copies can be made at all (a budget and WebAssembly SIMD). */
  enabled(): boolean {
    return this.budgetBytes > 0 && dotScanModule() !== null;
  }

  /** Bytes held by all copies. */
  get bytesHeld(): number {
    return this.held;
  }

  get tenants(): number {
    return this.copies.size;
  }

  clear(): void {
    this.copies.clear();
    this.held = 0;
  }

  /**
   * The tenant's k nearest rows by exact cosine over its current vectors (filters not applied:
   * the caller joins memories), or null when the tenant cannot be copied (disabled, over budget).
   */
  search(apiKeyId: string, table: VecTableIdentity, unit: Float32Array, k: number, log?: VecLogSnapshot): ScanHit[] | null {
    const copy = this.current(apiKeyId, table, log);
    return copy ? copy.matrix.search(unit, k) : null;
  }

  /** `snapshot`: the log's generation and head as the caller just read them (one statement with the meta), else read here. */
  private current(apiKeyId: string, table: VecTableIdentity, snapshot: VecLogSnapshot | undefined): TenantCopy | null {
    const module = dotScanModule();
    if (this.budgetBytes <= 0 || !module) return null;
    const generation = snapshot ? snapshot.log.generation : this.repo.logState().generation;
    const id = this.identity;
    if (
      !id ||
      id.signature !== table.signature ||
      id.lastResetAt !== table.lastResetAt ||
      id.generation !== generation ||
      id.dim !== table.dim ||
      id.quantization !== table.quantization
    ) {
      this.clear();
      this.identity = { signature: table.signature, lastResetAt: table.lastResetAt, generation, dim: table.dim, quantization: table.quantization };
    }
    const log = this.repo.log;
    let copy = this.copies.get(apiKeyId);
    // The catch-up rule (db/change-log.ts); the head as the caller read it with the generation when it did.
    const step = copy ? catchUp(log, apiKeyId, copy.seq, snapshot ? snapshot.head : log.head()) : RELOAD;
    if (copy && step.kind === 'current') {
      this.copies.delete(apiKeyId); // re-inserted: Map order is the LRU order
      this.copies.set(apiKeyId, copy);
      return copy;
    }
    if (copy && step.kind === 'reload') {
      this.drop(apiKeyId);
      copy = undefined;
    }
    if (copy && step.kind === 'apply') {
      this.copies.delete(apiKeyId); // re-inserted below: Map order is the LRU order
      const before = copy.matrix.bytes;
      // Room for the new rows, grown at most to what the budget can hold: doubling a copy of more
      // than half the budget would push it over, drop it, and reload it whole at the next search
      // (then double again at the next insert), so a steadily written tenant was reloaded per write.
      const need = copy.matrix.size + step.rowIds.filter((id) => !copy!.matrix.has(id)).length;
      if (need > copy.matrix.rowCapacity) {
        copy.matrix.reserve(Math.max(need, Math.min(copy.matrix.rowCapacity * 2, DotScanMatrix.capacityWithin(this.budgetBytes, table.dim))));
      }
      for (const rowId of step.rowIds) {
        const raw = this.repo.vectorOf(apiKeyId, rowId);
        const unit = raw ? decodeVector(raw, table.dim, table.quantization) : null;
        if (unit) copy.matrix.set(rowId, unit);
        else copy.matrix.delete(rowId);
      }
      copy.seq = step.head;
      this.held += copy.matrix.bytes - before;
      this.copies.set(apiKeyId, copy);
    } else {
      const rows = this.repo.countTenantMemories(apiKeyId);
      // The matrix below is built for max(64, rows) rows in whole WebAssembly pages: checked against what the budget
      // holds (capacityWithin counts the page rounding), not bytesFor(rows), which a copy up to a page larger passed,
      // was built, evicted every other tenant's copy and then dropped itself, at every search of that tenant.
      if (Math.max(64, rows) > DotScanMatrix.capacityWithin(this.budgetBytes, table.dim)) return null;
      const matrix = new DotScanMatrix(module, table.dim, Math.max(64, rows));
      // The head read first, in the same read transaction as the rows.
      const seq = log.snapshot((head) => {
        for (const r of this.repo.partitionVectors(apiKeyId)) {
          const unit = decodeVector(r.embedding, table.dim, table.quantization);
          if (unit) matrix.set(r.rowId, unit);
        }
        return head;
      });
      copy = { matrix, seq };
      this.copies.set(apiKeyId, copy);
      this.held += matrix.bytes;
    }
    for (const [key] of this.copies) {
      if (this.held <= this.budgetBytes || key === apiKeyId) break;
      this.drop(key);
    }
    if (this.held > this.budgetBytes) {
      this.drop(apiKeyId);
      return null;
    }
    return copy;
  }

  private drop(apiKeyId: string): void {
    const c = this.copies.get(apiKeyId);
    if (!c) return;
    this.held -= c.matrix.bytes;
    this.copies.delete(apiKeyId);
  }
}
