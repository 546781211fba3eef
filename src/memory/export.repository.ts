import Database from 'better-sqlite3';
import type { Memory } from './types';

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

/** The exported columns, in the order of the line's fields. */
const COLUMNS = 'id, api_key_id, session_id, type, key, content, metadata, created_at, updated_at, expires_at, access_count, last_accessed_at, reassert_count, last_asserted_at';
type RawRow = [string, string, string | null, string, string | null, string, string | null, string, string, string | null, number, string | null, number, string | null];

const str = JSON.stringify;

/** Stored metadata as JSON text of an object ('{}' when malformed, as the store reads it). */
function metadataJson(raw: string | null): string {
  if (!raw) return '{}';
  try {
    const v: unknown = JSON.parse(raw);
    return v && typeof v === 'object' && !Array.isArray(v) ? str(v) : '{}';
  } catch {
    return '{}';
  }
}

/**
 * One row as its NDJSON line (an ExportedMemory), built from the raw column array: no row object,
 * no record, no public copy per row — a 200k-row export makes a third of the garbage it otherwise would.
 */
function line(r: RawRow): string {
  return (
    `{"id":${str(r[0])},"apiKeyId":${str(r[1])},"sessionId":${str(r[2] ?? '')},"type":${str(r[3])},"key":${str(r[4] ?? '')},` +
    `"content":${str(r[5])},"metadata":${metadataJson(r[6])},"createdAt":${str(r[7])},"updatedAt":${str(r[8])},"expiresAt":${str(r[9])},` +
    `"accessCount":${r[10] ?? 0},"lastAccessedAt":${str(r[11])},"reassertCount":${r[12] ?? 0},"lastAssertedAt":${str(r[13])}}\n`
  );
}

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

  /** The filter's rows in memory_id order as NDJSON lines, one at a time (constant memory). */
  *lines(f: ExportFilter): Generator<string> {
    const w = where(f);
    for (const r of this.db.prepare(`SELECT ${COLUMNS} FROM memories ${w.sql} ORDER BY memory_id`).raw(true).iterate(...w.params) as IterableIterator<RawRow>) {
      yield line(r);
    }
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
