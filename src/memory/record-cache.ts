/**
 * The request path's copy of the memory rows it ranks (issue #14): per API key, the rows retrieval
 * and injection read, so a chat's ranked candidates come from memory instead of a SELECT of ~100
 * whole rows (and a JSON.parse of each row's metadata) per chat.
 *
 * It is kept exactly as current as the key's keyword index (keyword-index.ts): the index's
 * catch-up from memory_kw_log (the triggers on memories log every insert, delete and change of
 * content, key, owner, session, expiry or updated_at, whichever process writes) drops the changed
 * rows here, and a key whose index copy is dropped or reloaded loses its rows here too. Every
 * write path that changes a cached field also sets updated_at (memory.repository.ts `update`), so
 * it logs. Two fields change without a log entry and are therefore not trusted from here: the
 * access count and last access (the caller re-reads them for what it returns), and the reindex
 * flag and content hash (left out of the cached type).
 *
 * Tenant isolation: rows are held per key, a row is only stored under the key it belongs to, and
 * a lookup re-checks the owner, so a key's cache never serves another key's rows.
 */
import type { MemoryRecord } from './types';

/** What the cache holds of a memory: the record without the fields that change unlogged and are not read on the request path. */
export type CachedRecord = Omit<MemoryRecord, 'needsReindex' | 'contentHash'>;

/**
 * Freezes a cached row's metadata all the way down: retrieval hands the same object to every caller that asks for
 * the row, so a caller that changed it would change what the key's later retrievals return; frozen, such a change
 * throws where it is made (strict mode) instead.
 */
function freezeDeep(v: unknown): void {
  if (v === null || typeof v !== 'object' || Object.isFrozen(v)) return;
  Object.freeze(v);
  for (const x of Object.values(v)) freezeDeep(x);
}

/**
 * Rough bytes of a cached record (strings at 2 bytes a character, plus object and map overhead). What
 * retrieval keeps on the row (row-memo.ts) counts too: the folded content for the duplicate check, at
 * most as long as the content, and the relevance score's token haystacks of content, key and metadata,
 * about as long as their texts (plus the three holders' overhead).
 */
function sizeOf(r: CachedRecord, metadataChars: number): number {
  return 480 + 2 * (3 * r.content.length + 2 * r.key.length + r.sessionId.length + r.id.length + r.apiKeyId.length + 2 * metadataChars);
}

interface KeyRows {
  byRow: Map<number, { record: CachedRecord; bytes: number }>;
  rowOf: Map<string, number>;
  bytes: number;
}

/** A key's rows no longer held: emptied, so a view made of them (RecordCache.view) finds nothing. */
function emptied(rows: KeyRows): void {
  rows.byRow.clear();
  rows.rowOf.clear();
}

/** One key's held rows by internal row id (RecordCache.view). */
export class RowView {
  constructor(
    private readonly apiKeyId: string,
    private readonly byRow: ReadonlyMap<number, { record: CachedRecord }>,
  ) {}

  /** The key's row, or undefined when not held. */
  byRowId(rowId: number): CachedRecord | undefined {
    const r = this.byRow.get(rowId)?.record;
    return r !== undefined && r.apiKeyId === this.apiKeyId ? r : undefined;
  }
}

/** Per-key memory rows within a byte budget (least recently used keys dropped first); a budget of 0 holds nothing. */
export class RecordCache {
  private readonly keys = new Map<string, KeyRows>();
  private held = 0;

  constructor(private readonly budgetBytes: number) {}

  /** Whether it holds anything at all (MEMORY_RECORD_CACHE_MB > 0). */
  get enabled(): boolean {
    return this.budgetBytes > 0;
  }

  get bytesHeld(): number {
    return this.held;
  }

  /** Rows held, over all keys. */
  get size(): number {
    let n = 0;
    for (const k of this.keys.values()) n += k.byRow.size;
    return n;
  }

