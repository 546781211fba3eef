import type { Handler } from '../context';

/** Makes Qdrant match SQLite for these memories (errors throw: BullMQ retries until Qdrant answers). */
export const qdrantSync: Handler<'qdrant-sync'> = (data, { ctx }) => ctx.qdrantSync.sync(data.memoryIds);
