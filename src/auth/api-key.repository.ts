import type { Db } from '../db/connection';
import { StatementCache } from '../db/statement-cache';

export interface ApiKeyRecord {
  id: string;
  name: string;
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

interface Row {
  id: string;
  name: string;
  prefix: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

const toRecord = (r: Row): ApiKeyRecord => ({
  id: r.id,
  name: r.name,
  prefix: r.prefix,
  createdAt: r.created_at,
  lastUsedAt: r.last_used_at,
  revokedAt: r.revoked_at,
});

/** Writes to `api_keys` per connection, by any repository on it (SQLite's data_version only counts other connections' commits). */
const localWrites = new WeakMap<Db, number>();

/** SQL over `api_keys`; secrets only ever appear here as their sha-256. */
export class ApiKeyRepository {
  /** Every /v1 request looks its key up: preparing the SELECT cost more than running it (bench/README.md, proxy-targets). */
  private readonly stmts: StatementCache;

  constructor(private readonly db: Db) {
    this.stmts = new StatementCache(db);
  }

  /** Other connections' commit count as last read, and whether that read belongs to the current event-loop turn. */
  private otherVersion = 0;
  private otherRead = false;
  private readonly endTurn = (): void => {
    this.otherRead = false;
  };

  /**
   * Changes whenever a key may have been created or revoked since the last call returned the same value: SQLite's
   * `data_version` (another connection, e.g. `engram keys revoke` in its own process, committed) paired with the
   * writes of this connection, which count at once.
   *
   * `data_version` is read once per event-loop turn: the requests parsed in one poll phase share the read, which is
   * at most one turn old (well under a millisecond under load). Each read is a read transaction; under load it was
   * ~21 µs of the api's CPU per chat (bench/README.md, proxy-targets, eleventh pass).
   */
  changeStamp(): string {
    if (!this.otherRead) {
      this.otherVersion = this.stmts.get('PRAGMA data_version').pluck().get() as number;
      this.otherRead = true;
      setImmediate(this.endTurn);
    }
    return `${this.otherVersion}:${localWrites.get(this.db) ?? 0}`;
  }

  private wrote(): void {
    localWrites.set(this.db, (localWrites.get(this.db) ?? 0) + 1);
  }

  insert(r: { id: string; name: string; secretHash: string; prefix: string; createdAt: string }): void {
    this.stmts
      .get('INSERT INTO api_keys (id, name, secret_hash, prefix, created_at) VALUES (?, ?, ?, ?, ?)')
      .run(r.id, r.name, r.secretHash, r.prefix, r.createdAt);
    this.wrote();
  }

  list(): ApiKeyRecord[] {
    return (this.stmts.get('SELECT * FROM api_keys ORDER BY created_at DESC, id').all() as Row[]).map(toRecord);
  }

  findById(id: string): ApiKeyRecord | null {
    const r = this.stmts.get('SELECT * FROM api_keys WHERE id = ?').get(id) as Row | undefined;
    return r ? toRecord(r) : null;
  }

  findActiveByHash(secretHash: string): ApiKeyRecord | null {
    const r = this.stmts.get('SELECT * FROM api_keys WHERE secret_hash = ? AND revoked_at IS NULL').get(secretHash) as Row | undefined;
    return r ? toRecord(r) : null;
  }

  revoke(id: string, at: string): boolean {
    const changed = this.stmts.get('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(at, id).changes > 0;
    this.wrote();
    return changed;
  }

  touch(id: string, at: string): void {
    this.stmts.get('UPDATE api_keys SET last_used_at = ? WHERE id = ?').run(at, id);
  }
}
