import type { Db } from '../db/connection';
import { candidateFilterSql as filterSql, FTS_BM25, tenantFtsMatch, type CandidateFilter } from '../db/candidate-filter';
import { StatementCache } from '../db/statement-cache';
import type { MemoryRecord } from './types';
import { rowToRecord } from './memory.repository';

export type { CandidateFilter };

export interface FtsCandidate {
  record: MemoryRecord;
  /** bm25 (lower is better, negative in FTS5). */
  bm25: number;
}

/**
 * Reads one SQLite/FTS5 varint (big-endian 7-bit groups with a continuation bit; a 9th byte carries
 * 8 bits) at `at`.
 */
function readVarint(buf: Uint8Array, at: number): number {
  let v = 0;
  for (let i = 0; i < 9 && at + i < buf.length; i++) {
    const b = buf[at + i];
    if (i === 8) return v * 256 + b;
    v = v * 128 + (b & 0x7f);
    if ((b & 0x80) === 0) return v;
  }
  return v;
}

/** A key holding less than this share of all indexed rows is named inside the keyword MATCH (0007). */
const TENANT_TOKEN_MAX_SHARE = 0.25;
const TENANT_SHARE_TTL_MS = 30_000;
/** Document frequencies (global, for idf and the common-term drop) are reused this long. */
const DOC_FREQ_TTL_MS = 30_000;
const DOC_FREQ_MAX_TERMS = 50_000;

/** Candidate queries of the keyword and recency tiers: all filters in SQL, never only the newest N rows. */
export class RetrievalRepository {
  private readonly stmts: StatementCache;
  private readonly tenantShares = new Map<string, { share: number; at: number }>();
  private readonly docFreqs = new Map<string, { doc: number; at: number }>();

  constructor(private readonly db: Db) {
    this.stmts = new StatementCache(db);
  }

  private stmt(sql: string) {
    return this.stmts.get(sql);
  }

  /** FTS5 matches ranked by bm25 (or the newest first, for `exact`); `match` must come from buildFtsQuery (quoted tokens only). */
  fts(match: string, f: CandidateFilter, limit: number, onlyUnembedded = false, order: 'bm25' | 'newest' = 'bm25'): FtsCandidate[] {
    const params: Record<string, unknown> = { match: tenantFtsMatch(match, this.narrowsIndex(f.apiKeyId) ? f.apiKeyId : null), limit };
    const where = filterSql(f, 'm', params) + (onlyUnembedded ? ' AND m.needs_reindex = 1' : '');
    // Rank (memory_id, bm25) pairs only, then read the whole rows of the top `limit`: the sorter
    // no longer carries every matching row's content and metadata (at 100k rows per key a common
    // word matches thousands of rows). Every filter stays inside the ranked query, and reads the
    // covering index of the filter columns (0006) instead of the wide row; without statistics the
    // planner would pick the primary key, hence INDEXED BY (needs_reindex is not in it).
    // `exact` (newest first) reads created_at, which the covering index does not hold. The MATCH
    // itself names the tenant (0007), so FTS5 never visits other keys' rows; the SQL filter stays
    // (the token narrows, the filter decides).
    const via = onlyUnembedded || order === 'newest' ? '' : ' INDEXED BY idx_memories_filter_cover';
    const orderBy = order === 'newest' ? 'm.created_at DESC, m.memory_id DESC' : 'bm25';
    const ranked = this.stmt(
      `SELECT m.memory_id AS rid, ${FTS_BM25} AS bm25 FROM memory_fts JOIN memories m${via} ON m.memory_id = memory_fts.rowid
       WHERE memory_fts MATCH @match AND ${where} ORDER BY ${orderBy} LIMIT @limit`,
    ).all(params) as { rid: number; bm25: number }[];
    return this.byRowIds(ranked.map((r) => ({ rowId: r.rid, bm25: r.bm25 })));
  }

