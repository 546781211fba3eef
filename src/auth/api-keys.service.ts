import crypto from 'node:crypto';
import type { Db } from '../db/connection';
import { nowIso } from '../db/connection';
import { ApiKeyRepository, type ApiKeyRecord } from './api-key.repository';

export const KEY_PREFIX = 'egk_';
const TOUCH_EVERY_MS = 60_000;
/** Active keys remembered by secret hash (more distinct keys than this in use: the map starts over). */
const VERIFIED_MAX = 1_000;

/** sha-256 hex of a secret (one-shot `crypto.hash`: a Hash object per /v1 request cost ~4 µs of the ~1 µs digest). */
export function hashSecret(secret: string): string {
  return crypto.hash('sha256', secret, 'hex');
}

/** Client API keys: created with a secret shown once, verified by hash, revoked immediately. */
export class ApiKeyService {
  private readonly repo: ApiKeyRepository;
  private readonly lastTouched = new Map<string, number>();
  /**
   * Active keys by secret hash, valid while `stamp` is the repository's change stamp: a key created or revoked
   * anywhere (this process or another on the same database) empties it before the next request is verified.
   * Only keys that verified are kept: an unknown secret is looked up every time.
   */
  private verified = new Map<string, ApiKeyRecord>();
  private stamp = '';

  constructor(db: Db) {
    this.repo = new ApiKeyRepository(db);
  }

  /** Creates a key; the returned `key` is the only time the secret exists outside the caller. */
  create(name: string): ApiKeyRecord & { key: string } {
    const secret = KEY_PREFIX + crypto.randomBytes(32).toString('base64url');
    const rec = { id: crypto.randomUUID(), name, secretHash: hashSecret(secret), prefix: secret.slice(0, 12), createdAt: nowIso() };
    this.repo.insert(rec);
    return { id: rec.id, name, prefix: rec.prefix, createdAt: rec.createdAt, lastUsedAt: null, revokedAt: null, key: secret };
  }

  list(): ApiKeyRecord[] {
    return this.repo.list();
  }

  get(id: string): ApiKeyRecord | null {
    return this.repo.findById(id);
  }

  /** Revokes; false if unknown or already revoked. Effective on the next request (the verified-key cache is dropped on any key change). */
  revoke(id: string): boolean {
    return this.repo.revoke(id, nowIso());
  }

  /** Resolves a presented secret to its active key, or null. `last_used_at` is written at most once a minute per key. */
  verify(secret: string): ApiKeyRecord | null {
    if (!secret.startsWith(KEY_PREFIX) || secret.length > 256) return null;
    const hash = hashSecret(secret);
    const stamp = this.repo.changeStamp();
    if (stamp !== this.stamp || this.verified.size >= VERIFIED_MAX) {
      this.verified = new Map();
      this.stamp = stamp;
    }
    let rec = this.verified.get(hash) ?? null;
    if (!rec) {
      rec = this.repo.findActiveByHash(hash);
      if (!rec) return null;
      this.verified.set(hash, rec);
    }
    const now = Date.now();
    if ((this.lastTouched.get(rec.id) ?? 0) + TOUCH_EVERY_MS < now) {
      this.lastTouched.set(rec.id, now);
      try {
        this.repo.touch(rec.id, new Date(now).toISOString());
      } catch {
        // SQLITE_BUSY on a bookkeeping write must never fail a request.
      }
    }
    return rec;
  }
}
