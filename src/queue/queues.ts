import crypto from 'node:crypto';
import { Queue } from 'bullmq';
import type { Env } from '../config/env';
import { redisUrl } from '../config/env';
import type { Db } from '../db/connection';
import { nowIso } from '../db/connection';
import { OutboxRepository } from './outbox.repository';
import type { Logger } from '../logger';
import { JOBS, jobOptions, parsePayload, type JobInput, type JobName } from './jobs';
import { QUEUE_NAMES, type QueueName } from '../config/queue-names';
import { withTimeout } from '../timeout';
import { createRedis, type Redis, type RedisRole } from './redis';

export interface EnqueueResult {
  jobId: string;
  queue: QueueName;
  /** 'queue' when Redis took it, 'outbox' when it was stored in SQLite for later. */
  via: 'queue' | 'outbox';
}

/** How long the api waits for Redis to take a job before it goes to the outbox instead. */
const API_ADD_TIMEOUT_MS = 750;

/**
 * The BullMQ queues of a process, and `enqueue` — the only way to add a job. In the api, a job
 * Redis cannot take right now goes to the SQLite outbox and the call still succeeds.
 */
export class QueueLayer {
  readonly connection: Redis;
  readonly prefix: string;
  private readonly queues = new Map<QueueName, Queue>();
  private readonly outbox: OutboxRepository;
  private closed = false;

  constructor(
    readonly env: Env,
    private readonly log: Logger,
    db: Db,
    readonly role: RedisRole,
    connection?: Redis,
  ) {
    this.prefix = env.QUEUE_PREFIX;
    this.connection = connection ?? createRedis(redisUrl(env), role, log, { commandTimeoutMs: env.REDIS_COMMAND_TIMEOUT_MS, name: 'queues' });
    this.outbox = new OutboxRepository(db);
  }

  /** Whether Redis is connected right now. */
  isReady(): boolean {
    return this.connection.status === 'ready';
  }

  /** The queue object for a name (created on first use, sharing this layer's connection). */
  queue(name: QueueName): Queue {
    let q = this.queues.get(name);
    if (!q) {
      q = new Queue(name, { connection: this.connection, prefix: this.prefix, skipVersionCheck: true });
      q.on('error', () => undefined); // outages are logged once by the connection watcher
      this.queues.set(name, q);
    }
    return q;
  }

  allQueues(): Queue[] {
    return QUEUE_NAMES.map((n) => this.queue(n));
  }

  /** Validates the payload, derives the job id and adds the job (api: or stores it in the outbox). */
  async enqueue<N extends JobName>(name: N, input: JobInput<N>, extra: { delay?: number } = {}): Promise<EnqueueResult> {
    const data = parsePayload(name, input);
    const opts = { ...jobOptions(name, data, `${name}-${crypto.randomUUID()}`), ...extra };
    const queue = JOBS[name].queue as QueueName;
    if (this.role === 'worker') {
      await this.queue(queue).add(name, data, opts);
      return { jobId: opts.jobId, queue, via: 'queue' };
    }
    if (this.isReady()) {
      try {
        await withTimeout(this.queue(queue).add(name, data, opts), API_ADD_TIMEOUT_MS, `redis did not take the job within ${API_ADD_TIMEOUT_MS} ms`);
        return { jobId: opts.jobId, queue, via: 'queue' };
      } catch (err) {
        this.log.warn({ job: name, jobId: opts.jobId, err: { message: (err as Error).message } }, 'could not add job; stored in the outbox');
      }
    }
    this.outbox.add(name, opts.jobId, data, nowIso());
    return { jobId: opts.jobId, queue, via: 'outbox' };
  }

  /** Adds many jobs of one kind in one round trip (worker side: bulk fan-out); ids dedupe as usual. */
  async enqueueMany<N extends JobName>(name: N, inputs: JobInput<N>[]): Promise<number> {
    if (inputs.length === 0) return 0;
    const queue = JOBS[name].queue as QueueName;
    const jobs = inputs.map((input) => {
      const data = parsePayload(name, input);
      return { name, data, opts: jobOptions(name, data, `${name}-${crypto.randomUUID()}`) };
    });
    if (this.role === 'api' && !this.isReady()) {
      for (const j of jobs) this.outbox.add(name, j.opts.jobId, j.data, nowIso());
      return jobs.length;
    }
    await this.queue(queue).addBulk(jobs);
    return jobs.length;
  }

  /** Moves outbox rows into their queues with their original ids; stops at the first Redis failure. */
  async flushOutbox(batchSize = 500, maxBatches = Number.POSITIVE_INFINITY): Promise<{ moved: number; remaining: number }> {
    let moved = 0;
    let cursor = 0;
    for (let b = 0; b < maxBatches; b++) {
      const rows = this.outbox.oldest(batchSize, cursor);
      if (rows.length === 0) break;
      cursor = rows[rows.length - 1].outboxId;
      const byQueue = new Map<QueueName, typeof rows>();
      const invalid: number[] = [];
      for (const r of rows) {
        const spec = JOBS[r.jobName as JobName];
        if (!spec) {
          invalid.push(r.outboxId);
          continue;
        }
        const list = byQueue.get(spec.queue) ?? [];
        list.push(r);
        byQueue.set(spec.queue, list);
      }
      if (invalid.length) {
        this.log.error({ count: invalid.length }, 'outbox rows name unknown jobs; kept with an error for inspection');
        this.outbox.markFailed(invalid, 'unknown job name');
      }
      for (const [queue, list] of byQueue) {
        try {
          const jobs = list.map((r) => {
            const name = r.jobName as JobName;
            const data = parsePayload(name, r.payload);
            return { name, data, opts: { ...jobOptions(name, data, r.jobId), jobId: r.jobId } };
          });
          const add = this.queue(queue).addBulk(jobs);
          await (this.role === 'api' ? withTimeout(add, 10_000, 'redis did not take the outbox batch within 10 s') : add);
          this.outbox.remove(list.map((r) => r.outboxId));
          moved += list.length;
        } catch (err) {
          this.outbox.markFailed(
            list.map((r) => r.outboxId),
            (err as Error).message,
          );
          return { moved, remaining: this.outbox.count() };
        }
      }
    }
    return { moved, remaining: this.outbox.count() };
  }

  outboxCount(): number {
    return this.outbox.count();
  }

  /** Closes the queues then the connection. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Disconnect first, then let every queue's initialisation settle while its error listener is
    // still attached: BullMQ's close() drops the listeners at once, and an initialisation that fails
    // after that (the socket closing under it) is emitted as an 'error' nobody hears, which kills
    // the process. Bounded, so a close never waits on Redis.
    this.connection.disconnect();
    const queues = [...this.queues.values()];
    await withTimeout(Promise.allSettled(queues.map((q) => q.waitUntilReady())), 2000).catch(() => undefined);
    await Promise.allSettled(queues.map((q) => q.close()));
  }
}
