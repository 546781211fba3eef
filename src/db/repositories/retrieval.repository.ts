import type { Db } from '../connection';
import { StatementCache } from '../statement-cache';
import type { MemoryRecord } from '../../memory/types';
import { rowToRecord } from './memory.repository';

/** The filters every retrieval tier applies: tenant (null = all, management preview), expiry, retention, session. */
export interface CandidateFilter {
  apiKeyId: string | null;
  nowIso: string;
  /** Retention: rows created or re-asserted (updated_at) at or after this instant; null = no window. */
  freshAfterIso: string | null;
  sessionId: string | null;
}

export interface FtsCandidate {
  record: MemoryRecord;
  /** bm25 (lower is better, negative in FTS5). */
  bm25: number;
}

function filterSql(f: CandidateFilter, alias: string, params: Record<string, unknown>): string {
  const parts = [`(${alias}.expires_at IS NULL OR ${alias}.expires_at > @nowIso)`];
  params.nowIso = f.nowIso;
  if (f.apiKeyId !== null) {
    parts.push(`${alias}.api_key_id = @apiKeyId`);
    params.apiKeyId = f.apiKeyId;
  }
  if (f.freshAfterIso !== null) {
    parts.push(`${alias}.updated_at >= @freshAfterIso`);
    params.freshAfterIso = f.freshAfterIso;
  }
  if (f.sessionId !== null) {
    parts.push(`${alias}.session_id = @sessionId`);
    params.sessionId = f.sessionId;
  }
  return parts.join(' AND ');
}

/** Candidate queries of the keyword and recency tiers: all filters in SQL, never only the newest N rows. */
export class RetrievalRepository {
  private readonly stmts: StatementCache;

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

  /** Bumps access counters (the record-access job; not a content change, so no history row). */
  recordAccess(ids: string[], nowIso: string): number {
    const stmt = this.stmt('UPDATE memories SET access_count = access_count + 1, last_accessed_at = ? WHERE id = ?');
    return this.db.transaction(() => ids.reduce((n, id) => n + stmt.run(nowIso, id).changes, 0)).immediate();
  }
}
