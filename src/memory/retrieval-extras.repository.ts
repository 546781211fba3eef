import type { Db } from '../db/connection';
import { candidateFilterSql as filterSql, FTS_BM25, tenantFtsMatch, type CandidateFilter } from '../db/candidate-filter';
import { StatementCache } from '../db/statement-cache';
import type { FtsCandidate } from './retrieval.repository';
import type { DateWindow } from './retrieval-extras';
import { rowToRecord } from './memory.repository';

/** The SQL of issue #10 item 4's extras (private to RetrievalService, like RetrievalRepository). */
export class RetrievalExtrasRepository {
  private readonly stmts: StatementCache;

  constructor(db: Db) {
    this.stmts = new StatementCache(db);
  }

  /**
   * Keyword matches dated inside `window` (metadata `date` when it is a `YYYY-MM-DD…` string, else
   * created_at — the same rule as memoryDay), ranked by bm25, every candidate filter applied: the
   * rows a temporal question is about, even when the query's words match far better rows elsewhere.
   */
  ftsInWindow(match: string, f: CandidateFilter, window: DateWindow, limit: number): FtsCandidate[] {
    const params: Record<string, unknown> = { match: tenantFtsMatch(match, f.apiKeyId), limit, wFrom: window.from, wTo: window.to };
    const where = filterSql(f, 'm', params);
    const dayOf = `substr(CASE WHEN json_valid(m.metadata) AND json_type(m.metadata, '$.date') = 'text'
        AND json_extract(m.metadata, '$.date') GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*'
        THEN json_extract(m.metadata, '$.date') ELSE m.created_at END, 1, 10)`;
    const rows = this.stmts
      .get(
        `SELECT m.*, ${FTS_BM25} AS bm25 FROM memory_fts JOIN memories m ON m.memory_id = memory_fts.rowid
         WHERE memory_fts MATCH @match AND ${where} AND ${dayOf} >= @wFrom AND ${dayOf} < @wTo ORDER BY bm25 LIMIT @limit`,
      )
      .all(params) as (Parameters<typeof rowToRecord>[0] & { bm25: number })[];
    return rows.map((r) => ({ record: rowToRecord(r), bm25: r.bm25 }));
  }
}
