import type { Handler } from '../context';

/** Brings one fallback backend up to date for one memory; a failure throws, so BullMQ retries with backoff. */
export const backendSync: Handler<'backend-sync'> = (data, { ctx }) => ctx.backends.syncFallback(data.backendId, data.memoryId);
