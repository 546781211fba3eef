import type { Registry } from './context';
import { backendSync } from './handlers/backend-sync.handler';
import { embedMemory } from './handlers/embed-memory.handler';
import { expireMemories } from './handlers/expire-memories.handler';
import { extractFacts } from './handlers/extract-facts.handler';
import { qdrantBackfill } from './handlers/qdrant-backfill.handler';
import { qdrantCleanup } from './handlers/qdrant-cleanup.handler';
import { qdrantSync } from './handlers/qdrant-sync.handler';
import { recordAccess } from './handlers/record-access.handler';
import { reindex } from './handlers/reindex.handler';
import { repairSweep } from './handlers/repair-sweep.handler';
import { autoCompact } from './handlers/auto-compact.handler';
import { compactMemories } from './handlers/compact-memories.handler';
import { importMemories } from './handlers/import-memories.handler';
import { summarizeOlderThan } from './handlers/summarize-older-than.handler';

/** Every job of src/queue/jobs.ts → its handler. Adding a job to the map without one here does not compile. */
export const registry: Registry = {
  'expire-memories': expireMemories,
  'repair-sweep': repairSweep,
  'extract-facts': extractFacts,
  'embed-memory': embedMemory,
  reindex,
  'record-access': recordAccess,
  'backend-sync': backendSync,
  'summarize-older-than': summarizeOlderThan,
  'compact-memories': compactMemories,
  'auto-compact': autoCompact,
  'import-memories': importMemories,
  'qdrant-sync': qdrantSync,
  'qdrant-backfill': qdrantBackfill,
  'qdrant-cleanup': qdrantCleanup,
};
