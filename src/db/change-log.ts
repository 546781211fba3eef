/**
 * The read side of a change log, and the one statement of how an in-process copy keeps current from it.
 *
 * A change log (memory_vec_log, migration 0007; memory_kw_log, 0009) gets (api_key_id, memory_id)
 * appended, under an AUTOINCREMENT seq, in the transaction of every write to what it logs, whichever
 * process writes; a prune deletes old entries and raises `<log>_state.pruned_below` in one transaction.
 * A per-key copy in memory (keyword-index.ts, vec-scan-cache.ts) follows this rule:
 * - it remembers the seq it reflects; while the log's head is that seq it is current, with no other read;
 * - else it applies the key's entries after its seq up to the head, re-reading each changed row
 *   (idempotent: a put replaces, a remove of an absent row is a no-op), and then reflects the head;
 * - unless entries after its seq may be gone (pruned past it, or the head went back: a database
 *   file restored): then it reloads;
 * - a (re)load reads the head no later than the rows: a write committed in between is then both in
 *   the rows and after the head, applied again at the next catch-up, never lost.
 * A log that is emptied whole (memory_vec_log's generation, bumped by a rebuild) invalidates every
 * copy; its reader compares the generation before asking anything here.
 */
import type { Db } from './connection';
import { StatementCache } from './statement-cache';

/** The change logs: each has a `<name>_state` singleton (id = 1) with a `pruned_below` column. */
export type ChangeLogName = 'memory_kw_log' | 'memory_vec_log';

/** A key's log entries to apply: the changed memory_ids (each once, in log order) and the head they bring the copy to. */
export interface LogEntries {
  readonly kind: 'apply';
  readonly head: number;
  readonly rowIds: readonly number[];
}

/** The copy reflects the head: nothing to read or apply. */
export const CURRENT = Object.freeze({ kind: 'current' as const });
/** Entries the copy has not seen may be gone: reload it (reading the head first: ChangeLog.snapshot). */
export const RELOAD = Object.freeze({ kind: 'reload' as const });

/** What a copy at some seq must do to be current. */
export type CatchUp = typeof CURRENT | typeof RELOAD | LogEntries;

/** What catchUp reads: ChangeLog, or a stand-in in a test. */
export interface LogReader {
  since(apiKeyId: string, afterSeq: number): LogEntries | typeof RELOAD;
}

/**
 * What the key's copy at `seq` must do, given the log `head` the caller just read (alone, or in one
 * statement with other state: sqlite-vec.repository.ts searchState). Allocates nothing when current.
 */
export function catchUp(log: LogReader, apiKeyId: string, seq: number, head: number): CatchUp {
  return head === seq ? CURRENT : log.since(apiKeyId, seq);
}

/** The SQL expression for the log's head (0 when never written), for a statement that reads it with other columns. */
export function logHeadSql(name: ChangeLogName): string {
  return `coalesce((SELECT seq FROM sqlite_sequence WHERE name = '${name}'), 0)`;
}

/** The SQL reading one change log. */
export class ChangeLog implements LogReader {
  private readonly stmts: StatementCache;
  // The SQL texts built once: head() runs once per chat.
  private readonly headSql: string;
  private readonly prunedSql: string;
  private readonly sinceSql: string;
  private readonly pendingSql: string;

  constructor(
    private readonly db: Db,
    readonly name: ChangeLogName,
  ) {
    this.stmts = new StatementCache(db);
    this.headSql = `SELECT ${logHeadSql(name)}`;
    this.prunedSql = `SELECT pruned_below FROM ${name}_state WHERE id = 1`;
    this.sinceSql = `SELECT memory_id FROM ${name} WHERE api_key_id = ? AND seq > ? AND seq <= ? ORDER BY seq`;
    this.pendingSql = `SELECT count(*) FROM (SELECT 1 FROM ${name} WHERE api_key_id = ? AND seq > ? LIMIT ?)`;
  }

  /** The newest sequence number of the log (0 when never written): the whole log's, every key's writes move it. */
  head(): number {
    return this.stmts.get(this.headSql).pluck(true).get() as number;
  }

  /** Entries below this were pruned: a copy that has not seen them reloads its key. */
  prunedBelow(): number {
    const r = this.stmts.get(this.prunedSql).pluck(true).get() as number | undefined;
    return r ?? 0;
  }

  /**
   * The key's changed memory_ids after `afterSeq` up to the head, the whole log's newest entry (an
   * idle key's copy then keeps up with the head instead of falling behind the prune mark through
   * other keys' writes), or RELOAD when entries after `afterSeq` may be gone. The mark is read last:
   * a prune deletes its entries and raises the mark in one transaction, so an entry missing from the
   * read below was removed by a transaction the mark's read sees.
   */
  since(apiKeyId: string, afterSeq: number): LogEntries | typeof RELOAD {
    const head = this.head();
    const rowIds = this.stmts.get(this.sinceSql).pluck(true).all(apiKeyId, afterSeq, head) as number[];
    // A head behind the copy: the log was replaced under it (a database file restored): nothing in it can be trusted.
    if (afterSeq < this.prunedBelow() || head < afterSeq) return RELOAD;
    return { kind: 'apply', head, rowIds: [...new Set(rowIds)] };
  }

  /** The key's log entries after `afterSeq`, counted up to `max` (the count stops there). */
  pendingAtMost(apiKeyId: string, afterSeq: number, max: number): number {
    return this.stmts.get(this.pendingSql).pluck(true).get(apiKeyId, afterSeq, max) as number;
  }

  /**
   * A (re)load: `load` reads the rows, handed the head read first in the same read transaction, the
   * seq the loaded copy reflects. (A load that cannot hold one transaction, in slices across turns of
   * the event loop, reads head() before its first slice instead: later writes are then re-applied.)
   */
  snapshot<T>(load: (head: number) => T): T {
    return this.db.transaction(() => load(this.head())).deferred();
  }
}
