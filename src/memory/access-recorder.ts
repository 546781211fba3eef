import type { Logger } from '../logger';
import type { JobInput } from '../queue/jobs';

/** The record-access payload's cap of distinct ids (src/queue/jobs.ts). */
export const MAX_IDS_PER_JOB = 200;
/** How often pending access counts are sent. */
export const ACCESS_FLUSH_EVERY_MS = 1000;
/**
 * Distinct ids pending that are sent without waiting for the timer (25 jobs). Not one job's worth: a chat injects
 * ~100 memories, so a busy key would reach 200 distinct ids every other chat and each job would carry counts of 1.
 */
export const FLUSH_EARLY_AT_IDS = 25 * MAX_IDS_PER_JOB;
/** Distinct ids held while nothing can be sent; accesses of more are dropped (counted). */
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
  /** Accesses recorded (an id injected twice counts twice). */
  recordedIds: number;
  /** Distinct ids waiting to be sent. */
  pendingIds: number;
  jobs: number;
  droppedIds: number;
  droppedBatches: number;
}

/**
 * Access counts, batched off the request path: `recordRows` (retrieval's) and `record` only count in memory; a timer (unref'd)
 * sends them as record-access jobs of at most 200 distinct ids, each with how often it was injected
 * since the last send. Every access is kept (an id twice = counted twice), but an id injected into
 * many chats travels once: the same hot memories go into most chats, and sending each injection as
 * its own entry made ~470 jobs a second at 900 memory-on chats/s, 44 µs of api CPU per chat (bench/README.md).
 * While Redis is not ready a batch is dropped (debug line, counter) instead of going to the SQLite
 * outbox: an access count is bookkeeping, and a synchronous outbox write per chat is not worth it.
 */
export class AccessRecorder {
  /** Accesses per id since the last send, in first-seen order (record). */
  private pending = new Map<string, number>();
  /**
   * Rows counted since the last send, each once, their count kept on the row itself under this recorder's
   * own symbol (recordRows): a property increment instead of a Map lookup by the whole id string per
   * injected memory (~25 µs per memory-on chat in the profile for ~104 lookups).
   */
  private touched: { readonly id: string }[] = [];
  private readonly slot = Symbol('engram.accesses');
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

  /**
   * Notes one access of each row (retrieval's cached records: the same objects chat after chat); touches neither
   * Redis nor SQLite. The count is kept on the row (non-enumerable, this recorder's own symbol); a row that cannot
   * take a property is counted by id.
   */
  recordRows(rows: readonly { readonly id: string }[]): void {
    this.recordEach(rows, this.countRow);
  }

  /** Notes one access of each id; touches neither Redis nor SQLite. */
  record(ids: readonly string[]): void {
    this.recordEach(ids, this.countId);
  }

  /** Counts each item (`count` says false when there is no room for it: dropped), then schedules the send. */
  private recordEach<T>(items: readonly T[], count: (item: T) => boolean): void {
    if (items.length === 0) return;
    this.counts.recordedIds += items.length;
    if (this.closed) return this.drop(items.length, 'recorder closed');
    let dropped = 0;
    for (const item of items) if (!count(item)) dropped++;
    if (dropped > 0) this.drop(dropped, 'too many pending access counts');
    const distinct = this.pending.size + this.touched.length;
    if (distinct >= FLUSH_EARLY_AT_IDS) this.flushSoon();
    else if (distinct > 0) this.schedule();
  }

  /** Whether one more distinct id (or row) may be held. */
  private hasRoom(): boolean {
    return this.pending.size + this.touched.length < this.maxPending;
  }

  private readonly countId = (id: string): boolean => {
    const n = this.pending.get(id);
    if (n !== undefined) this.pending.set(id, n + 1);
    else if (this.hasRoom()) this.pending.set(id, 1);
    else return false;
    return true;
  };

  private readonly countRow = (row: { readonly id: string }): boolean => {
    const r = row as { [k: symbol]: number | undefined };
    const held = r[this.slot];
    if (held !== undefined && held > 0) {
      r[this.slot] = held + 1;
      return true;
    }
    if (held === undefined && !Object.isExtensible(row)) return this.countId(row.id);
    if (!this.hasRoom()) return false;
    if (held === 0) r[this.slot] = 1;
    else Object.defineProperty(row, this.slot, { value: 1, writable: true, enumerable: false });
    this.touched.push(row);
    return true;
  };

  /** What is pending, by id (rows' counts collected and reset), and nothing left pending. */
  private take(): Map<string, number> {
    const batch = this.pending;
    this.pending = new Map();
    const slot = this.slot;
    for (const row of this.touched) {
      const r = row as { [k: symbol]: number };
      batch.set(row.id, (batch.get(row.id) ?? 0) + r[slot]!);
      r[slot] = 0;
    }
    this.touched = [];
    return batch;
  }

  /** Sends everything pending now (one job per ≤200 ids), or drops it when Redis is not ready; never throws. */
  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.pending.size === 0 && this.touched.length === 0) return;
    const batch = this.take();
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
    return { ...this.counts, pendingIds: this.pending.size + this.touched.length };
  }

  private schedule(): void {
    if (this.timer || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.flush();
    }, this.flushEveryMs);
    this.timer.unref();
  }

  /** FLUSH_EARLY_AT_IDS are waiting: send them on the next turn of the loop, still off the request. */
  private flushSoon(): void {
    if (this.soon) return;
    this.soon = true;
    setImmediate(() => {
      this.soon = false;
      void this.flush();
    }).unref();
  }

  private async send(batch: Map<string, number>): Promise<void> {
    const entries = [...batch];
    for (let i = 0; i < entries.length; i += MAX_IDS_PER_JOB) {
      const part = entries.slice(i, i + MAX_IDS_PER_JOB);
      const accesses = part.reduce((a, [, n]) => a + n, 0);
      // Checked per job: when Redis went away meanwhile, enqueue would write the outbox instead.
      if (!this.d.queues.isReady()) {
        this.drop(entries.slice(i).reduce((a, [, n]) => a + n, 0), 'redis not ready');
        return;
      }
      const memoryIds = part.map(([id]) => id);
      // Counts only where one is above 1: a payload of single accesses stays as it always was.
      const input: JobInput<'record-access'> = part.some(([, n]) => n > 1) ? { memoryIds, counts: part.map(([, n]) => n) } : { memoryIds };
      try {
        await this.d.queues.enqueue('record-access', input);
        this.counts.jobs++;
      } catch (err) {
        this.counts.droppedIds += accesses;
        this.counts.droppedBatches++;
        this.d.log.warn({ err: { message: (err as Error).message }, ids: memoryIds.length }, 'could not record memory access');
      }
    }
  }

  /** `ids`: accesses dropped. */
  private drop(ids: number, why: string): void {
    this.counts.droppedIds += ids;
    this.counts.droppedBatches++;
    this.d.log.debug({ ids, why, droppedIds: this.counts.droppedIds }, 'access counts dropped');
  }
}
