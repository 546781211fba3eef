import { memoryInput } from '../../test/factories';
import { tempStorage } from '../../test/helpers/storage';
import { nowIso } from '../db/connection';
import type { MemoryRepository } from './memory.repository';
import type { ChangeContext } from './types';

const api: ChangeContext = { source: 'api' };
const minutes = (n: number) => new Date(Date.now() + n * 60_000).toISOString();

/** The service's private repository (the test interleaves a write between its lookup and the delete). */
const repoOf = (s: ReturnType<typeof tempStorage>) => (s.memory as unknown as { repo: MemoryRepository }).repo;

describe('D8: expiry re-checks expires_at in the delete', () => {
  it('a fact re-asserted with a new expiry after the expiry lookup found it is kept; the others go', () => {
    const s = tempStorage();
    try {
      const kept = s.memory.create(memoryInput({ key: 'fact:tea', content: 'likes tea', expiresAt: minutes(-1) }), api).memory;
      const gone = s.memory.create(memoryInput({ key: 'fact:coffee', content: 'likes coffee', expiresAt: minutes(-1) }), api).memory;
      const renewed = minutes(60);
      const repo = repoOf(s);
      const lookup = repo.expiredIds.bind(repo);
      let interleaved = 0;
      // The lookup finds both; then, before the delete runs, the user states the tea fact again with a new expiry.
      repo.expiredIds = (now: string, limit: number) => {
        const ids = lookup(now, limit);
        if (interleaved++ === 0) s.memory.create(memoryInput({ key: 'fact:tea', content: 'likes tea', expiresAt: renewed }), { source: 'extraction' });
        return ids;
      };
      const now = nowIso();
      expect(s.memory.expireBatch(now, 100, { source: 'expiry', jobId: 'exp-1' })).toBe(1);
      expect(s.memory.get(kept.id)).toMatchObject({ content: 'likes tea', expiresAt: renewed });
      expect(s.memory.get(gone.id)).toBeNull();
      expect(s.memory.history(kept.id).map((e) => e.op)).not.toContain('expire');
      expect(s.memory.history(gone.id).map((e) => e.op)).toEqual(['create', 'expire']);
      // Nothing left to expire.
      expect(s.memory.expireBatch(nowIso(), 100, { source: 'expiry' })).toBe(0);
    } finally {
      s.close();
    }
  });
});
