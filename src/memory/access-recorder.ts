import type { Logger } from '../logger';
import type { JobInput } from '../queue/jobs';

/** The record-access payload's cap (src/queue/jobs.ts). */
export const MAX_IDS_PER_JOB = 200;
/** How often pending access counts are sent. */
export const ACCESS_FLUSH_EVERY_MS = 1000;
/** Ids held while nothing can be sent; more are dropped (counted). */
const MAX_PENDING_IDS = 20_000;

/** The part of QueueLayer the recorder uses. */
export interface AccessQueue {
  isReady(): boolean;
  enqueue(name: 'record-access', input: JobInput<'record-access'>): Promise<unknown>;
}

export interface AccessRecorderOptions {
  flushEveryMs?: number;
  maxPending?: number;
}

/** What the recorder did since it was built. */
export interface AccessRecorderStats {
  recordedIds: number;
  pendingIds: number;
  jobs: number;
  droppedIds: number;
  droppedBatches: number;
}

/**
 * Access counts, batched off the request path: `record` only appends ids in memory; a timer (unref'd)
 * sends them as record-access jobs of at most 200 ids. While Redis is not ready a batch is dropped
 * (debug line, counter) instead of going to the SQLite outbox: an access count is bookkeeping, and a
 * synchronous outbox write per chat is not worth it. Every access is kept (an id twice = counted twice).
 */
export class AccessRecorder {
  private pending: string[] = [];
  private timer: NodeJS.Timeout | null = null;
  private soon = false;
  private closed = false;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly flushEveryMs: number;
  private readonly maxPending: number;
  private readonly counts = { recordedIds: 0, jobs: 0, droppedIds: 0, droppedBatches: 0 };

  constructor(
    private readonly d: { queues: AccessQueue; log: Logger },
    opts: AccessRecorderOptions = {},
  ) {
    this.flushEveryMs = opts.flushEveryMs ?? ACCESS_FLUSH_EVERY_MS;
    this.maxPending = opts.maxPending ?? MAX_PENDING_IDS;
  }

  /** Notes one access of each id; touches neither Redis nor SQLite. */
  record(ids: readonly string[]): void {
    if (ids.length === 0) return;
    this.counts.recordedIds += ids.length;
    const room = this.closed ? 0 : Math.max(0, this.maxPending - this.pending.length);
    if (ids.length > room) this.drop(ids.length - room, 'too many pending access counts');
    if (room === 0) return;
    this.pending.push(...ids.slice(0, room));
    if (this.pending.length >= MAX_IDS_PER_JOB) this.flushSoon();
    else this.schedule();
  }

  /** Sends everything pending now (one job per ≤200 ids), or drops it when Redis is not ready; never throws. */
  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0) return;
    const sending = this.send(batch);
    this.inFlight.add(sending);
    try {
      await sending;
    } finally {
      this.inFlight.delete(sending);
    }
  }

  /** Sends what is pending and stops taking more (call before the queues close). */
  async close(): Promise<void> {
    this.closed = true;
    await this.flush();
    await Promise.all([...this.inFlight]);
  }

  stats(): AccessRecorderStats {
    return { ...this.counts, pendingIds: this.pending.length };
  }

  private schedule(): void {
    if (this.timer || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.flush();
    }, this.flushEveryMs);
    this.timer.unref();
  }

  /** A full job's worth is waiting: send it on the next turn of the loop, still off the request. */
  private flushSoon(): void {
    if (this.soon) return;
    this.soon = true;
    setImmediate(() => {
      this.soon = false;
      void this.flush();
    }).unref();
  }

  private async send(batch: string[]): Promise<void> {
    for (let i = 0; i < batch.length; i += MAX_IDS_PER_JOB) {
      // Checked per job: when Redis went away meanwhile, enqueue would write the outbox instead.
      if (!this.d.queues.isReady()) {
        this.drop(batch.length - i, 'redis not ready');
        return;
      }
      const memoryIds = batch.slice(i, i + MAX_IDS_PER_JOB);
      try {
        await this.d.queues.enqueue('record-access', { memoryIds });
        this.counts.jobs++;
      } catch (err) {
        this.counts.droppedIds += memoryIds.length;
        this.counts.droppedBatches++;
        this.d.log.warn({ err: { message: (err as Error).message }, ids: memoryIds.length }, 'could not record memory access');
      }
    }
  }

  private drop(ids: number, why: string): void {
    this.counts.droppedIds += ids;
    this.counts.droppedBatches++;
    this.d.log.debug({ ids, why, droppedIds: this.counts.droppedIds }, 'access counts dropped');
  }
}
