import type { Handler } from '../context';

/** Counts, then deletes Qdrant points that are expired or whose memory is gone. */
export const qdrantCleanup: Handler<'qdrant-cleanup'> = (data, { job, ctx, yieldIfStopping }) =>
  ctx.qdrantSync.cleanup(data.batchSize, { progress: (p) => job.updateProgress(p), checkpoint: yieldIfStopping });
