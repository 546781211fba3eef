import crypto from 'node:crypto';
import type { Db } from '../db/connection';
import { AdminSessionRepository } from './admin-session.repository';

/** How long a browser session lives, from login (absolute, not sliding). */
export const ADMIN_SESSION_TTL_MS = 12 * 3600 * 1000;
/** Ended sessions are kept this long (for an operator's forensics), then deleted. */
const KEEP_ENDED_MS = 7 * 24 * 3600 * 1000;
const SESSION_ID_RE = /^[A-Za-z0-9_-]{43}$/;

const sha256 = (s: string) => crypto.createHash('sha256').update(s, 'utf8').digest('hex');

/**
 * A one-way fingerprint of the management token (HMAC-SHA-256; the token is at least 16 characters
 * and 32 random bytes when generated, like the API keys stored as sha-256). Not scrypt: its native
 * request lingers as an async resource and jest's --detectOpenHandles reports it.
 */
function tokenFingerprint(token: string): string {
  return crypto.createHmac('sha256', 'engram-admin-sessions-v1').update(token, 'utf8').digest('hex');
}

/**
 * Operators' browser sessions: a random id in an HttpOnly cookie, its sha-256 in SQLite with an expiry.
 * Logout revokes one; a new management token revokes all (checked on every request and swept at start).
 */
export class AdminSessionService {
  private readonly repo: AdminSessionRepository;
  private readonly fingerprint: string;

  constructor(
    db: Db,
    managementToken: string,
    private readonly opts: { ttlMs?: number; now?: () => number } = {},
  ) {
    this.repo = new AdminSessionRepository(db);
    this.fingerprint = tokenFingerprint(managementToken);
    const now = this.now();
    this.repo.revokeOtherTokens(this.fingerprint, new Date(now).toISOString());
    this.repo.deleteEndedBefore(new Date(now - KEEP_ENDED_MS).toISOString());
  }

  private now(): number {
    return this.opts.now?.() ?? Date.now();
  }

  /** Opens a session; the returned id is the cookie value and exists nowhere else. */
  create(): { id: string; expiresAt: string; maxAgeMs: number } {
    const id = crypto.randomBytes(32).toString('base64url');
    const now = this.now();
    const maxAgeMs = this.opts.ttlMs ?? ADMIN_SESSION_TTL_MS;
    const expiresAt = new Date(now + maxAgeMs).toISOString();
    this.repo.insert({ idHash: sha256(id), tokenFingerprint: this.fingerprint, createdAt: new Date(now).toISOString(), expiresAt });
    // Logins are rare: pruning here keeps the table small in a process that runs for months.
    this.repo.deleteEndedBefore(new Date(now - KEEP_ENDED_MS).toISOString());
    return { id, expiresAt, maxAgeMs };
  }

  /** Whether a presented cookie value is a live session of the current token. */
  verify(id: string | undefined): boolean {
    if (typeof id !== 'string' || !SESSION_ID_RE.test(id)) return false;
    return this.repo.findActive(sha256(id), this.fingerprint, new Date(this.now()).toISOString()) !== null;
  }

  /** Ends a session (logout); false when it was unknown or already ended. */
  revoke(id: string | undefined): boolean {
    if (typeof id !== 'string' || !SESSION_ID_RE.test(id)) return false;
    return this.repo.revoke(sha256(id), new Date(this.now()).toISOString());
  }
}