  /**
   * Whether naming the tenant inside the MATCH pays: it lets FTS5 skip other keys' rows, but the
   * AND with the tenant's own doclist costs a walk of it, so a key holding a large share of all rows
   * (one big tenant) is matched without it (the SQL filter decides membership either way). The
   * share is recounted at most every TENANT_SHARE_TTL_MS per key.
   */
  narrowsIndex(apiKeyId: string | null): boolean {
    if (apiKeyId === null) return false;
    const now = Date.now();
    let c = this.tenantShares.get(apiKeyId);
    if (!c || now - c.at > TENANT_SHARE_TTL_MS) {
      const rows = (this.stmt('SELECT count(*) AS n FROM memories WHERE api_key_id = ?').get(apiKeyId) as { n: number }).n;
      c = { share: rows / Math.max(1, this.ftsRowCount()), at: now };
      if (this.tenantShares.size > 10_000) this.tenantShares.clear();
      this.tenantShares.set(apiKeyId, c);
    }
    return c.share < TENANT_TOKEN_MAX_SHARE;
  }

  /**
   * FTS5's own collection statistics for bm25's idf: rows in the index (every memory is indexed) and
   * the number of rows holding each term (fts5vocab, an index seek per term). Global over all keys,
   * exactly what bm25() ranks with.
   */
  termStats(terms: readonly string[]): { rows: number; docFreqs: number[] } {
    const rows = this.ftsRowCount();
    const df = this.stmt('SELECT doc FROM memory_fts_vocab WHERE term = ?');
    // fts5vocab counts a term's rows by walking its whole doclist (every key's rows): in a 1M-row
    // index that was most of a small key's query. Counts move slowly, so each is kept DOC_FREQ_TTL_MS.
    const now = Date.now();
    const docFreqs = terms.map((t) => {
      const hit = this.docFreqs.get(t);
      if (hit && now - hit.at <= DOC_FREQ_TTL_MS) return hit.doc;
      const doc = (df.get(t) as { doc: number } | undefined)?.doc ?? 0;
      // A count of 0 is not kept: the common-term drop treats such a term as absent, so a remembered
      // 0 would leave a just-written rare word out of the MATCH for the whole TTL (a chat asks about
      // a word, extraction stores it, the next turn asks again). An absent term's lookup is one seek.
      if (doc === 0) return 0;
      if (this.docFreqs.size >= DOC_FREQ_MAX_TERMS) this.docFreqs.clear();
      this.docFreqs.set(t, { doc, at: now });
      return doc;
    });
    return { rows, docFreqs };
  }

  /**
   * The row count bm25() itself uses: the first varint of FTS5's averages record (rowid 1 of
   * memory_fts_data), one primary-key read instead of an O(rows) count(*), and always current.
   */
  ftsRowCount(): number {
    const rec = this.stmt('SELECT block FROM memory_fts_data WHERE id = 1').get() as { block: Uint8Array | null } | undefined;
    if (rec?.block && rec.block.length > 0) return readVarint(rec.block, 0);
    return (this.stmt('SELECT count(*) AS n FROM memories').get() as { n: number }).n;
  }

  /** Whether any row that passes the filters still waits for its vector (the partial index keeps this cheap). */
  hasUnembedded(f: CandidateFilter): boolean {
    const params: Record<string, unknown> = {};
    const where = filterSql(f, 'm', params);
    return this.stmt(`SELECT 1 FROM memories m WHERE m.needs_reindex = 1 AND ${where} LIMIT 1`).get(params) !== undefined;
  }

  /** Newest rows first (the `exact` strategy without a query). */
  recent(f: CandidateFilter, limit: number): MemoryRecord[] {
    const params: Record<string, unknown> = { limit };
    const where = filterSql(f, 'm', params);
    const rows = this.stmt(`SELECT m.* FROM memories m WHERE ${where} ORDER BY m.created_at DESC, m.memory_id DESC LIMIT @limit`).all(params);
    return (rows as Parameters<typeof rowToRecord>[0][]).map(rowToRecord);
  }

