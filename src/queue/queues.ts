import crypto from 'node:crypto';
import { Queue, type JobsOptions } from 'bullmq';
import type { Env } from '../config/env';
import { redisUrl } from '../config/env';
import type { Db } from '../db/connection';
import { nowIso } from '../db/connection';
import { OutboxRepository, type OutboxRow, type QuarantinedOutboxRow } from './outbox.repository';
import type { Logger } from '../logger';
import type { z } from 'zod';
import { JOBS, jobOptions, parsePayload, type JobData, type JobInput, type JobName, type JobSpec } from './jobs';
import { QUEUE_NAMES, type QueueName } from '../config/queue-names';
import { withTimeout } from '../timeout';
import { createRedis, type Redis, type RedisRole } from './redis';

export interface EnqueueResult {
  jobId: string;
  queue: QueueName;
  /** 'queue' when Redis took it, 'outbox' when it was stored in SQLite for later. */
  via: 'queue' | 'outbox';
  /** True when another job already held the job's deduplication id: `jobId` names that job, and nothing new was added. */
  deduplicated: boolean;
}

/** A follow-up job recorded in the outbox inside a transaction (QueueLayer.recordInTx). */
export interface RecordedJob {
  outboxId: number;
  jobName: JobName;
  jobId: string;
}

/** BullMQ's own rule for custom ids (Job.validateOptions): no integers, no ':' (except its repeat-job form). */
function bullmqRefusesJobId(id: string): string | null {
  if (id.length === 0) return 'job id is empty';
  if (id.startsWith('0:')) return `job id ${JSON.stringify(id)} starts with "0:", which BullMQ refuses`;
  if (`${parseInt(id, 10)}` === id) return `job id ${JSON.stringify(id)} is an integer, which BullMQ refuses for custom ids`;
  if (id.includes(':') && id.split(':').length !== 3) return `job id ${JSON.stringify(id)} contains ':', which BullMQ refuses`;
  return null;
}

/** An outbox row as a job to add, or why it can never be added. */
function prepareOutboxRow(r: OutboxRow): { queue: QueueName; job: { name: JobName; data: unknown; opts: ReturnType<typeof jobOptions> } } | { error: string } {
  if (!Object.hasOwn(JOBS, r.jobName)) return { error: `unknown job name ${JSON.stringify(r.jobName.slice(0, 100))}` };
  const name = r.jobName as JobName;
  let raw: unknown;
  try {
    raw = JSON.parse(r.payload);
  } catch (err) {
    return { error: `payload is not valid JSON: ${(err as Error).message}` };
  }
  const parsed = (JOBS[name].schema as z.ZodType).safeParse(raw);
  if (!parsed.success) {
    return { error: `invalid payload: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}` };
  }
  const data = parsed.data as JobData<typeof name>;
  const opts = jobOptions(name, data, `${name}-${crypto.randomUUID()}`);
  // The stored id wins: the job keeps the id the caller was given when it was acknowledged.
  if (r.jobId !== null) opts.jobId = r.jobId;
  const refused = bullmqRefusesJobId(opts.jobId);
  if (refused) return { error: refused };
  return { queue: JOBS[name].queue as QueueName, job: { name, data, opts } };
}

/** How long a done tombstone or a quarantined durable record is kept (as long as a failed extract-facts job in Redis). */
const DURABLE_RETENTION_MS = 24 * 3600 * 1000;
/**
 * How long the tombstone of a job that claims itself once (claimOnce: record-access) is kept: its re-runs come within
 * minutes (3 attempts a second or so apart, or a stall noticed within the lock's period), and Redis keeps the completed
 * job an hour. A busy api sends a few of them a second: a day of tombstones would be most of the outbox.
 */
