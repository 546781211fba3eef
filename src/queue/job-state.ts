import type { Job, JobState, Queue } from 'bullmq';

export interface JobWithState {
  job: Job;
  state: JobState | 'unknown';
}

const ended = (s: JobState | 'unknown') => s === 'completed' || s === 'failed';

/**
 * A job's state, and fields that agree with it. A job object holds its fields as they were when it was
 * read; the state is read after them. A job that ended in between reads as completed (or failed) with
 * no return value (or failure reason) of its own: its fields are read again then, and its state with
 * them (a retry in between clears what the end wrote), a few times at most. A job removed meanwhile is
 * 'unknown'.
 */
export async function withState(queue: Queue, job: Job): Promise<JobWithState> {
  let current = job;
  let state = await current.getState();
  for (let tries = 0; tries < 3 && ended(state) && !current.finishedOn; tries++) {
    const fresh = await queue.getJob(job.id!);
    if (!fresh) return { job: current, state: 'unknown' };
    current = fresh;
    state = await current.getState();
  }
  return { job: current, state };
}

/** One job by id with its state (see withState); null when there is no such job, or it was removed while being read. */
export async function readJob(queue: Queue, id: string): Promise<JobWithState | null> {
  const job = await queue.getJob(id);
  if (!job) return null;
  const found = await withState(queue, job);
  return found.state === 'unknown' ? null : found;
}
