import type { Db } from '../db/connection';

/** Key → JSON value rows of the `settings` table. */
export class SettingsRepository {
  constructor(private readonly db: Db) {}

  all(): Record<string, unknown> {
    const rows = this.db.prepare('SELECT key, value FROM settings').all() as { key: string; value: string }[];
    const out: Record<string, unknown> = {};
    for (const r of rows) {
      try {
        out[r.key] = JSON.parse(r.value);
      } catch {
        out[r.key] = null;
      }
    }
    return out;
  }

  /** Writes several keys in one transaction. */
  setMany(values: Record<string, unknown>, now: string): void {
    const stmt = this.db.prepare(
      'INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at',
    );
    this.db
      .transaction(() => {
        for (const [k, v] of Object.entries(values)) stmt.run(k, JSON.stringify(v ?? null), now);
      })
      .immediate();
  }
}
