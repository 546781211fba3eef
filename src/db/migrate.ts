import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Db } from './connection';
import type { Logger } from '../logger';


export interface MigrationFile {
  version: number;
  name: string;
  sql: string;
  checksum: string;
}

/** Thrown when the database cannot be brought to the code's schema; the process must not start. */
export class MigrationError extends Error {}

const FILE_RE = /^(\d{4})_([a-z0-9_]+)\.sql$/;

/** Reads `migrations/*.sql` in version order. */
export function readMigrations(dir = resolveMigrationsDir()): MigrationFile[] {
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.sql')).sort();
  const out: MigrationFile[] = [];
  for (const f of files) {
    const m = FILE_RE.exec(f);
    if (!m) throw new MigrationError(`migration file name ${f} does not match NNNN_name.sql`);
    const sql = fs.readFileSync(path.join(dir, f), 'utf8');
    out.push({ version: Number(m[1]), name: f, sql, checksum: crypto.createHash('sha256').update(sql).digest('hex') });
  }
  out.forEach((mf, i) => {
    if (mf.version !== i + 1) throw new MigrationError(`migrations must be numbered 0001.. without gaps; found ${mf.name} at position ${i + 1}`);
  });
  return out;
}

/** Finds the migrations folder both from src/ (ts-jest) and dist/src/ (built). */
export function resolveMigrationsDir(): string {
  for (const up of [2, 3]) {
    const dir = path.resolve(__dirname, ...Array(up).fill('..'), 'migrations');
    if (fs.existsSync(dir)) return dir;
  }
  throw new MigrationError('migrations folder not found');
}

/**
 * Applies pending migrations, each in its own BEGIN IMMEDIATE transaction, recording a checksum.
 * Refuses when an applied file changed or the database is newer than the code. Safe when two
 * processes start together: the ledger is re-read under the write lock.
 */
export function migrate(db: Db, log: Logger, files: MigrationFile[] = readMigrations()): { applied: string[] } {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    checksum TEXT NOT NULL,
    applied_at TEXT NOT NULL
  )`);
  const byVersion = new Map(files.map((f) => [f.version, f]));
  const ledger = () =>
    db.prepare('SELECT version, name, checksum FROM schema_migrations ORDER BY version').all() as {
      version: number;
      name: string;
      checksum: string;
    }[];

  const check = () => {
    for (const row of ledger()) {
      const f = byVersion.get(row.version);
      if (!f) {
        throw new MigrationError(
          `database is newer than this code: migration ${row.name} (version ${row.version}) is applied but not present; upgrade Engram`,
        );
      }
      if (f.checksum !== row.checksum) {
        throw new MigrationError(`applied migration ${row.name} was edited (checksum differs); migrations are append-only — add a new file instead`);
      }
    }
  };
  check();

  const applied: string[] = [];
  const insert = db.prepare('INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)');
  const isApplied = db.prepare('SELECT checksum FROM schema_migrations WHERE version = ?');
  for (const f of files) {
    const run = db.transaction(() => {
      const row = isApplied.get(f.version) as { checksum: string } | undefined;
      if (row) {
        if (row.checksum !== f.checksum) throw new MigrationError(`applied migration ${f.name} was edited (checksum differs)`);
        return false;
      }
      db.exec(f.sql);
      insert.run(f.version, f.name, f.checksum, new Date().toISOString());
      return true;
    });
    if (run.immediate()) {
      applied.push(f.name);
      log.info({ migration: f.name }, 'migration applied');
    }
  }
  check();
  return { applied };
}
