import { nowIso } from '../../src/db/connection';
import type { Handler } from '../context';

/** Deletes memories past `expires_at` through the store (history, vectors, cache follow), batch by batch. */
export const expireMemories: Handler<'expire-memories'> = async (data, { job, ctx, yieldIfStopping }) => {
  const now = nowIso();
  let deleted = 0;
  for (;;) {
    await yieldIfStopping();
    const ids = ctx.memory.repo.expiredIds(now, data.batchSize);
    if (ids.length === 0) break;
    deleted += ctx.memory.deleteMany(ids, { source: 'expiry', jobId: job.id ?? null }, 'expire');
    await job.updateProgress({ phase: 'deleting', done: deleted });
  }
  return { deleted };
};
