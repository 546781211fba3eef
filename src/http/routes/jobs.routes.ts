import { Router } from 'express';
import type { Job } from 'bullmq';
import type { ApiContext } from '../api-context';
import { conflict, notFound, unavailable } from '../../errors';
import type { JobEvent } from '../../queue/job-events';
import { readJob, withState, type JobWithState } from '../../queue/job-state';
import { QUEUE_NAMES } from '../../config/queue-names';
import { sendError } from '../error-handler';
import { handle } from '../validate';
import { jobParams, listJobsQuery, outboxParams } from './jobs.schema';

/** GET /api/jobs lists at most this many quarantined outbox rows (the total is given beside them). */
const QUARANTINE_LIST_LIMIT = 100;

/** A comment line on every open job event stream this often, so proxies keep it open. */
const SSE_KEEPALIVE_MS = 15_000;

const STATES = ['waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'paused', 'completed', 'failed'] as const;

/** The operator's view of a job (no payload: it may carry user text). */
export function describeJob({ job, state }: JobWithState) {
  return {
    id: job.id,
    queue: job.queueName,
    name: job.name,
    state,
    progress: job.progress,
    attemptsMade: job.attemptsMade,
    failedReason: job.failedReason ?? null,
    returnvalue: job.returnvalue ?? null,
    timestamps: {
      created: job.timestamp ?? null,
      processed: job.processedOn ?? null,
      finished: job.finishedOn ?? null,
    },
  };
}

/** /api/jobs: counts per queue and state, one job's state, removal, and live events (SSE). */
export function jobsRoutes(ctx: ApiContext): Router {
  const r = Router();

  const requireRedis = () => {
    if (!ctx.queues.isReady()) throw unavailable('Redis is unreachable; job state is unavailable', { redis: ctx.queues.connection.status });
  };
  /** One job with its state (readJob: fields that agree with the state); 404 when there is none. */
  const findJob = async (queue: (typeof QUEUE_NAMES)[number], id: string): Promise<JobWithState> => {
    requireRedis();
    const found = await readJob(ctx.queues.queue(queue), id);
    if (!found) throw notFound('Job');
    return found;
  };

  r.get(
    '/',
    handle({}, async () => {
      requireRedis();
      const counts = await Promise.all(QUEUE_NAMES.map((q) => ctx.queues.queue(q).getJobCounts(...STATES)));
      return {
        queues: Object.fromEntries(QUEUE_NAMES.map((q, i) => [q, counts[i]])),
        // Pending rows (a number, as before); quarantined rows are listed beside it and never retried.
        outbox: ctx.queues.outboxCount(),
        outboxQuarantined: ctx.queues.outboxQuarantined(QUARANTINE_LIST_LIMIT).map(({ outboxId, jobName, jobId, error, createdAt, quarantinedAt }) => ({
          outboxId,
          jobName,
          jobId,
          error,
          createdAt,
          quarantinedAt,
        })),
        outboxQuarantinedTotal: ctx.queues.outboxQuarantinedCount(),
      };
    }),
  );

  // The dashboard's Jobs tab: the running and failed jobs (by default) of every queue, with progress; at most `limit` per queue and state.
  r.get(
    '/list',
    handle({ query: listJobsQuery }, async ({ query }) => {
      requireRedis();
      const perQueue = await Promise.all(QUEUE_NAMES.map((q) => ctx.queues.queue(q).getJobs(query.states, 0, query.limit - 1, false)));
      const jobs = await Promise.all(
        perQueue.flatMap((list, i) => list.filter((j): j is Job => !!j).map(async (j) => describeJob(await withState(ctx.queues.queue(QUEUE_NAMES[i]), j)))),
      );
      jobs.sort((a, b) => (b.timestamps.created ?? 0) - (a.timestamps.created ?? 0));
      return { states: query.states, jobs };
    }),
  );

  // Before /:queue/:id, so `outbox` is not read as a queue name. SQLite only: works while Redis is down.
  r.delete(
    '/outbox/:outboxId',
    handle({ params: outboxParams }, ({ params }) => {
      const out = ctx.queues.deleteQuarantinedOutboxRow(params.outboxId);
      if (out.outcome === 'absent') throw notFound('Outbox row');
      if (out.outcome === 'pending') throw conflict('The outbox row is not quarantined; the next flush moves it into its queue', { outboxId: params.outboxId });
      return { success: true, outboxId: out.row.outboxId, jobName: out.row.jobName, jobId: out.row.jobId };
    }),
  );

  r.get(
    '/:queue/:id',
    handle({ params: jobParams }, async ({ params }) => describeJob(await findJob(params.queue, params.id))),
  );

  r.delete(
    '/:queue/:id',
    handle({ params: jobParams }, async ({ params }) => {
      const { job, state } = await findJob(params.queue, params.id);
      if (state === 'active') throw conflict('The job is running; it cannot be removed', { state });
      await job.remove();
      return { success: true, id: job.id, previousState: state };
    }),
  );

  // A failed job runs again (its attempts start over); anything else is a 409 saying which state it is in.
  r.post(
    '/:queue/:id/retry',
    handle({ params: jobParams }, async ({ params }) => {
      const { job, state } = await findJob(params.queue, params.id);
      if (state !== 'failed') throw conflict(`Only a failed job can be retried; this one is ${state}`, { state });
      await job.retry('failed', { resetAttemptsMade: true });
      return { success: true, id: job.id, queue: params.queue, state: await job.getState() };
    }),
  );

  r.get(
    '/:queue/:id/events',
    handle({ params: jobParams }, async ({ params }, _req, res) => {
      requireRedis();
      // One owner for everything the stream holds (hub listener, keep-alive timer), released exactly
      // once: when the client leaves — at any point, also while this handler is still subscribing or
      // reading the job — when the job ends, or when the request fails.
      let closed = false;
      let streaming = false;
      let unsubscribe: (() => void) | null = null;
      let stopHeartbeat: (() => void) | null = null;
      let untrack: (() => void) | null = null;
      const pending: JobEvent[] = [];
      const release = () => {
        stopHeartbeat?.();
        stopHeartbeat = null;
        unsubscribe?.();
        unsubscribe = null;
        untrack?.();
        untrack = null;
      };
      const end = () => {
        if (closed) return;
        closed = true;
        release();
        if (streaming && !res.writableEnded) res.end();
      };
      // 'close' fires when the connection goes away or the response has ended, whichever comes first.
      res.once('close', end);
      // At shutdown: a comment saying why (clients see the stream end without completed/failed and reopen it), then the
      // end; a stream not started yet (still subscribing or reading the job, e.g. while Redis is slow) is a 503 at once,
      // and the handler, finding it closed, stops there.
      const endForShutdown = () => {
        if (closed) return;
        if (streaming) res.write(': the server is shutting down; reopen this stream\n\n');
        else if (!res.headersSent) sendError(res, 503, 'shutting_down', 'The server is shutting down; open this stream again');
        end();
      };
      untrack = ctx.jobEvents.trackStream(endForShutdown);
      const send = (e: JobEvent | { type: 'state'; job: unknown }) => {
        if (closed) return;
        if (!streaming) {
          pending.push(e as JobEvent);
          return;
        }
        res.write(`event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`);
        if (e.type === 'completed' || e.type === 'failed') end();
      };
      try {
        // Subscribe before reading the state, so an end between the two is not missed.
        const off = await ctx.jobEvents.subscribe(params.queue, params.id, send);
        if (closed) {
          off(); // the client left while we were subscribing
          return undefined;
        }
        unsubscribe = off;
        // After subscribing: an end from here on is an event; an earlier one is in the state (with its return value).
        const desc = describeJob(await findJob(params.queue, params.id));
        if (closed) return undefined;
        res.status(200);
        res.setHeader('content-type', 'text/event-stream; charset=utf-8');
        res.setHeader('cache-control', 'no-cache, no-transform');
        res.setHeader('x-accel-buffering', 'no');
        res.flushHeaders();
        streaming = true;
        stopHeartbeat = ctx.jobEvents.keepAlive(() => res.write(': keep-alive\n\n'), SSE_KEEPALIVE_MS);
        send({ type: 'state', job: desc });
        for (const e of pending.splice(0)) send(e);
        if (desc.state === 'completed') send({ type: 'completed', returnvalue: desc.returnvalue });
        else if (desc.state === 'failed') send({ type: 'failed', failedReason: desc.failedReason ?? '' });
        return undefined;
      } catch (err) {
        release();
        throw err;
      }
    }, {
      summary: 'Follow one job live (Server-Sent Events)',
      description:
        'Events: `state` (the job as GET describes it), `progress`, then `completed` or `failed`, after which the stream ends. A `: keep-alive` comment every 15 s. When the api shuts down the stream ends early, after a `: the server is shutting down` comment: reopen it (the state comes first again).',
      responses: { 200: { description: 'An event stream', contentType: 'text/event-stream', example: 'event: state\ndata: {"type":"state","job":{"id":"reindex-api-1","state":"active"}}\n\n' }, 404: { description: 'No such job' } },
    }),
  );
  return r;
}
