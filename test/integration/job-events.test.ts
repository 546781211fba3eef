import { Queue, Worker } from 'bullmq';
import request from 'supertest';
import { redisUrl } from '../../src/config/env';
import { JobEventsHub, type JobEvent } from '../../src/queue/job-events';
import { withState } from '../../src/queue/job-state';
import { bullConnectionOptions } from '../../src/queue/redis';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, testEnv } from '../helpers/env';
import { waitUntil } from '../helpers/wait';

/**
 * A job's event stream and its state agree however quickly the job ends: the dashboard's cleanup card once
 * showed "Cleanup: completed" with no result, because the job ended between the route's two reads of it.
 */
describe('job events and job state', () => {
  let t: TestApi;
  beforeAll(async () => {
    t = buildTestApi(testEnv({ REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0' }));
    await waitUntil(() => t.ctx.queues.isReady(), 5000, 'redis ready');
  });
  afterAll(() => t.close());

  it('an event written right after subscribe resolves reaches the listener, on a reader that has only just started', async () => {
    const events = t.ctx.queues.queue('maintenance').keys.events;
    // Each round a new hub, so a new reader whose first read of the stream is still on its way when the event is written.
    for (let round = 0; round < 5; round++) {
      const hub = new JobEventsHub(t.env, silentLog(), t.ctx.queues);
      const heard: JobEvent[] = [];
      try {
        const off = await hub.subscribe('maintenance', `early-${round}`, (e) => heard.push(e));
        // BullMQ's own completed entry (what a worker's moveToFinished writes), at once.
        await t.ctx.queues.connection.xadd(events, '*', 'event', 'completed', 'jobId', `early-${round}`, 'returnvalue', JSON.stringify({ round }), 'prev', 'active');
        await waitUntil(() => heard.length > 0, 5000, `round ${round}: the completed event`);
        expect(heard).toEqual([{ type: 'completed', returnvalue: { round } }]);
        off();
      } finally {
        await hub.close();
      }
    }
  });

  it('a job that ends after its fields were read is described with its return value, not as completed with none', async () => {
    const name = 'job-state-check';
    const queue = new Queue(name, { connection: t.ctx.queues.connection, prefix: t.env.QUEUE_PREFIX });
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const worker = new Worker(
      name,
      async () => {
        await gate;
        return { deleted: 1 };
      },
      { connection: bullConnectionOptions(redisUrl(t.env), 'test-job-state'), prefix: t.env.QUEUE_PREFIX },
    );
    worker.on('error', () => undefined);
    try {
      const added = await queue.add('check', {});
      await waitUntil(async () => (await added.getState()) === 'active', 5000, 'the job running');
      const read = (await queue.getJob(added.id!))!;
      expect(read.returnvalue).toBeNull();
      release();
      await waitUntil(async () => (await queue.getJobState(added.id!)) === 'completed', 5000, 'the job completed');
      const { job, state } = await withState(queue, read);
      expect(state).toBe('completed');
      expect(job.returnvalue).toEqual({ deleted: 1 });
      expect(job.finishedOn).toEqual(expect.any(Number));
    } finally {
      release();
      await worker.close();
      await queue.close();
    }
  });

  it('GET /api/jobs/:queue/:id/events of a job whose fields the route read just before it ended sends completed with the return value', async () => {
    const { jobId } = await t.ctx.queues.enqueue('record-access', { memoryIds: ['0b0e6f2c-1c7b-4c43-9a8e-5f5f2b0b9b11'] });
    const queue = t.ctx.queues.queue('maintenance');
    // No worker runs here: the job is finished by hand, as a worker would.
    const token = 'test-token';
    await waitUntil(async () => (await queue.getJobState(jobId)) === 'waiting', 5000, 'the job waiting');
    // The fields as the route's read would have found them an instant before the job ended.
    const before = (await queue.getJob(jobId))!;
    const moved = new Worker('maintenance', null, { connection: bullConnectionOptions(redisUrl(t.env), 'test-manual'), prefix: t.env.QUEUE_PREFIX });
    moved.on('error', () => undefined);
    try {
      const next = await moved.getNextJob(token);
      expect(next?.id).toBe(jobId);
      await next!.moveToCompleted({ counted: 1 }, token, false);
    } finally {
      await moved.close();
    }
    // The route's first read of the job returns those fields; its state read (and any re-read) is live.
    const spy = jest.spyOn(queue, 'getJob').mockResolvedValueOnce(before);
    const res = await request(t.app).get(`/api/jobs/maintenance/${jobId}/events`).set(t.auth).buffer(true).parse((r, cb) => {
      let text = '';
      r.on('data', (c: Buffer) => (text += c.toString()));
      r.on('end', () => cb(null, text));
    });
    spy.mockRestore();
    expect(res.status).toBe(200);
    const events = (res.body as string)
      .split('\n\n')
      .filter((b) => b.includes('data:'))
      .map((b) => JSON.parse(b.slice(b.indexOf('data:') + 5)) as { type: string; returnvalue?: unknown; job?: { state: string; returnvalue: unknown } });
    expect(events.map((e) => e.type)).toEqual(['state', 'completed']);
    expect(events[0].job).toMatchObject({ state: 'completed', returnvalue: { counted: 1 } });
    expect(events[1].returnvalue).toEqual({ counted: 1 });
  });
});
