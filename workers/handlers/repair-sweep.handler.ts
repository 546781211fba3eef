import { requestReindex } from '../../src/queue/reindex-request';
import type { Handler } from '../context';

/**
 * Catches what a crash or a Redis outage left behind: moves outbox rows into their queues (same
 * ids, so nothing runs twice), then queues `embed-memory` for rows still flagged `needs_reindex`
 * (deterministic ids: a row with a live job is not queued again).
 */
export const repairSweep: Handler<'repair-sweep'> = async (data, { job, ctx, yieldIfStopping }) => {
  const outbox = await ctx.queues.flushOutbox(data.batchSize);
  await job.updateProgress({ phase: 'outbox', done: outbox.moved, remaining: outbox.remaining });
  if (outbox.remaining > 0) throw new Error(`outbox not drained: ${outbox.remaining} rows remain`);

  const settings = ctx.settings.memoryFresh();
  if (!ctx.vectors.available() || !ctx.embedding.resolve(settings).source) {
    // No vectors to build: flagged rows wait (keyword retrieval serves them) until a source is configured.
    return { reason: data.reason, outboxMoved: outbox.moved, embedQueued: 0, skipped: 'no_vector_tier' };
  }
  const signature = ctx.vectors.currentSignature();
  const current = ctx.vectors.signatureFor(ctx.embedding.resolve(settings));
  if (!signature || (current && current !== signature)) {
    // The index does not match the model: the reindex job (singleton) rebuilds and re-embeds everything.
    const { jobId } = await requestReindex(ctx.queues, 'auto');
    return { reason: data.reason, outboxMoved: outbox.moved, embedQueued: 0, reindexJobId: jobId };
  }
  let queued = 0;
  let cursor = 0;
  for (;;) {
    await yieldIfStopping();
    const rows = ctx.vectors.pendingReindex(data.batchSize, cursor);
    if (rows.length === 0) break;
    cursor = rows[rows.length - 1].memoryId;
    queued += await ctx.queues.enqueueMany(
      'embed-memory',
      rows.map((r) => ({ memoryId: r.id, contentHash: r.contentHash })),
    );
    await job.updateProgress({ phase: 'flagged', done: queued });
  }
  return { reason: data.reason, outboxMoved: outbox.moved, embedQueued: queued };
};
