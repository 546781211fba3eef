import { UnrecoverableError } from 'bullmq';
import type { Handler } from '../context';

/** Re-embeds every flagged row in batches (the flags are the checkpoint; see ReindexService.run). */
export const reindex: Handler<'reindex'> = async (data, { job, ctx, yieldIfStopping }) => {
  if (!ctx.vectors.available()) throw new UnrecoverableError('sqlite-vec is not loaded in this worker; vectors cannot be built');
  return ctx.reindex.run(data, {
    progress: (p) => job.updateProgress(p),
    checkpoint: yieldIfStopping,
    // A retry of this job must resume, not start over: drop the force flag once it has been applied.
    forceApplied: () => job.updateData({ ...data, force: false }),
  });
};
