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

  constructor(private readonly db: Db) {
    this.stmts = new StatementCache(db);
  }

  /** Entries below this were pruned: a copy that has not seen them reloads its key. */
  prunedBelow(): number {
    const r = this.stmts.get('SELECT pruned_below AS p FROM memory_kw_log_state WHERE id = 1').get() as { p: number } | undefined;
    return r?.p ?? 0;
  }

  /** The newest sequence number of the log (0 when never written). */
  logHead(): number {
    const r = this.stmts.get("SELECT seq FROM sqlite_sequence WHERE name = 'memory_kw_log'").get() as { seq: number } | undefined;
    return r?.seq ?? 0;
  }

  /**
   * The key's changed memory_ids after `afterSeq` up to `head`, the whole log's newest entry (a copy
   * of an idle key then keeps up with the head instead of falling behind the prune mark because of
   * other keys' writes). `pruned`: entries after `afterSeq` may be gone (or the log went back), reload. The mark is read
   * last: a prune deletes its entries and raises the mark in one transaction, so an entry missing
   * from the read below was pruned by a transaction the mark's read sees.
   */
  logSince(apiKeyId: string, afterSeq: number): { head: number; pruned: boolean; rowIds: number[] } {
    const head = this.logHead();
    const rows = this.stmts
      .get('SELECT memory_id AS rowId FROM memory_kw_log WHERE api_key_id = ? AND seq > ? AND seq <= ? ORDER BY seq')
      .all(apiKeyId, afterSeq, head) as { rowId: number }[];
    // A head behind the copy: the log was replaced under it (a database file restored): nothing in it can be trusted.
    const pruned = afterSeq < this.prunedBelow() || head < afterSeq;
    return { head, pruned, rowIds: pruned ? [] : [...new Set(rows.map((r) => r.rowId))] };
  }

  /** The key's log entries after `afterSeq`, counted up to `max` (the count stops there). */
  pendingAtMost(apiKeyId: string, afterSeq: number, max: number): number {
    return (
      this.stmts.get('SELECT count(*) AS n FROM (SELECT 1 FROM memory_kw_log WHERE api_key_id = ? AND seq > ? LIMIT ?)').get(apiKeyId, afterSeq, max) as { n: number }
    ).n;
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

  /** Every memory of the key, streamed, with the log head read first in the same read transaction. */
  snapshot<T>(apiKeyId: string, load: (head: number, rows: IterableIterator<KeywordRow>) => T): T {
    const read = this.db.transaction(() => {
      const head = this.logHead();
      return load(head, this.stmts.get(`SELECT ${ROW_COLUMNS} FROM memories WHERE api_key_id = ?`).iterate(apiKeyId) as IterableIterator<KeywordRow>);
    });
    return read.deferred();
  }
}
