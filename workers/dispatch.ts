import { UnrecoverableError, type Job } from 'bullmq';
import { JOBS, type JobName } from '../src/queue/jobs';
import type { QueueName } from '../src/queue/queue-names';
import type { Metrics } from '../src/metrics';
import type { Registry, WorkerContext } from './context';

/** The BullMQ processor of one queue: checks name and payload, runs the handler, measures, logs final failures once. */
export function createProcessor(queue: QueueName, handlers: Registry, ctx: WorkerContext, metrics: Metrics) {
  return async (job: Job): Promise<unknown> => {
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
    const stop = metrics.jobDuration.startTimer({ job: name, queue });
    try {
      const handler = handlers[name] as (data: unknown, jc: { job: Job; log: typeof log; ctx: WorkerContext }) => Promise<unknown>;
      const out = await handler(parsed.data, { job, log, ctx });
      stop({ outcome: 'completed' });
      return out;
    } catch (err) {
      stop({ outcome: 'failed' });
      const final = err instanceof UnrecoverableError || job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
      metrics.jobFailures.inc({ job: name, queue, final: String(final) });
      if (final) log.error({ err }, 'job failed for good');
      else log.warn({ err: { message: (err as Error).message } }, 'job attempt failed; BullMQ will retry');
      throw err;
    }
  };
}
