import { nowIso } from '../../src/db/connection';
import type { Handler } from '../context';

/** Counts an injection of memories (access_count, last_accessed_at); never on the request path. */
export const recordAccess: Handler<'record-access'> = async (data, { ctx }) => ({ updated: ctx.memory.recordAccess(data.memoryIds, nowIso(), data.counts) });
