import type { Db } from '../db/connection';
import { StatementCache } from '../db/statement-cache';

/** Key → JSON value rows of the `settings` table. */
export class SettingsRepository {
  /** The api re-reads the settings every SETTINGS_CACHE_TTL_MS; preparing the SELECT each time cost more than running it. */
  private readonly stmts: StatementCache;

  constructor(private readonly db: Db) {
    this.stmts = new StatementCache(db);
  }

  all(): Record<string, unknown> {
    const rows = this.stmts.get('SELECT key, value FROM settings').all() as { key: string; value: string }[];
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
    const stmt = this.stmts.get(
      'INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at',
    );
    this.db
      .transaction(() => {
        for (const [k, v] of Object.entries(values)) stmt.run(k, JSON.stringify(v ?? null), now);
      })
      .immediate();
  }
}
