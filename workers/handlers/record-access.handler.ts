import { nowIso } from '../../src/db/connection';
import type { Handler } from '../context';

/**
 * Counts an injection of memories (access_count, last_accessed_at); never on the request path. Once per job: the
 * counts and the job's done tombstone commit together, so a run re-delivered after a crash before the ack adds nothing.
 */
export const recordAccess: Handler<'record-access'> = async (data, { ctx, job }) => {
  const jobId = job.id;
  const updated = jobId
    ? ctx.memory.recordAccess(data.memoryIds, nowIso(), data.counts, () => ctx.queues.claimOnce('record-access', jobId))
    : ctx.memory.recordAccess(data.memoryIds, nowIso(), data.counts);
  return updated === null ? { updated: 0, skipped: 'already_done' } : { updated };
};
