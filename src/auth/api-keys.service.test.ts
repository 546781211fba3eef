import Database from 'better-sqlite3';
import { tempStorage } from '../../test/helpers/storage';
import { ApiKeyRepository } from './api-key.repository';
import { ApiKeyService } from './api-keys.service';

describe('ApiKeyService.verify cache', () => {
  let s: ReturnType<typeof tempStorage>;
  beforeEach(() => {
    s = tempStorage();
  });
  afterEach(() => s.close());

  it('a key that verified is not looked up again while no key changed', () => {
    const svc = new ApiKeyService(s.db.db);
    const { id, key } = svc.create('laptop');
    const lookups = jest.spyOn(ApiKeyRepository.prototype, 'findActiveByHash');
    try {
      expect(svc.verify(key)?.id).toBe(id);
      expect(svc.verify(key)?.id).toBe(id);
      expect(svc.verify(key)?.id).toBe(id);
      expect(lookups).toHaveBeenCalledTimes(1);
      // An unknown secret is never remembered: each attempt reaches the table.
      expect(svc.verify('egk_nope')).toBeNull();
      expect(svc.verify('egk_nope')).toBeNull();
      expect(lookups).toHaveBeenCalledTimes(3);
    } finally {
      lookups.mockRestore();
    }
  });

  it('a revocation through this service is effective on the next verify', () => {
    const svc = new ApiKeyService(s.db.db);
    const { id, key } = svc.create('laptop');
    expect(svc.verify(key)?.id).toBe(id);
    expect(svc.revoke(id)).toBe(true);
    expect(svc.verify(key)).toBeNull();
  });

  it('a revocation through another service on the same connection is effective on the next verify', () => {
    const svc = new ApiKeyService(s.db.db);
    const { id, key } = svc.create('laptop');
    expect(svc.verify(key)?.id).toBe(id);
    expect(new ApiKeyService(s.db.db).revoke(id)).toBe(true);
    expect(svc.verify(key)).toBeNull();
  });

  it('a revocation by another connection (`engram keys revoke` in its own process) is effective from the next event-loop turn', async () => {
    const svc = new ApiKeyService(s.db.db);
    const { id, key } = svc.create('laptop');
    expect(svc.verify(key)?.id).toBe(id);
    const other = new Database(s.db.file);
    try {
      other.pragma('busy_timeout = 5000');
      expect(other.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ?').run(new Date().toISOString(), id).changes).toBe(1);
    } finally {
      other.close();
    }
    // Requests parsed in one turn share one read of data_version: the same turn still sees the key it verified.
    expect(svc.verify(key)?.id).toBe(id);
    await new Promise((r) => setImmediate(r));
    expect(svc.verify(key)).toBeNull();
  });
});
