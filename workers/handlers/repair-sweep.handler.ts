import type { Handler } from '../context';

/**
 * Catches what a crash or a Redis outage left behind: moves outbox rows into their queues (same
 * ids, so nothing runs twice; a row that can never be added is quarantined, not retried), re-adds
 * durable records (extract-facts) a Redis restarted empty may have lost, prunes old tombstones, deletes
 * vectors whose memory is gone (a delete made where sqlite-vec was not loaded, or outside Engram),
 * starts a reindex when the index drifted from the model in effect, and otherwise queues
 * `embed-memory` for rows still flagged.
 */
export const repairSweep: Handler<'repair-sweep'> = async (data, { job, ctx, yieldIfStopping }) => {
  const outbox = await ctx.queues.flushOutbox(data.batchSize);
  const pruned = ctx.queues.pruneOutbox();
  await job.updateProgress({ phase: 'outbox', done: outbox.moved, remaining: outbox.remaining, quarantined: outbox.quarantined });
  // Quarantined rows are not "remaining": they never block a sweep (an operator deletes them).
  if (outbox.remaining > 0) throw new Error(`outbox not drained: ${outbox.remaining} rows remain`);
  // Whatever the embedding settings now are: the vectors were written under earlier ones.
  const orphanVectorsPruned = ctx.vectors.pruneOrphans(data.batchSize);
  const base = { reason: data.reason, outboxMoved: outbox.moved, outboxQuarantined: outbox.quarantined, outboxPruned: pruned.done + pruned.quarantined, orphanVectorsPruned };

  const settings = ctx.settings.memoryFresh();
  if (!ctx.vectors.available() || !ctx.embedding.resolve(settings).source) {
    // No vectors to build: flagged rows wait (keyword retrieval serves them) until a source is configured.
    return { ...base, embedQueued: 0, skipped: 'no_vector_tier' };
  }
  const drift = await ctx.reindex.reindexOnDrift();
  if (drift.jobId) return { ...base, embedQueued: 0, drift: drift.drift, reindexJobId: drift.jobId };
  const queued = await ctx.reindex.enqueueFlagged(data.batchSize, { checkpoint: yieldIfStopping, progress: (p) => job.updateProgress(p) });
  return { ...base, embedQueued: queued };
};
