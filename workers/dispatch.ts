import { DelayedError, UnrecoverableError, WaitingError, type Job } from 'bullmq';
import { JOBS, type JobName, type JobSpec } from '../src/queue/jobs';
import type { QueueName } from '../src/config/queue-names';
import type { Metrics } from '../src/metrics';
import type { JobContext, Registry, WorkerContext } from './context';

/** Shared by the processors of one worker process: set when SIGTERM arrives. */
export interface StopFlag {
  stopping: boolean;
}

/** The BullMQ processor of one queue: checks name and payload, runs the handler, measures, logs final failures once. */
export function createProcessor(queue: QueueName, handlers: Registry, ctx: WorkerContext, metrics: Metrics, stop: StopFlag = { stopping: false }) {
  return async (job: Job, token?: string): Promise<unknown> => {
    const name = job.name as JobName;
    const spec = JOBS[name];
    if (!spec || spec.queue !== queue) throw new UnrecoverableError(`no job named "${job.name}" runs on queue ${queue}`);
    const parsed = spec.schema.safeParse(job.data);
    if (!parsed.success) {
      metrics.jobFailures.inc({ job: name, queue, final: 'true' });
      const paths = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
      ctx.log.error({ job: name, jobId: job.id }, `invalid payload, not retried: ${paths}`);
      throw new UnrecoverableError(`invalid payload: ${paths}`);
    }
    const log = ctx.log.child({ job: name, jobId: job.id, attempt: job.attemptsMade + 1 });
    const stopTimer = metrics.jobDuration.startTimer({ job: name, queue });
    try {
      const handler = handlers[name] as (data: unknown, jc: JobContext) => Promise<unknown>;
      const yieldIfStopping = async () => {
        if (!stop.stopping) return;
        log.info('worker stopping: job handed back to the queue at its checkpoint');
        await job.moveToWait(token);
        throw new WaitingError();
      };
      const out = await handler(parsed.data, { job, log, ctx, token, yieldIfStopping });
      stopTimer({ outcome: 'completed' });
      return out;
    } catch (err) {
      if (err instanceof WaitingError || err instanceof DelayedError) {
        stopTimer({ outcome: 'requeued' });
        throw err;
      }
      stopTimer({ outcome: 'failed' });
      const final = err instanceof UnrecoverableError || job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
      metrics.jobFailures.inc({ job: name, queue, final: String(final) });
      if (final) {
        log.error({ err }, 'job failed for good');
        // A durable job's record leaves the relay with the job: quarantined, visible beside the failed job, never re-added.
        if ((spec as JobSpec).durable && job.id) {
          try {
            ctx.queues.failDurable(name, job.id, (err as Error).message ?? String(err));
          } catch (e) {
            log.warn({ err: { message: (e as Error).message } }, 'could not quarantine the durable record; the sweep re-adds it after the failed job ages out');
          }
        }
      } else log.warn({ err: { message: (err as Error).message } }, 'job attempt failed; BullMQ will retry');
      throw err;
    }
  };
}
