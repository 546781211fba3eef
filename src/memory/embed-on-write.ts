import type { Logger } from '../logger';
import type { QueueLayer } from '../queue/queues';
import type { MemoryChange, MemoryService } from './memory.service';

/** Enqueues `embed-memory` for every change that altered content; returns how many. */
export async function enqueueEmbeds(queues: QueueLayer, changes: MemoryChange[]): Promise<number> {
  const contentChanges = changes.filter((c) => c.contentChanged && c.op !== 'delete' && c.op !== 'expire' && c.op !== 'summarize');
  await Promise.all(contentChanges.map((c) => queues.enqueue('embed-memory', { memoryId: c.memory.id, contentHash: c.memory.contentHash })));
  return contentChanges.length;
}

/**
 * Api side: every committed content change gets its embedding job (or an outbox row while Redis
 * is down). The row's `needs_reindex` flag is the durable record, so a lost enqueue is caught
 * by repair-sweep.
 */
export function embedOnWrite(memory: MemoryService, queues: QueueLayer, log: Logger): void {
  memory.addHooks({
    afterCommit: (changes) => {
      enqueueEmbeds(queues, changes).catch((err) => log.warn({ err: { message: (err as Error).message } }, 'could not enqueue embedding; repair-sweep will'));
    },
  });
}
