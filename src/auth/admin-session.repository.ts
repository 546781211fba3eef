import type { Db } from '../db/connection';

/** One admin session row (the id itself is never stored, only its sha-256). */
export interface AdminSessionRow {
  idHash: string;
  tokenFingerprint: string;
  createdAt: string;
  expiresAt: string;
  revokedAt: string | null;
}

/** SQL over `admin_sessions`. Times are ISO-8601 UTC strings, so they compare as text. */
export class AdminSessionRepository {
  constructor(private readonly db: Db) {}

  insert(r: { idHash: string; tokenFingerprint: string; createdAt: string; expiresAt: string }): void {
    this.db
      .prepare('INSERT INTO admin_sessions (id_hash, token_fingerprint, created_at, expires_at) VALUES (?, ?, ?, ?)')
      .run(r.idHash, r.tokenFingerprint, r.createdAt, r.expiresAt);
  }

  /** The session if it is not revoked, not expired at `now` and was opened with this token. */
  findActive(idHash: string, tokenFingerprint: string, now: string): AdminSessionRow | null {
    const r = this.db
      .prepare(
        `SELECT id_hash, token_fingerprint, created_at, expires_at, revoked_at FROM admin_sessions
         WHERE id_hash = ? AND token_fingerprint = ? AND revoked_at IS NULL AND expires_at > ?`,
      )
      .get(idHash, tokenFingerprint, now) as
      | { id_hash: string; token_fingerprint: string; created_at: string; expires_at: string; revoked_at: string | null }
      | undefined;
    return r ? { idHash: r.id_hash, tokenFingerprint: r.token_fingerprint, createdAt: r.created_at, expiresAt: r.expires_at, revokedAt: r.revoked_at } : null;
  }

  revoke(idHash: string, at: string): boolean {
    return this.db.prepare('UPDATE admin_sessions SET revoked_at = ? WHERE id_hash = ? AND revoked_at IS NULL').run(at, idHash).changes > 0;
  }

  /** Revokes every live session opened with a different token; returns how many. */
  revokeOtherTokens(tokenFingerprint: string, at: string): number {
    return this.db.prepare('UPDATE admin_sessions SET revoked_at = ? WHERE token_fingerprint <> ? AND revoked_at IS NULL').run(at, tokenFingerprint).changes;
  }

  /** Deletes sessions that expired or were revoked before `cutoff`. */
  deleteEndedBefore(cutoff: string): number {
    return this.db.prepare('DELETE FROM admin_sessions WHERE expires_at < ? OR revoked_at < ?').run(cutoff, cutoff).changes;
  }
}
