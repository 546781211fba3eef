import type Database from 'better-sqlite3';

/**
 * What "the database did not change" is compared by: integrity, the row count of every table (memory_events is the
 * history) and the connection's total_changes() (every row inserted, updated or deleted through it, triggers included:
 * an UPDATE changes no count, a revoked key or a setting does), less the keys' last_used_at bookkeeping. The api
 * writes through this one connection only.
 */
export interface DbSnapshot {
  integrity: string;
  counts: Record<string, number>;
  changes: number;
  /** Every key's last_used_at: authentication bookkeeping (at most once a minute per key), not a change a request makes. */
  keysUsed: Record<string, string | null>;
  /** Outbox rows (id → attempts and quarantine): the relay drains and retries them on its own timer. */
  outbox: Record<string, string>;
}

/**
 * Rows written between two snapshots that are neither the last_used_at bookkeeping of an authenticated key nor the
 * outbox relay's own work (a row relayed and deleted, or retried) — background work a request did not cause. A new
 * outbox row (an insert) is not excused.
 */
export function writesBetween(before: DbSnapshot, after: DbSnapshot): number {
  const touched = Object.keys(after.keysUsed).filter((id) => id in before.keysUsed && before.keysUsed[id] !== after.keysUsed[id]).length;
  const relayed = Object.keys(before.outbox).filter((id) => after.outbox[id] !== before.outbox[id]).length;
  return after.changes - before.changes - touched - relayed;
}

/** Integrity check, a row count per table (FTS5 vocabulary views excluded: derived) and the connection's total_changes(). */
export function dbSnapshot(db: Database.Database): DbSnapshot {
  const integrity = (db.pragma('integrity_check') as { integrity_check: string }[]).map((r) => r.integrity_check).join('; ');
  const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '%_vocab' ORDER BY name").all() as { name: string }[];
  const counts: Record<string, number> = {};
  for (const { name } of tables) counts[name] = (db.prepare(`SELECT count(*) AS n FROM "${name.replace(/"/g, '""')}"`).get() as { n: number }).n;
  const changes = (db.prepare('SELECT total_changes() AS n').get() as { n: number }).n;
  const keysUsed = Object.fromEntries((db.prepare('SELECT id, last_used_at FROM api_keys').all() as { id: string; last_used_at: string | null }[]).map((r) => [r.id, r.last_used_at]));
  const outbox = Object.fromEntries(
    (db.prepare('SELECT outbox_id AS id, attempts, quarantined_at AS q FROM outbox').all() as { id: number; attempts: number; q: string | null }[]).map((r) => [String(r.id), `${r.attempts}/${r.q ?? ''}`]),
  );
  return { integrity, counts, changes, keysUsed, outbox };
}

/** Row counts that must not change on a rejected request: every table's, the outbox's only upwards (the relay drains it). */
export function countsChanged(before: DbSnapshot, after: DbSnapshot): string[] {
  const out: string[] = [];
  for (const [table, n] of Object.entries(after.counts)) {
    const was = before.counts[table];
    if (table === 'outbox' ? n > was : n !== was) out.push(`${table}: ${was} -> ${n}`);
  }
  return out;
}
