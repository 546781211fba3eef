import crypto from 'node:crypto';
import type Database from 'better-sqlite3';

/**
 * What "the database did not change" is compared by: integrity, the row count of every table (memory_events is the
 * history) and a digest of every row of Engram's own tables (an UPDATE changes no count: a revoked key, a setting).
 */
export interface DbSnapshot {
  integrity: string;
  counts: Record<string, number>;
  digests: Record<string, string>;
}

/** Bookkeeping a successful authentication writes by design (when a key was last used), not a change a request makes. */
const VOLATILE_COLUMNS: Record<string, string[]> = { api_keys: ['last_used_at'], admin_sessions: ['last_seen_at'] };

/** Integrity check, a row count per table and a digest per own table (FTS5 vocabulary views excluded: derived). */
export function dbSnapshot(db: Database.Database): DbSnapshot {
  const integrity = (db.pragma('integrity_check') as { integrity_check: string }[]).map((r) => r.integrity_check).join('; ');
  const tables = db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '%_vocab' ORDER BY name").all() as { name: string; sql: string | null }[];
  const counts: Record<string, number> = {};
  const digests: Record<string, string> = {};
  const virtual = tables.filter((t) => /^CREATE VIRTUAL/i.test(t.sql ?? '')).map((t) => `${t.name}_`);
  for (const { name, sql } of tables) {
    const q = `"${name.replace(/"/g, '""')}"`;
    counts[name] = (db.prepare(`SELECT count(*) AS n FROM ${q}`).get() as { n: number }).n;
    // Virtual tables and their shadow tables (FTS5, vec0) are covered by their counts and the integrity check.
    if (/^CREATE VIRTUAL/i.test(sql ?? '') || name.startsWith('sqlite_') || virtual.some((v) => name.startsWith(v))) continue;
    const h = crypto.createHash('sha1');
    const skip = VOLATILE_COLUMNS[name] ?? [];
    for (const row of db.prepare(`SELECT * FROM ${q} ORDER BY rowid`).iterate() as Iterable<Record<string, unknown>>) {
      for (const c of skip) delete row[c];
      h.update(JSON.stringify(row, (_k, v: unknown) => (Buffer.isBuffer(v) ? v.toString('base64') : v)));
    }
    digests[name] = h.digest('hex');
  }
  return { integrity, counts, digests };
}
