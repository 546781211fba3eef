import type { Registry } from './context';
import { embedMemory } from './handlers/embed-memory.handler';
import { expireMemories } from './handlers/expire-memories.handler';
import { extractFacts } from './handlers/extract-facts.handler';
import { qdrantBackfill } from './handlers/qdrant-backfill.handler';
import { qdrantCleanup } from './handlers/qdrant-cleanup.handler';
import { qdrantSync } from './handlers/qdrant-sync.handler';
import { recordAccess } from './handlers/record-access.handler';
import { reindex } from './handlers/reindex.handler';
import { repairSweep } from './handlers/repair-sweep.handler';

/** Every job of src/queue/jobs.ts → its handler. Adding a job to the map without one here does not compile. */
export const registry: Registry = {
  'expire-memories': expireMemories,
  'repair-sweep': repairSweep,
  'extract-facts': extractFacts,
  'embed-memory': embedMemory,
  reindex,
  'record-access': recordAccess,
  'qdrant-sync': qdrantSync,
  'qdrant-backfill': qdrantBackfill,
  'qdrant-cleanup': qdrantCleanup,
};
