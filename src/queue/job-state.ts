import type { Job, JobState, Queue } from 'bullmq';

export interface JobWithState {
  job: Job;
  state: JobState | 'unknown';
}

/**
 * A job's state, and fields that agree with it. A job object holds its fields as they were when it was
 * read; the state is read after them. A job that ended in between reads as completed (or failed) with
 * no return value (or failure reason) of its own: those fields are read again then.
 */
export async function withState(queue: Queue, job: Job): Promise<JobWithState> {
  const state = await job.getState();
  if ((state === 'completed' || state === 'failed') && !job.finishedOn) {
    const fresh = await queue.getJob(job.id!);
    if (fresh) return { job: fresh, state };
  }
  return { job, state };
}

/** One job by id with its state (see withState); null when there is no such job. */
export async function readJob(queue: Queue, id: string): Promise<JobWithState | null> {
  const job = await queue.getJob(id);
  return job ? withState(queue, job) : null;
}
