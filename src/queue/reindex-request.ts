import type { Job } from 'bullmq';
import type { EnqueueResult, QueueLayer } from './queues';

const LIVE = ['active', 'waiting', 'delayed', 'prioritized', 'paused'] as const;

/** The reindex job that is waiting or running, if any. */
export async function liveReindex(queues: QueueLayer): Promise<Job | null> {
  if (!queues.isReady()) return null;
  const live = await queues.queue('reindex').getJobs([...LIVE]);
  return live.find((j) => j.name === 'reindex') ?? null;
}

/** Starts a reindex unless one is already waiting or running (then that one is returned). */
export async function requestReindex(queues: QueueLayer, trigger: 'api' | 'auto', force = false): Promise<EnqueueResult & { existing: boolean }> {
  const live = await liveReindex(queues);
  if (live) return { jobId: live.id!, queue: 'reindex', via: 'queue', existing: true };
  return { ...(await queues.enqueue('reindex', { force, trigger })), existing: false };
}
