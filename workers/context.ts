import type { Job } from 'bullmq';
import type { JobData, JobName } from '../src/queue/jobs';
import type { Logger } from '../src/logger';
import type { Services } from '../src/services';

/** The worker process' context (no HTTP, no api keys). */
export type WorkerContext = Services;

/** What a handler gets besides its payload. */
export interface JobContext {
  job: Job;
  log: Logger;
  ctx: WorkerContext;
  /** The worker's lock token for this job. */
  token: string | undefined;
  /**
   * Long handlers call this between batches: when the worker is shutting down it puts the job
   * back in the waiting list (its checkpoint is in SQLite) and stops, so nothing is left stalled.
   */
  yieldIfStopping(): Promise<void>;
}

export type Handler<N extends JobName> = (data: JobData<N>, jc: JobContext) => Promise<unknown>;

/** Every job name → its handler. A missing entry is a compile error. */
export type Registry = { [N in JobName]: Handler<N> };
