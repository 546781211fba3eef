import crypto from 'node:crypto';
import { waitUntil } from '../../test/helpers/wait';
import { createLogger } from '../logger';
import type { JobInput } from '../queue/jobs';
import { AccessRecorder, FLUSH_EARLY_AT_IDS, MAX_IDS_PER_JOB } from './access-recorder';

/** The two QueueLayer calls the recorder makes, recorded; `ready` is Redis' state. */
function fakeQueues() {
  const jobs: JobInput<'record-access'>[] = [];
  return {
    ready: true,
    jobs,
    isReady() {
      return this.ready;
    },
    async enqueue(name: string, data: JobInput<'record-access'>) {
      if (name !== 'record-access') throw new Error(`unexpected job ${name}`);
      jobs.push(data);
      return { jobId: `record-access-${jobs.length}`, queue: 'maintenance' as const, via: 'queue' as const };
    },
  };
}

const ids = (n: number) => Array.from({ length: n }, () => crypto.randomUUID());

describe('AccessRecorder', () => {
  let lines: string[];
  const log = () => createLogger('debug', 'test', { write: (l: string) => void lines.push(l) });
  const open: AccessRecorder[] = [];
  const recorder = (queues: ReturnType<typeof fakeQueues>, flushEveryMs = 600_000) => {
    const r = new AccessRecorder({ queues, log: log() }, { flushEveryMs });
    open.push(r);
    return r;
  };
  beforeEach(() => {
    lines = [];
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((r) => r.close()));
  });

  it('records without touching the queue, then sends one job per ≤200 distinct ids, every access kept as a count', async () => {
    const q = fakeQueues();
    const r = recorder(q);
    const a = ids(150);
    const b = ids(150);
    r.record(a);
    r.record(b);
    // A second chat injecting a's memories again.
    r.record(a);
    expect(q.jobs).toHaveLength(0);
    await r.flush();
    expect(q.jobs.map((j) => j.memoryIds.length)).toEqual([MAX_IDS_PER_JOB, 100]);
    expect(q.jobs.flatMap((j) => j.memoryIds)).toEqual([...a, ...b]);
    // Each id once, with how often it was injected; a job of single accesses carries no counts.
    expect(q.jobs[0]!.counts).toEqual([...a.map(() => 2), ...b.slice(0, 50).map(() => 1)]);
    expect(q.jobs[1]).toEqual({ memoryIds: b.slice(50) });
    expect(r.stats()).toMatchObject({ recordedIds: 450, jobs: 2, droppedIds: 0 });
    // Nothing left to send.
    await r.flush();
    expect(q.jobs).toHaveLength(2);
  });

  it('an id injected into many chats between two sends travels once, with its count', async () => {
    const q = fakeQueues();
    const r = recorder(q);
    const hot = ids(3);
    for (let chat = 0; chat < 500; chat++) r.record([...hot, ...ids(chat % 100 === 0 ? 1 : 0)]);
    expect(r.stats()).toMatchObject({ recordedIds: 1505, pendingIds: 8 });
    await r.flush();
    expect(q.jobs).toHaveLength(1);
    expect(q.jobs[0]!.memoryIds.slice(0, 3)).toEqual(hot);
    expect(q.jobs[0]!.counts).toEqual([500, 500, 500, 1, 1, 1, 1, 1]);
  });

  it('recordRows counts on the rows themselves, out of sight, merges rows of one id, and starts again after a send', async () => {
    const q = fakeQueues();
    const r = recorder(q);
    const [a, b] = ids(2);
    const rowA = { id: a, content: 'likes tea' };
    const rowB = { id: b, content: 'likes coffee' };
    // Another object for a's row (read from SQLite, not the cache), and a row that cannot hold the count.
    const rowA2 = { id: a, content: 'likes tea' };
    const frozen = Object.freeze({ id: b, content: 'likes coffee' });
    for (let chat = 0; chat < 3; chat++) r.recordRows([rowA, rowB]);
    r.recordRows([rowA2, frozen]);
    expect(Object.keys(rowA)).toEqual(['id', 'content']);
    expect(JSON.stringify(rowA)).toBe(`{"id":"${a}","content":"likes tea"}`);
    expect(Object.getOwnPropertySymbols({ ...rowA })).toEqual([]);
    expect(r.stats()).toMatchObject({ recordedIds: 8 });
    await r.flush();
    // The frozen row's id first (counted by id), then the rows in the order they were first counted.
    expect(q.jobs).toEqual([{ memoryIds: [b, a], counts: [4, 4] }]);
    // Counted from zero again; a recorder's count is its own (another recorder's rows do not share it).
    const other = recorder(q);
    r.recordRows([rowA]);
    other.recordRows([rowA, rowA]);
    await r.flush();
    await other.flush();
    expect(q.jobs.slice(1)).toEqual([{ memoryIds: [a] }, { memoryIds: [a], counts: [2] }]);
  });

  it('drops the batch when Redis is not ready (a debug line and a counter), and sends again once it is', async () => {
    const q = fakeQueues();
    const r = recorder(q);
    q.ready = false;
    r.record(ids(3));
    r.record(ids(2));
    await r.flush();
    expect(q.jobs).toHaveLength(0);
    expect(r.stats()).toMatchObject({ recordedIds: 5, jobs: 0, droppedIds: 5, droppedBatches: 1 });
    expect(lines.join('')).toContain('access counts dropped');
    q.ready = true;
    const later = ids(4);
    r.record(later);
    await r.flush();
    expect(q.jobs).toEqual([{ memoryIds: later }]);
  });

  it('a failing enqueue drops that job only, logged, never thrown', async () => {
    const q = fakeQueues();
    let calls = 0;
    const enqueue = q.enqueue.bind(q);
    q.enqueue = async (name, data) => {
      if (++calls === 1) throw new Error('redis said no');
      return enqueue(name, data);
    };
    const r = recorder(q);
    const all = ids(MAX_IDS_PER_JOB + 1);
    r.record(all);
    await expect(r.flush()).resolves.toBeUndefined();
    expect(q.jobs).toEqual([{ memoryIds: all.slice(MAX_IDS_PER_JOB) }]);
    expect(r.stats()).toMatchObject({ jobs: 1, droppedIds: MAX_IDS_PER_JOB });
    expect(lines.join('')).toContain('could not record memory access');
  });

  it('flushes on its own timer, and FLUSH_EARLY_AT_IDS distinct ids do not wait for it', async () => {
    const q = fakeQueues();
    const r = recorder(q, 20);
    const one = ids(1);
    r.record(one);
    expect(q.jobs).toHaveLength(0);
    await waitUntil(() => q.jobs.length === 1, 5000, 'the timer flush');
    expect(q.jobs[0]).toEqual({ memoryIds: one });

    // Many distinct ids do not wait for the timer either; one job's worth does.
    const slow = recorder(q);
    slow.record(ids(MAX_IDS_PER_JOB));
    await new Promise((r) => setImmediate(r));
    expect(q.jobs).toHaveLength(1);
    const many = ids(FLUSH_EARLY_AT_IDS - MAX_IDS_PER_JOB);
    slow.record(many);
    const jobs = FLUSH_EARLY_AT_IDS / MAX_IDS_PER_JOB;
    await waitUntil(() => q.jobs.length === 1 + jobs, 5000, 'the early batch to go');
    expect(q.jobs.slice(1).flatMap((j) => j.memoryIds).slice(MAX_IDS_PER_JOB)).toEqual(many);
  });

  it('close() sends what is pending; later records are dropped and counted', async () => {
    const q = fakeQueues();
    const r = recorder(q);
    const pending = ids(7);
    r.record(pending);
    await r.close();
    expect(q.jobs).toEqual([{ memoryIds: pending }]);
    r.record(ids(2));
    await r.flush();
    expect(q.jobs).toHaveLength(1);
    expect(r.stats()).toMatchObject({ droppedIds: 2 });
  });

  it('holds at most maxPending ids while nothing can be sent; the excess is dropped and counted', async () => {
    const q = fakeQueues();
    q.ready = false;
    const r = new AccessRecorder({ queues: q, log: log() }, { flushEveryMs: 600_000, maxPending: 10 });
    open.push(r);
    const first = ids(8);
    r.record(first);
    r.record(ids(5));
    expect(r.stats()).toMatchObject({ pendingIds: 10, droppedIds: 3 });
    q.ready = true;
    await r.flush();
    expect(q.jobs.flatMap((j) => j.memoryIds).slice(0, 8)).toEqual(first);
    expect(q.jobs.flatMap((j) => j.memoryIds)).toHaveLength(10);
  });
});
