import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import * as sqliteVec from 'sqlite-vec';
import type { Logger } from '../logger';

export type Db = Database.Database;

export interface DbHandle {
  db: Db;
  file: string;
  /** sqlite-vec loaded into this connection. */
  vecLoaded: boolean;
  /** Why sqlite-vec is not loaded (disabled, or the load error). */
  vecError: string | null;
  close(): void;
}

export interface OpenOptions {
  dataDir: string;
  /** Overrides DATA_DIR/engram.db (tests use a temp file). */
  file?: string;
  busyTimeoutMs: number;
  disableVec: boolean;
  log: Logger;
  /**
   * SQLite's wal_autocheckpoint for this connection, in WAL pages (SQLite's default, 1000, when not given): a commit
   * that leaves the WAL at least this long checkpoints it, on the committing connection's thread.
   */
  walAutoCheckpointPages?: number;
}

/** Opens the one SQLite handle of this process with Engram's pragmas and sqlite-vec (reported, never fatal). */
export function openDatabase(opts: OpenOptions): DbHandle {
  const file = opts.file ?? path.join(opts.dataDir, 'engram.db');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma(`busy_timeout = ${Math.floor(opts.busyTimeoutMs)}`);
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  if (opts.walAutoCheckpointPages !== undefined) db.pragma(`wal_autocheckpoint = ${Math.floor(opts.walAutoCheckpointPages)}`);

  let vecLoaded = false;
  let vecError: string | null = null;
  if (opts.disableVec) {
    vecError = 'disabled by VECTOR_STORE_DISABLE_VEC';
  } else {
    try {
      sqliteVec.load(db);
      db.prepare('SELECT vec_version()').get();
      vecLoaded = true;
    } catch (err) {
      vecError = err instanceof Error ? err.message : String(err);
      opts.log.warn({ vecError }, 'sqlite-vec could not be loaded; vector search is off, keyword search still works');
    }
  }
  let closed = false;
  return {
    db,
    file,
    vecLoaded,
    vecError,
    close() {
      if (closed) return;
      closed = true;
      db.close();
    },
  };
}

/** Current time as the one timestamp format Engram stores: ISO-8601 UTC with milliseconds. */
export function nowIso(): string {
  return new Date().toISOString();
}
