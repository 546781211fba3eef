import type { Statement } from 'better-sqlite3';
import type { Db } from './connection';

/** Prepared statements by SQL text: preparing costs more than most of Engram's queries. Lazy, so SQL over a table that does not exist yet is only prepared once it does. */
export class StatementCache {
  private readonly stmts = new Map<string, Statement>();

  constructor(private readonly db: Db) {}

  get(sql: string): Statement {
    let s = this.stmts.get(sql);
    if (!s) {
      s = this.db.prepare(sql);
      this.stmts.set(sql, s);
    }
    return s;
  }

  /** Forgets every statement (after DROP/CREATE of a table they reference). */
  clear(): void {
    this.stmts.clear();
  }
}
