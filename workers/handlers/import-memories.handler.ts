import { UnrecoverableError } from 'bullmq';
import { UnusableUploadError } from '../../src/memory/import.service';
import type { Handler } from '../context';

/** Imports an uploaded NDJSON export or original-product database; a missing or unusable upload is not retried. */
export const importMemories: Handler<'import-memories'> = async (data, { job, ctx, yieldIfStopping }) => {
  try {
    return await ctx.importer.run(data, { jobId: job.id ?? `import-${data.uploadId}`, progress: (p) => job.updateProgress(p), checkpoint: yieldIfStopping });
  } catch (err) {
    if (err instanceof UnusableUploadError) throw new UnrecoverableError(err.message);
    throw err;
  }
};