  /** The key's row by internal row id, or undefined when not held. */
  byRowId(apiKeyId: string, rowId: number): CachedRecord | undefined {
    const r = this.keys.get(apiKeyId)?.byRow.get(rowId)?.record;
    return r && r.apiKeyId === apiKeyId ? r : undefined;
  }

  /**
   * The key's rows for a batch of lookups by internal row id (the key looked up once, not per row),
   * or null when none are held. The view follows the key's later invalidations; once the key's rows
   * are dropped (or evicted) it finds nothing, so a view kept past that never serves a row the cache
   * no longer vouches for.
   */
  view(apiKeyId: string): RowView | null {
    const rows = this.keys.get(apiKeyId);
    return rows ? new RowView(apiKeyId, rows.byRow) : null;
  }

  /** The key's row by public id, or undefined when not held. */
  byId(apiKeyId: string, id: string): CachedRecord | undefined {
    const rows = this.keys.get(apiKeyId);
    const rowId = rows?.rowOf.get(id);
    return rowId === undefined ? undefined : this.byRowId(apiKeyId, rowId);
  }

  /** Marks the key most recently used (its rows are the last to go when over budget). */
  touch(apiKeyId: string): void {
    const rows = this.keys.get(apiKeyId);
    if (!rows) return;
    this.keys.delete(apiKeyId);
    this.keys.set(apiKeyId, rows);
  }

  /**
   * Holds a row read from SQLite under `apiKeyId` (ignored when it belongs to another key).
   * `metadataChars`: the stored metadata JSON's length, for the size estimate.
   */
  put(apiKeyId: string, record: CachedRecord, metadataChars: number): void {
    if (!this.enabled || record.apiKeyId !== apiKeyId) return;
    freezeDeep(record.metadata);
    let rows = this.keys.get(apiKeyId);
    if (!rows) {
      rows = { byRow: new Map(), rowOf: new Map(), bytes: 0 };
      this.keys.set(apiKeyId, rows);
    }
    this.forget(rows, record.rowId);
    const bytes = sizeOf(record, metadataChars);
    rows.byRow.set(record.rowId, { record, bytes });
    rows.rowOf.set(record.id, record.rowId);
    rows.bytes += bytes;
    this.held += bytes;
    if (this.held > this.budgetBytes) this.evict(apiKeyId);
  }

  /** Drops the key's rows with these row ids (their memories changed or went away). */
  invalidate(apiKeyId: string, rowIds: Iterable<number>): void {
    const rows = this.keys.get(apiKeyId);
    if (!rows) return;
    for (const rowId of rowIds) this.forget(rows, rowId);
  }

  /** Drops every row of the key (its keyword index copy was dropped or reloaded: changes may have been missed). */
  drop(apiKeyId: string): void {
    const rows = this.keys.get(apiKeyId);
    if (!rows) return;
    this.held -= rows.bytes;
    this.keys.delete(apiKeyId);
    emptied(rows);
  }

  clear(): void {
    for (const rows of this.keys.values()) emptied(rows);
    this.keys.clear();
    this.held = 0;
  }

  private forget(rows: KeyRows, rowId: number): void {
    const e = rows.byRow.get(rowId);
    if (!e) return;
    rows.byRow.delete(rowId);
    if (rows.rowOf.get(e.record.id) === rowId) rows.rowOf.delete(e.record.id);
    rows.bytes -= e.bytes;
    this.held -= e.bytes;
  }

  /** Other keys first, least recently used first; then the oldest rows of `keep` itself. */
  private evict(keep: string): void {
    for (const [key, rows] of this.keys) {
      if (this.held <= this.budgetBytes) return;
      if (key === keep) continue;
      this.held -= rows.bytes;
      this.keys.delete(key);
      emptied(rows);
    }
    const rows = this.keys.get(keep);
    if (!rows) return;
    for (const rowId of rows.byRow.keys()) {
      if (this.held <= this.budgetBytes) return;
      this.forget(rows, rowId);
    }
  }
}
