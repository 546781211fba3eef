import crypto from 'node:crypto';
import type { Db } from '../db/connection';
import { nowIso } from '../db/connection';
import { ApiKeyRepository, type ApiKeyRecord } from './api-key.repository';

export const KEY_PREFIX = 'egk_';
const TOUCH_EVERY_MS = 60_000;

/** sha-256 hex of a secret. */
export function hashSecret(secret: string): string {
  return crypto.createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** Client API keys: created with a secret shown once, verified by hash, revoked immediately. */
export class ApiKeyService {
  private readonly repo: ApiKeyRepository;
  private readonly lastTouched = new Map<string, number>();

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

  /** Revokes; false if unknown or already revoked. Effective on the next request (no cache). */
  revoke(id: string): boolean {
    return this.repo.revoke(id, nowIso());
  }

  /** Resolves a presented secret to its active key, or null. `last_used_at` is written at most once a minute per key. */
  verify(secret: string): ApiKeyRecord | null {
    if (!secret.startsWith(KEY_PREFIX) || secret.length > 256) return null;
    const rec = this.repo.findActiveByHash(hashSecret(secret));
    if (!rec) return null;
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
