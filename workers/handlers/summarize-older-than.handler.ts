import type { Handler } from '../context';

/** One summary per API key of the memories older than the cutoff (fixed by the job's creation time), candidates deleted into history. */
export const summarizeOlderThan: Handler<'summarize-older-than'> = (data, { job, ctx, yieldIfStopping }) =>
  ctx.summarize.run(data, job.timestamp, { jobId: job.id ?? 'summarize', progress: (p) => job.updateProgress(p), checkpoint: yieldIfStopping });
