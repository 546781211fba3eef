import Database from 'better-sqlite3';
import { rowToRecord } from './memory.repository';
import { toPublic, type Memory } from './types';

/** One exported memory: every field of the row except index bookkeeping (no vectors, no hashes). */
export interface ExportedMemory extends Memory {
  reassertCount: number;
  lastAssertedAt: string | null;
}

export interface ExportFilter {
  apiKeyId: string;
  /** Only this session ('' = memories without one). */
  sessionId?: string;
}

type RawRow = Parameters<typeof rowToRecord>[0] & { reassert_count: number; last_asserted_at: string | null };

function where(f: ExportFilter): { sql: string; params: string[] } {
  if (f.sessionId === undefined) return { sql: 'WHERE api_key_id = ?', params: [f.apiKeyId] };
  return { sql: "WHERE api_key_id = ? AND coalesce(session_id, '') = ?", params: [f.apiKeyId, f.sessionId] };
}

/**
 * Reads for the export over a connection of its own, read-only: its long read (a snapshot, WAL)
 * never makes the process' main connection busy, however slowly the client takes the stream.
 */
export class ExportRepository {
  private readonly db: Database.Database;

  constructor(file: string, busyTimeoutMs: number) {
    this.db = new Database(file, { readonly: true, fileMustExist: true });
    this.db.pragma(`busy_timeout = ${Math.floor(busyTimeoutMs)}`);
  }

  count(f: ExportFilter): number {
    const w = where(f);
    return (this.db.prepare(`SELECT count(*) AS n FROM memories ${w.sql}`).get(...w.params) as { n: number }).n;
  }

  /** The filter's rows in memory_id order, one at a time (constant memory). */
  *rows(f: ExportFilter): Generator<ExportedMemory> {
    const w = where(f);
    for (const r of this.db.prepare(`SELECT * FROM memories ${w.sql} ORDER BY memory_id`).iterate(...w.params) as IterableIterator<RawRow>) {
      yield { ...toPublic(rowToRecord(r)), reassertCount: r.reassert_count ?? 0, lastAssertedAt: r.last_asserted_at ?? null };
    }
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
