import { UnrecoverableError } from 'bullmq';
import type { Handler } from '../context';

/**
 * Re-embeds every flagged row in batches. The `needs_reindex` flag is the checkpoint: a crash or
 * a hand-back resumes with what is still flagged. A changed model signature rebuilds the index
 * (flagging every row) here and only here. Rows that fail stay flagged and are counted.
 */
export const reindex: Handler<'reindex'> = async (data, { job, ctx, log, yieldIfStopping }) => {
  const settings = ctx.settings.memoryFresh();
  if (!ctx.vectors.available()) throw new UnrecoverableError('sqlite-vec is not loaded in this worker; vectors cannot be built');
  if (!ctx.embedding.resolve(settings).source) {
    return { phase: 'skipped', reason: ctx.embedding.resolve(settings).reason || 'no embedding source configured', done: 0, total: 0, failed: 0 };
  }

  if (data.force) {
    const flagged = ctx.vectors.markAllNeedsReindex();
    // A retry of this job must resume, not start over: drop the force flag once it has been applied.
    await job.updateData({ ...data, force: false });
    log.info({ flagged }, 'reindex: every memory flagged');
  }

  // Measure the model (dimensions are never assumed) and make sure the index matches it.
  const probe = await ctx.embedding.embedOne('engram dimension probe', settings);
  const signature = ctx.vectors.signatureFor(probe.resolution);
  const dim = probe.resolution.dimensions;
  if (!signature || !dim) throw new Error('could not measure the embedding dimensions');
  let rebuilt = false;
  if (!ctx.vectors.isCompatible(signature)) {
    const { flagged } = ctx.vectors.rebuild(signature, dim);
    rebuilt = true;
    log.info({ signature, flagged }, 'reindex: index rebuilt for a new embedding signature');
  }

  const total = ctx.vectors.countPending();
  let done = 0;
  let failed = 0;
  let cursor = 0;
  await job.updateProgress({ phase: 'embedding', done, total, failed });
  for (;;) {
    await yieldIfStopping();
    const rows = ctx.vectors.pendingReindex(data.batchSize, cursor);
    if (rows.length === 0) break;
    cursor = rows[rows.length - 1].memoryId;
    try {
      const { vectors } = await ctx.embedding.embedMany(
        rows.map((r) => r.content),
        settings,
      );
      const res = ctx.vectors.upsertMany(
        rows.map((r, i) => ({ memoryId: r.memoryId, apiKeyId: r.apiKeyId, vector: vectors[i] ?? new Float32Array(dim), contentHash: r.contentHash })),
        signature,
      );
      done += rows.length - res.missing;
    } catch (err) {
      failed += rows.length;
      log.warn({ err: { message: (err as Error).message }, rows: rows.length }, 'reindex: batch failed; its rows stay flagged');
    }
    await job.updateProgress({ phase: 'embedding', done, total, failed });
  }
  if (total > 0 && done === 0 && failed > 0) throw new Error(`reindex: every batch failed (${failed} rows still flagged)`);
  const result = { phase: 'done', done, total, failed, signature, rebuilt };
  await job.updateProgress(result);
  return result;
};
