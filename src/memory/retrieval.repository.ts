import type { Db } from '../db/connection';
import { candidateFilterSql as filterSql, type CandidateFilter } from '../db/candidate-filter';
import { StatementCache } from '../db/statement-cache';
import type { MemoryRecord } from './types';
import { rowToRecord } from './memory.repository';

export type { CandidateFilter };

export interface FtsCandidate {
  record: MemoryRecord;
  /** bm25 (lower is better, negative in FTS5). */
  bm25: number;
}

/** How long termStats reuses the memories row count. */
const ROW_COUNT_TTL_MS = 5_000;

/** Candidate queries of the keyword and recency tiers: all filters in SQL, never only the newest N rows. */
export class RetrievalRepository {
  private readonly stmts: StatementCache;
  private rowCount: { at: number; n: number } | null = null;

  constructor(private readonly db: Db) {
    this.stmts = new StatementCache(db);
  }

  private stmt(sql: string) {
    return this.stmts.get(sql);
  }

  /** FTS5 matches ranked by bm25; `match` must come from buildFtsQuery (quoted tokens only). */
  fts(match: string, f: CandidateFilter, limit: number, onlyUnembedded = false): FtsCandidate[] {
    const params: Record<string, unknown> = { match, limit };
    const where = filterSql(f, 'm', params) + (onlyUnembedded ? ' AND m.needs_reindex = 1' : '');
    const rows = this.stmt(
      `SELECT m.*, bm25(memory_fts) AS bm25 FROM memory_fts JOIN memories m ON m.memory_id = memory_fts.rowid
       WHERE memory_fts MATCH @match AND ${where} ORDER BY bm25 LIMIT @limit`,
    ).all(params) as (Parameters<typeof rowToRecord>[0] & { bm25: number })[];
    return rows.map((r) => ({ record: rowToRecord(r), bm25: r.bm25 }));
  }

  /**
   * FTS5's own collection statistics for bm25's idf: rows in the index (every memory is indexed) and
   * the number of rows holding each term (fts5vocab, an index seek per term). Global over all keys,
   * exactly what bm25() ranks with.
   */
  termStats(terms: readonly string[]): { rows: number; docFreqs: number[] } {
    // count(*) walks an index (O(rows)); idf barely moves in a few seconds, so the count is reused.
    const now = Date.now();
    if (!this.rowCount || now - this.rowCount.at > ROW_COUNT_TTL_MS) {
      this.rowCount = { at: now, n: (this.stmt('SELECT count(*) AS n FROM memories').get() as { n: number }).n };
    }
    const rows = this.rowCount.n;
    const df = this.stmt('SELECT doc FROM memory_fts_vocab WHERE term = ?');
    return { rows, docFreqs: terms.map((t) => (df.get(t) as { doc: number } | undefined)?.doc ?? 0) };
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

  /** Rows by public id, in the given order (missing ids dropped). */
  byIds(ids: string[]): MemoryRecord[] {
    if (ids.length === 0) return [];
    const rows = this.db.prepare(`SELECT * FROM memories WHERE id IN (${ids.map(() => '?').join(',')})`).all(...ids) as Parameters<typeof rowToRecord>[0][];
    const byId = new Map(rows.map((r) => [r.id, rowToRecord(r)]));
    return ids.map((id) => byId.get(id)).filter((r): r is MemoryRecord => r !== undefined);
  }
}
