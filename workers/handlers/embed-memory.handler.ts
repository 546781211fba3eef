import type { Handler } from '../context';

/** Embeds one memory and upserts its vector (the reindex service re-reads the row and skips obsolete work). */
export const embedMemory: Handler<'embed-memory'> = (data, { ctx }) => ctx.reindex.embedOne(data.memoryId, data.contentHash);
