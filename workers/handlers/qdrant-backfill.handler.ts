import type { Handler } from '../context';

/** Copies every memory's sqlite-vec vector into Qdrant; the cursor lives in the job data, so a retry or a restarted worker resumes. */
export const qdrantBackfill: Handler<'qdrant-backfill'> = (data, { job, ctx, yieldIfStopping }) =>
  ctx.qdrantSync.backfill(data, {
    progress: (p) => job.updateProgress(p),
    checkpoint: yieldIfStopping,
    saveCursor: (c) => job.updateData({ ...data, ...c }),
  });
