import { nowIso } from '../../src/db/connection';
import type { Handler } from '../context';

/** Deletes memories past `expires_at` through the store (history, vectors, cache follow), batch by batch. */
export const expireMemories: Handler<'expire-memories'> = async (data, { job, ctx, yieldIfStopping }) => {
  const now = nowIso();
  let deleted = 0;
  for (;;) {
    await yieldIfStopping();
    const n = ctx.memory.expireBatch(now, data.batchSize, { source: 'expiry', jobId: job.id ?? null });
    if (n === 0) break;
    deleted += n;
    await job.updateProgress({ phase: 'deleting', done: deleted });
  }
  return { deleted };
};
