import { ChangeLog } from '../db/change-log';
import type { Db } from '../db/connection';
import { StatementCache } from '../db/statement-cache';

/** What the keyword index holds of one memory: the indexed text and the columns the candidate filter reads. */
export interface KeywordRow {
  rowId: number;
  content: string;
  key: string | null;
  sessionId: string | null;
  expiresAt: string | null;
  updatedAt: string;
}

const ROW_COLUMNS = 'memory_id AS rowId, content, key, session_id AS sessionId, expires_at AS expiresAt, updated_at AS updatedAt';

/** The SQL of the per-key keyword index (migration 0009): a key's rows, and the change log that keeps a copy current. */
export class KeywordIndexRepository {
  private readonly stmts: StatementCache;
  /** memory_kw_log, written by the triggers on memories. */
  readonly log: ChangeLog;

  constructor(db: Db) {
    this.stmts = new StatementCache(db);
    this.log = new ChangeLog(db, 'memory_kw_log');
  }

  /** One memory as the index holds it, or null when it is gone or belongs to another key. */
  row(apiKeyId: string, rowId: number): KeywordRow | null {
    const r = this.stmts.get(`SELECT api_key_id AS apiKeyId, ${ROW_COLUMNS} FROM memories WHERE memory_id = ?`).get(rowId) as
      | (KeywordRow & { apiKeyId: string })
      | undefined;
    if (!r || r.apiKeyId !== apiKeyId) return null;
    return { rowId: r.rowId, content: r.content, key: r.key, sessionId: r.sessionId, expiresAt: r.expiresAt, updatedAt: r.updatedAt };
  }

  /** The key's memories after `afterRowId`, in memory_id order, at most `limit` (a load in slices). */
  page(apiKeyId: string, afterRowId: number, limit: number): KeywordRow[] {
    return this.stmts.get(`SELECT ${ROW_COLUMNS} FROM memories WHERE api_key_id = ? AND memory_id > ? ORDER BY memory_id LIMIT ?`).all(apiKeyId, afterRowId, limit) as KeywordRow[];
  }

  /** Every memory of the key, streamed (a load: inside log.snapshot, which reads the log head first in the same read transaction). */
  rows(apiKeyId: string): IterableIterator<KeywordRow> {
    return this.stmts.get(`SELECT ${ROW_COLUMNS} FROM memories WHERE api_key_id = ?`).iterate(apiKeyId) as IterableIterator<KeywordRow>;
  }
}