  /** Ranked rows of the keyword index, read whole, in the given order (rows gone since are dropped). */
  byRowIds(hits: readonly { rowId: number; bm25: number }[]): FtsCandidate[] {
    if (hits.length === 0) return [];
    const rows = this.stmt('SELECT m.* FROM json_each(?) AS j CROSS JOIN memories m ON m.memory_id = j.value').all(JSON.stringify(hits.map((h) => h.rowId))) as Parameters<
      typeof rowToRecord
    >[0][];
    const byRowId = new Map(rows.map((r) => [r.memory_id, r]));
    const out: FtsCandidate[] = [];
    for (const h of hits) {
      const row = byRowId.get(h.rowId);
      if (row) out.push({ record: rowToRecord(row), bm25: h.bm25 });
    }
    return out;
  }

  /** The first `limit` of `hits` (in their order) whose rows still wait for their vector; no row is read whole. */
  unembeddedAmong(hits: readonly { rowId: number; bm25: number }[], limit: number): { rowId: number; bm25: number }[] {
    if (hits.length === 0) return [];
    const picked = this.stmt(
      'SELECT CAST(j.key AS INTEGER) AS at FROM json_each(?) AS j CROSS JOIN memories m ON m.memory_id = j.value WHERE m.needs_reindex = 1 ORDER BY j.key LIMIT ?',
    )
      .pluck()
      .all(JSON.stringify(hits.map((h) => h.rowId)), limit) as number[];
    return picked.map((i) => hits[i]!);
  }

  /** Whole rows by internal row id, in no particular order (gone ones dropped), each with its stored metadata's length. */
  rowsByRowIds(rowIds: readonly number[]): { record: MemoryRecord; metadataChars: number }[] {
    return this.wholeRows('memory_id', rowIds);
  }

  /** Whole rows by public id, in no particular order (missing ids dropped), each with its stored metadata's length. */
  rowsByIds(ids: readonly string[]): { record: MemoryRecord; metadataChars: number }[] {
    return this.wholeRows('id', ids);
  }

  private wholeRows(column: 'memory_id' | 'id', keys: readonly (number | string)[]): { record: MemoryRecord; metadataChars: number }[] {
    if (keys.length === 0) return [];
    const rows = this.stmt(`SELECT m.* FROM json_each(?) AS j CROSS JOIN memories m ON m.${column} = j.value`).all(JSON.stringify(keys)) as Parameters<typeof rowToRecord>[0][];
    return rows.map((r) => ({ record: rowToRecord(r), metadataChars: r.metadata?.length ?? 0 }));
  }

  /** The current access count and last access of the rows by public id (these change without a memory_kw_log entry). */
  accessOf(ids: readonly string[]): Map<string, { accessCount: number; lastAccessedAt: string | null }> {
    if (ids.length === 0) return new Map();
    const rows = this.stmt(
      'SELECT m.id AS id, m.access_count AS accessCount, m.last_accessed_at AS lastAccessedAt FROM json_each(?) AS j CROSS JOIN memories m ON m.id = j.value',
    ).all(JSON.stringify(ids)) as { id: string; accessCount: number; lastAccessedAt: string | null }[];
    return new Map(rows.map((r) => [r.id, { accessCount: r.accessCount, lastAccessedAt: r.lastAccessedAt }]));
  }

  /** Rows by public id, in the given order (missing ids dropped). */
  byIds(ids: string[]): MemoryRecord[] {
    if (ids.length === 0) return [];
    // One cached statement for any number of ids: the ids travel as one JSON array parameter.
    const rows = this.stmt('SELECT m.* FROM json_each(?) AS j CROSS JOIN memories m ON m.id = j.value').all(JSON.stringify(ids)) as Parameters<typeof rowToRecord>[0][];
    const byId = new Map(rows.map((r) => [r.id, rowToRecord(r)]));
    return ids.map((id) => byId.get(id)).filter((r): r is MemoryRecord => r !== undefined);
  }
}
