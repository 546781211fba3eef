import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import * as sqliteVec from 'sqlite-vec';
import { MigrationError, migrate, readMigrations, resolveMigrationsDir } from '../../src/db/migrate';
import { RetrievalRepository } from '../../src/memory/retrieval.repository';
import { SqliteVecStore } from '../../src/vector/sqlite-vec.store';
import { silentLog, tempDir } from '../helpers/env';

const run = promisify(execFile);
const CLI = path.resolve(__dirname, '../../dist/src/cli.js');

function freshDb() {
  const dir = tempDir('mig');
  return { dir, db: new Database(path.join(dir, 'engram.db')) };
}

describe('migrations', () => {
  it('apply once, in order, with checksums in the ledger', () => {
    const { db } = freshDb();
    const files = readMigrations();
    const first = migrate(db, silentLog());
    expect(first.applied).toEqual(files.map((f) => f.name));
    const ledger = db.prepare('SELECT version, name, checksum FROM schema_migrations ORDER BY version').all() as { checksum: string }[];
    expect(ledger).toHaveLength(files.length);
    expect(ledger.map((r) => r.checksum)).toEqual(files.map((f) => f.checksum));
    const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type IN ('table','trigger')").all() as { name: string }[]).map((r) => r.name);
    for (const t of ['memories', 'memory_fts', 'memory_events', 'memory_vec_meta', 'settings', 'api_keys', 'outbox', 'memory_fts_ai', 'memory_fts_ad', 'memory_fts_au']) {
      expect(tables).toContain(t);
    }
    db.close();
  });

  it('is idempotent', () => {
    const { db } = freshDb();
    migrate(db, silentLog());
    expect(migrate(db, silentLog()).applied).toEqual([]);
    db.close();
  });

  it('refuses to start when an applied file was edited', () => {
    const { db } = freshDb();
    migrate(db, silentLog());
    const edited = tempDir('mig-edit');
    for (const f of fs.readdirSync(resolveMigrationsDir())) fs.copyFileSync(path.join(resolveMigrationsDir(), f), path.join(edited, f));
    fs.appendFileSync(path.join(edited, '0001_memories.sql'), '\n-- an innocent-looking edit\n');
    expect(() => migrate(db, silentLog(), readMigrations(edited))).toThrow(/0001_memories\.sql was edited/);
    db.close();
  });

  it('refuses a database that is newer than the code', () => {
    const { db } = freshDb();
    migrate(db, silentLog());
    db.prepare("INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (999, '0999_future.sql', 'x', 'now')").run();
    expect(() => migrate(db, silentLog())).toThrow(MigrationError);
    expect(() => migrate(db, silentLog())).toThrow(/newer than this code/);
    db.close();
  });

  it('rolls back a failing migration whole, recording nothing', () => {
    const { db } = freshDb();
    const dir = tempDir('mig-bad');
    fs.writeFileSync(path.join(dir, '0001_ok.sql'), 'CREATE TABLE a (x INTEGER);');
    fs.writeFileSync(path.join(dir, '0002_bad.sql'), 'CREATE TABLE b (x INTEGER); INSERT INTO nowhere VALUES (1);');
    expect(() => migrate(db, silentLog(), readMigrations(dir))).toThrow();
    const names = (db.prepare("SELECT name FROM sqlite_master WHERE type='table'").all() as { name: string }[]).map((r) => r.name);
    expect(names).toContain('a');
    expect(names).not.toContain('b');
    expect((db.prepare('SELECT COUNT(*) AS n FROM schema_migrations').get() as { n: number }).n).toBe(1);
    db.close();
  });

  it('0007 upgrades a database with vectors and keyword rows: the in-memory scan loads the vectors, the keyword index is rebuilt with tenant tokens', () => {
    const { db } = freshDb();
    sqliteVec.load(db);
    migrate(db, silentLog(), readMigrations().filter((f) => f.name < '0007'));
    // Vectors written by the code before 0007 (no log entries).
    db.exec(`CREATE VIRTUAL TABLE vec_memories USING vec0(memory_id INTEGER PRIMARY KEY, api_key_id TEXT PARTITION KEY, embedding float[4] distance_metric=cosine)`);
    db.prepare("UPDATE memory_vec_meta SET active_dim = 4, embedding_signature = 'static:m:4', last_reset_at = '2026-01-01T00:00:00.000Z', vec_loaded = 1 WHERE id = 1").run();
    const vectors: [string, number[]][] = [['k1', [1, 0, 0, 0]], ['k1', [0, 1, 0, 0]], ['k2', [1, 0, 0, 0]]];
    vectors.forEach(([key, v], i) => {
      const id = db.prepare("INSERT INTO memories (id, api_key_id, type, content, content_hash, needs_reindex) VALUES (?, ?, 'factual', 'x', 'h', 0)").run(`m${i}`, key).lastInsertRowid;
      db.prepare('INSERT INTO vec_memories (memory_id, api_key_id, embedding) VALUES (?, ?, ?)').run(BigInt(id), key, Buffer.from(new Float32Array(v).buffer));
    });
    expect(migrate(db, silentLog()).applied).toEqual(readMigrations().filter((f) => f.name >= '0007').map((f) => f.name));
    expect(db.prepare('SELECT generation, pruned_below FROM memory_vec_log_state').all()).toEqual([{ generation: 0, pruned_below: 0 }]);
    const store = new SqliteVecStore(db, { vecLoaded: true, quantization: 'none', scanCacheBytes: 1_048_576 });
    const hits = store.knn('k1', new Float32Array([1, 0.1, 0, 0]), 5, { nowIso: new Date().toISOString() });
    expect(hits.map((h) => h.id)).toEqual(['m0', 'm1']);
    expect(store.scanCache.tenants).toBe(1);
    // The keyword index was rebuilt with each row's tenant token (backfill of the rows written before).
    const repo = new RetrievalRepository(db);
    const f = (apiKeyId: string) => ({ apiKeyId, nowIso: new Date().toISOString(), freshAfterIso: null, sessionId: null });
    expect(repo.fts('"x"', f('k1'), 10).map((c) => c.record.id).sort()).toEqual(['m0', 'm1']);
    expect(repo.fts('"x"', f('k2'), 10).map((c) => c.record.id)).toEqual(['m2']);
    expect(db.prepare("SELECT count(*) AS n FROM memory_fts WHERE memory_fts MATCH 'fts_tenant : \"t6b31\"'").get()).toEqual({ n: 2 });
    db.prepare("INSERT INTO memory_fts(memory_fts, rank) VALUES ('integrity-check', 1)").run();
    db.close();
  });

  it('is safe when several processes start together', async () => {
    const dir = tempDir('mig-race');
    const env = { ...process.env, DATA_DIR: dir, LOG_LEVEL: 'silent', MANAGEMENT_TOKEN: 'x'.repeat(20) };
    const results = await Promise.all(Array.from({ length: 4 }, () => run(process.execPath, [CLI, 'migrate'], { env })));
    // Each file is applied by exactly one process (which one is a race), never twice.
    const applied = results.flatMap((r) => {
      const o = r.stdout.trim();
      return o.startsWith('applied: ') ? o.slice('applied: '.length).split(', ') : [];
    });
    expect(applied.sort()).toEqual(readMigrations().map((f) => f.name).sort());
    const db = new Database(path.join(dir, 'engram.db'));
    expect((db.prepare('SELECT COUNT(*) AS n FROM schema_migrations').get() as { n: number }).n).toBe(readMigrations().length);
    db.close();
  });
});
