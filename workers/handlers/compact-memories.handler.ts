import type { Handler } from '../context';

/** Folds one tenant's oldest, least-accessed memories into summaries when it holds more than compactFactor budgets. */
export const compactMemories: Handler<'compact-memories'> = (data, { job, ctx, yieldIfStopping }) =>
  ctx.summarize.compact(data.apiKeyId, { jobId: job.id ?? 'compact', progress: (p) => job.updateProgress(p), checkpoint: yieldIfStopping });