const APPLIED_ONCE_RETENTION_MS = 3600 * 1000;
/** The jobs whose handlers call claimOnce. */
const APPLIED_ONCE: readonly JobName[] = ['record-access'];

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
  /** Durable jobs' records asked for in this turn of the event loop, written together at its end (recordTracked). */
  private tracked: Array<{ jobName: string; jobId: string; payload: unknown; now: string; done: (err: Error | null) => void }> = [];
  private trackedFlush: NodeJS.Immediate | null = null;

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

  /**
   * Validates the payload, derives the job id and adds the job (api: or stores it in the outbox).
   * For a job with a deduplication id (the reindex singleton) the result names the job that really
   * holds it — the one Redis kept, or the pending outbox row — and says whether this call lost.
   */
  async enqueue<N extends JobName>(name: N, input: JobInput<N>, extra: { delay?: number } = {}): Promise<EnqueueResult> {
    const data = parsePayload(name, input);
    const opts = { ...jobOptions(name, data, `${name}-${crypto.randomUUID()}`), ...extra };
    const queue = JOBS[name].queue as QueueName;
    // BullMQ answers with the id of the job that holds the deduplication id, which is ours only when we won.
    const added = (id: string | undefined) => ({ jobId: id ?? opts.jobId, queue, via: 'queue' as const, deduplicated: id !== undefined && id !== opts.jobId });
    // A durable job is recorded in SQLite first, whatever happens to Redis after (see claimDurable).
    // A record SQLite cannot take (disk full, busy past its timeout) does not stop the add: the job
    // then runs untracked, as it did before records existed.
    let durable = (JOBS[name] as JobSpec).durable === true;
    if (durable) {
      try {
        await this.recordTracked(name, opts.jobId, data);
      } catch (err) {
        durable = false;
        this.log.warn({ job: name, jobId: opts.jobId, err: { message: (err as Error).message } }, 'could not record the durable job in SQLite; adding it untracked');
      }
    }
    if (this.role === 'worker') {
      const job = await this.queue(queue).add(name, data, opts);
      return added(job.id);
    }
    if (this.isReady()) {
      try {
        const job = await withTimeout(this.queue(queue).add(name, data, opts), API_ADD_TIMEOUT_MS, `redis did not take the job within ${API_ADD_TIMEOUT_MS} ms`);
        return added(job.id);
      } catch (err) {
        this.log.warn({ job: name, jobId: opts.jobId, err: { message: (err as Error).message } }, 'could not add job; stored in the outbox');
      }
    }
    if (durable) {
      this.outbox.markUnqueued(name, opts.jobId);
      return { jobId: opts.jobId, queue, via: 'outbox', deduplicated: false };
    }
    if (opts.deduplication?.id) {
      // Deduplication ids in the job map are per job name: one pending outbox row holds it, as one live job does in Redis.
      const holder = this.outbox.addOnce(name, opts.jobId, data, nowIso());
      return { jobId: holder, queue, via: 'outbox', deduplicated: holder !== opts.jobId };
    }
    this.outbox.add(name, opts.jobId, data, nowIso());
    return { jobId: opts.jobId, queue, via: 'outbox', deduplicated: false };
  }

  /**
   * A durable job's record (OutboxRepository.addTracked), committed when this resolves. The records of every chat that
   * finished in one turn of the event loop are written in one transaction at its end (a commit costs more than its
   * rows: the table's and two indexes' pages go to the WAL once per commit); a failed commit fails each of them.
   */
  private recordTracked(jobName: string, jobId: string, payload: unknown): Promise<void> {
    return new Promise((resolve, reject) => {
      this.tracked.push({ jobName, jobId, payload, now: nowIso(), done: (err) => (err ? reject(err) : resolve()) });
      this.trackedFlush ??= setImmediate(this.flushTracked);
    });
  }

  private readonly flushTracked = (): void => {
    const batch = this.tracked;
    this.tracked = [];
    this.trackedFlush = null;
    let failure: Error | null = null;
    try {
      this.outbox.addTrackedMany(batch);
    } catch (err) {
      failure = err as Error;
    }
    for (const r of batch) r.done(failure);
  };

  /**
   * Adds a job that follows a change already committed to SQLite (after-commit hooks), in any
   * role: when Redis cannot take it within the api's wait, it goes to the SQLite outbox (flushed by
   * the api on reconnect and by every repair sweep) instead of being lost. For idempotent jobs:
   * an add that times out yet lands later runs twice.
   */
  async enqueueAfterCommit<N extends JobName>(name: N, input: JobInput<N>): Promise<EnqueueResult> {
    if (this.role === 'api') return this.enqueue(name, input);
    const data = parsePayload(name, input);
    const opts = jobOptions(name, data, `${name}-${crypto.randomUUID()}`);
    const queue = JOBS[name].queue as QueueName;
    if (this.isReady()) {
      try {
        const job = await withTimeout(this.queue(queue).add(name, data, opts), API_ADD_TIMEOUT_MS, `redis did not take the job within ${API_ADD_TIMEOUT_MS} ms`);
        return { jobId: job.id ?? opts.jobId, queue, via: 'queue', deduplicated: false };
      } catch (err) {
        this.log.warn({ job: name, jobId: opts.jobId, err: { message: (err as Error).message } }, 'could not add job; stored in the outbox');
      }
    }
    this.outbox.add(name, opts.jobId, data, nowIso());
    return { jobId: opts.jobId, queue, via: 'outbox', deduplicated: false };
  }

  /**
   * Records a follow-up job as a pending outbox row inside the caller's open SQLite transaction, so
   * it commits or rolls back with the change it follows. The caller adds the job itself after the
   * commit and then drops the row (dropRecorded); a process that dies in between leaves the row,
   * and the relay (repair sweep, the api on reconnect) adds it. Returns the row's id.
   */
  recordInTx<N extends JobName>(name: N, input: JobInput<N>): RecordedJob {
    const data = parsePayload(name, input);
    const jobId = jobOptions(name, data, `${name}-${crypto.randomUUID()}`).jobId;
    return { outboxId: this.outbox.add(name, jobId, data, nowIso()), jobName: name, jobId };
  }

  /**
   * Appends one id to an array field of a row recordInTx wrote (still pending), in the same
   * transaction; false when it is gone or was rolled back. Not validated here: the relay checks the
   * whole payload against the job's schema (and quarantines a row that fails it).
   */
  appendRecorded(row: RecordedJob, field: string, value: string): boolean {
    return row.outboxId > 0 && this.outbox.appendToPending(row.outboxId, row.jobName, row.jobId, field, value);
  }

  /** Drops rows recordInTx wrote once their jobs were added (rows the relay moved or that were rolled back are simply absent). */
  dropRecorded(rows: RecordedJob[]): void {
    this.outbox.removeJobs(rows.filter((r) => r.outboxId > 0));
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

  /**
   * Moves pending outbox rows into their queues with their original ids; stops at the first Redis
   * failure (those rows stay pending). A row that can never be added — unknown job name, payload
   * that is not JSON or fails its schema, a job id BullMQ refuses — is quarantined with its error
   * (never retried automatically; GET /api/jobs shows it, an operator deletes it), so one bad row
   * cannot block the rest.
   */
  async flushOutbox(batchSize = 500, maxBatches = Number.POSITIVE_INFINITY): Promise<{ moved: number; remaining: number; quarantined: number }> {
    let moved = 0;
    let quarantined = 0;
    let cursor = 0;
    const done = () => ({ moved, remaining: this.outbox.count(), quarantined });
    // Durable records Redis took more than a grace period ago and no worker has finished: Redis may
    // have lost them (restart without persistence). Re-adding one whose job still exists is a no-op
    // (same id), and one that completed meanwhile is a tombstone its handler skips.
    const requeueBefore = new Date(Date.now() - this.env.OUTBOX_RELAY_GRACE_MS).toISOString();
    for (let b = 0; b < maxBatches; b++) {
      const rows = this.outbox.oldest(batchSize, cursor, requeueBefore);
      if (rows.length === 0) break;
      cursor = rows[rows.length - 1].outboxId;
      const byQueue = new Map<QueueName, { outboxId: number; job: { name: JobName; data: unknown; opts: ReturnType<typeof jobOptions> } }[]>();
      const poisoned: { outboxId: number; error: string }[] = [];
      for (const r of rows) {
        const prepared = prepareOutboxRow(r);
        if ('error' in prepared) {
          poisoned.push({ outboxId: r.outboxId, error: prepared.error });
          this.log.error({ outboxId: r.outboxId, job: r.jobName, jobId: r.jobId, error: prepared.error }, 'outbox row can never be added; quarantined');
          continue;
        }
        const list = byQueue.get(prepared.queue) ?? [];
        list.push({ outboxId: r.outboxId, job: prepared.job });
        byQueue.set(prepared.queue, list);
      }
      this.outbox.quarantine(poisoned, nowIso());
      quarantined += poisoned.length;
      for (const [queue, list] of byQueue) {
        try {
          const add = this.queue(queue).addBulk(list.map((l) => l.job as { name: string; data: unknown; opts: JobsOptions }));
          await (this.role === 'api' ? withTimeout(add, 10_000, 'redis did not take the outbox batch within 10 s') : add);
          // A durable job's row stays, now as its record, until the handler claims it.
          const kept = list.filter((l) => (JOBS[l.job.name] as JobSpec).durable === true).map((l) => l.outboxId);
          this.outbox.markQueued(kept, nowIso());
          this.outbox.remove(list.filter((l) => (JOBS[l.job.name] as JobSpec).durable !== true).map((l) => l.outboxId));
          moved += list.length;
        } catch (err) {
          this.outbox.markFailed(
            list.map((l) => l.outboxId),
            (err as Error).message,
          );
          return done();
        }
      }
    }
    return done();
  }

  /**
   * The handler of a durable job calls this INSIDE the SQLite transaction that writes its effects:
   * 'claimed' → write them (the record becomes a tombstone in the same commit); 'done' → an earlier
   * run committed, write nothing (a re-delivery: stall after commit, relay race, old snapshot);
   * 'untracked' → no record (added before records existed, or by hand): write them.
   */
  claimDurable(name: JobName, jobId: string): 'claimed' | 'done' | 'untracked' {
    return this.outbox.claim(name, jobId, nowIso());
  }

  /**
   * A job that is not durable but must not apply twice (record-access) calls this INSIDE the SQLite transaction
   * that writes its effect: true → write it (a done tombstone now holds its id, in the same commit); false → an
   * earlier run committed, write nothing (the worker died, or lost Redis, between the commit and the ack).
   */
  claimOnce(name: (typeof APPLIED_ONCE)[number], jobId: string): boolean {
    return this.outbox.markApplied(name, jobId, nowIso());
  }

  /** A durable job failed for good: its record is quarantined (GET /api/jobs shows it) and no longer relayed. */
  failDurable(name: JobName, jobId: string, error: string): void {
    this.outbox.quarantineJob(name, jobId, error, nowIso());
  }

  /**
   * Bounds the outbox: done tombstones and quarantined durable records live as long as a failed
   * extract-facts job stays in Redis (a day), then go; claimOnce's tombstones an hour.
   */
  pruneOutbox(now = Date.now()): { done: number; quarantined: number } {
    const before = new Date(now - DURABLE_RETENTION_MS).toISOString();
    const onceBefore = new Date(now - APPLIED_ONCE_RETENTION_MS).toISOString();
    const durableNames = (Object.keys(JOBS) as JobName[]).filter((n) => (JOBS[n] as JobSpec).durable === true);
    let once = 0;
    for (const n of APPLIED_ONCE) once += this.outbox.pruneDone(n, onceBefore);
    const r = this.outbox.prune(durableNames, before, before);
    return { done: r.done + once, quarantined: r.quarantined };
  }

  /** Durable records Redis took that no worker has finished yet. */
  outboxTrackedCount(): number {
    return this.outbox.trackedCount();
  }

  /** Pending outbox rows (quarantined ones are not counted: no flush will move them). */
  outboxCount(): number {
    return this.outbox.count();
  }

  /** How many outbox rows are quarantined. */
  outboxQuarantinedCount(): number {
    return this.outbox.quarantinedCount();
  }

  /** Quarantined outbox rows, oldest first (for the operator). */
  outboxQuarantined(limit = 100): QuarantinedOutboxRow[] {
    return this.outbox.quarantined(limit);
  }

  /** Deletes one quarantined outbox row (an operator's decision); a pending row is refused, see OutboxRepository.deleteQuarantined. */
  deleteQuarantinedOutboxRow(outboxId: number): ReturnType<OutboxRepository['deleteQuarantined']> {
    return this.outbox.deleteQuarantined(outboxId);
  }

  /** Closes the queues then the connection. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Records still waiting for the turn's end are written now, while SQLite is open.
    if (this.trackedFlush) {
      clearImmediate(this.trackedFlush);
      this.flushTracked();
    }
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
