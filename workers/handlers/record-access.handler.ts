import { nowIso } from '../../src/db/connection';
import { RetrievalRepository } from '../../src/db/repositories/retrieval.repository';
import type { Handler } from '../context';

/** Counts an injection of memories (access_count, last_accessed_at); never on the request path. */
export const recordAccess: Handler<'record-access'> = async (data, { ctx }) => {
  const ids = [...new Set(data.memoryIds)];
  return { updated: new RetrievalRepository(ctx.db.db).recordAccess(ids, nowIso()) };
};
