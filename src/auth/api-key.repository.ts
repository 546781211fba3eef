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

/** SQL over `api_keys`; secrets only ever appear here as their sha-256. */
export class ApiKeyRepository {
  /** Every /v1 request looks its key up: preparing the SELECT cost more than running it (bench/README.md, proxy-targets). */
  private readonly stmts: StatementCache;

  constructor(db: Db) {
    this.stmts = new StatementCache(db);
  }

  insert(r: { id: string; name: string; secretHash: string; prefix: string; createdAt: string }): void {
    this.stmts
      .get('INSERT INTO api_keys (id, name, secret_hash, prefix, created_at) VALUES (?, ?, ?, ?, ?)')
      .run(r.id, r.name, r.secretHash, r.prefix, r.createdAt);
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
    return this.stmts.get('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(at, id).changes > 0;
  }

  touch(id: string, at: string): void {
    this.stmts.get('UPDATE api_keys SET last_used_at = ? WHERE id = ?').run(at, id);
  }
}
