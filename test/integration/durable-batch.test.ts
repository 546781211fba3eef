import { OutboxRepository } from '../../src/queue/outbox.repository';
import { buildTestApi, type TestApi } from '../helpers/api';
import { waitUntil } from '../helpers/wait';

/**
 * The durable extract-facts records of chats that finish in one turn of the event loop are written in one SQLite
 * transaction (QueueLayer.recordTracked): each is committed before its job is offered to Redis, and a commit that
 * fails leaves each job untracked but added, as one record's failure did.
 */
describe('durable job records are written together, one commit per turn of the event loop', () => {
  let t: TestApi;
  beforeAll(async () => {
    t = buildTestApi();
    await waitUntil(() => t.ctx.queues.isReady(), 10_000, 'api connected');
  });
  afterAll(() => t.close());
  afterEach(() => jest.restoreAllMocks());

  const rows = (prefix: string) =>
    t.ctx.db.db.prepare("SELECT job_id, queued_at IS NOT NULL AS queued FROM outbox WHERE job_name = 'extract-facts' AND job_id LIKE ? ORDER BY job_id").all(`extract-${prefix}%`) as Array<{ job_id: string; queued: number }>;

  it('five enqueues in one turn: one transaction of five records, each committed before its add; all five jobs in Redis', async () => {
    const many = jest.spyOn(OutboxRepository.prototype, 'addTrackedMany');
    const add = jest.spyOn(t.ctx.queues.queue('extraction'), 'add');
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) => t.ctx.queues.enqueue('extract-facts', { apiKeyId: 'batch', userText: `I like tea number ${i}`, requestId: `b1-${i}` })),
    );
    expect(many).toHaveBeenCalledTimes(1);
    expect(many.mock.calls[0][0].map((r) => r.jobId)).toEqual(['b1-0', 'b1-1', 'b1-2', 'b1-3', 'b1-4'].map((id) => `extract-${id}`));
    // Every add came after the one commit.
    expect(Math.min(...add.mock.invocationCallOrder)).toBeGreaterThan(many.mock.invocationCallOrder[0]);
    expect(results.map((r) => r.via)).toEqual(['queue', 'queue', 'queue', 'queue', 'queue']);
    expect(rows('b1-')).toEqual(['b1-0', 'b1-1', 'b1-2', 'b1-3', 'b1-4'].map((id) => ({ job_id: `extract-${id}`, queued: 1 })));
    const jobs = await Promise.all(results.map((r) => t.ctx.queues.queue('extraction').getJob(r.jobId)));
    expect(jobs.every((j) => j !== undefined)).toBe(true);
  });

  it('enqueues in separate turns are separate commits', async () => {
    const many = jest.spyOn(OutboxRepository.prototype, 'addTrackedMany');
    await t.ctx.queues.enqueue('extract-facts', { apiKeyId: 'batch', userText: 'one', requestId: 'b2-0' });
    await t.ctx.queues.enqueue('extract-facts', { apiKeyId: 'batch', userText: 'two', requestId: 'b2-1' });
    expect(many.mock.calls.map((c) => c[0].length)).toEqual([1, 1]);
    expect(rows('b2-')).toHaveLength(2);
  });

  it('a commit that fails (disk full) fails each record of the batch: the jobs are still added, untracked', async () => {
    jest.spyOn(OutboxRepository.prototype, 'addTrackedMany').mockImplementation(() => {
      throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    });
    const results = await Promise.all(
      [0, 1, 2].map((i) => t.ctx.queues.enqueue('extract-facts', { apiKeyId: 'batch', userText: `full ${i}`, requestId: `b3-${i}` })),
    );
    expect(results.map((r) => r.via)).toEqual(['queue', 'queue', 'queue']);
    expect(rows('b3-')).toEqual([]);
    const jobs = await Promise.all(results.map((r) => t.ctx.queues.queue('extraction').getJob(r.jobId)));
    expect(jobs.every((j) => j !== undefined)).toBe(true);
  });
});
