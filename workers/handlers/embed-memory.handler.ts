import { requestReindex } from '../../src/queue/reindex-request';
import type { Handler } from '../context';

/**
 * Embeds one memory and upserts its vector. Re-reads the row: gone or edited since the job was
 * queued → skip (a newer job carries the new hash). A model change is not handled here: it
 * starts the reindex job, which rebuilds the index and re-embeds every row.
 */
export const embedMemory: Handler<'embed-memory'> = async (data, { ctx }) => {
  const row = ctx.memory.repo.findById(data.memoryId);
  if (!row) return { skipped: 'memory_gone' };
  if (row.contentHash !== data.contentHash) return { skipped: 'content_changed' };
  if (!ctx.vectors.available()) return { skipped: 'vector_store_unavailable' };
  const settings = ctx.settings.memoryFresh();
  if (!ctx.embedding.resolve(settings).source) return { skipped: 'no_embedding_source' };

  // Embedding errors throw: BullMQ retries with backoff, and the row stays flagged meanwhile.
  const { vector, resolution } = await ctx.embedding.embedOne(row.content, settings);
  const signature = ctx.vectors.signatureFor(resolution);
  if (!signature) return { skipped: 'dimensions_unknown' };
  if (!ctx.vectors.isCompatible(signature)) {
    const { jobId } = await requestReindex(ctx.queues, 'auto');
    return { skipped: 'index_signature_changed', reindexJobId: jobId };
  }
  const res = vector
    ? ctx.vectors.upsert(row.memoryId, row.apiKeyId, vector, data.contentHash, signature)
    : ctx.vectors.upsert(row.memoryId, row.apiKeyId, new Float32Array(resolution.dimensions ?? 0), data.contentHash, signature);
  return { stored: res.stored, cleared: res.cleared, skipped: res.skipped };
};
