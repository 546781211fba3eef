import { QueueEvents, type Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Env } from '../config/env';
import { redisUrl } from '../config/env';
import type { Logger } from '../logger';
import type { QueueName } from '../config/queue-names';
import { bullConnectionOptions } from './redis';
import { withTimeout } from '../timeout';

export type JobEvent =
  | { type: 'progress'; data: unknown }
  | { type: 'completed'; returnvalue: unknown }
  | { type: 'failed'; failedReason: string };

type Listener = (e: JobEvent) => void;

/** Where the hub reads a queue's events stream position (the api's and the CLI's QueueLayer). */
export interface QueueSource {
  queue(name: QueueName): Queue;
  readonly connection: Redis;
}

/**
 * The id of a queue's newest event, or '0-0' while it has none: a QueueEvents reader given it as `lastEventId`
 * gets every event written after this call. BullMQ's default ('$') is the newest entry when the reader's first
 * XREAD runs, after its connection and CLIENT SETNAME: an event written in between (a short job's completion) is
 * never delivered.
 */
export async function newestEventId(source: QueueSource, queue: QueueName): Promise<string> {
  const newest = await source.connection.xrevrange(source.queue(queue).keys.events, '+', '-', 'COUNT', 1);
  return newest[0]?.[0] ?? '0-0';
}

/** Fans BullMQ QueueEvents out to per-job listeners (the SSE endpoint); one stream reader per queue. */
export class JobEventsHub {
  /** Each queue's reader, once its start position is read (a failed start is forgotten, so the next subscribe tries again). */
  private readonly events = new Map<QueueName, Promise<QueueEvents>>();
  private readonly readers = new Set<QueueEvents>();
  private closed = false;
  private readonly listeners = new Map<string, Set<Listener>>();
  private readonly heartbeats = new Set<NodeJS.Timeout>();
  /** How to end each open event stream at shutdown (see endStreams). */
  private readonly streams = new Set<() => void>();
  private ending = false;

  constructor(
    private readonly env: Env,
    private readonly log: Logger,
    private readonly queues: QueueSource,
  ) {}

  private ensure(queue: QueueName): Promise<QueueEvents> {
    const have = this.events.get(queue);
    if (have) return have;
    const started = this.start(queue);
    this.events.set(queue, started);
    started.catch(() => {
      if (this.events.get(queue) === started) this.events.delete(queue);
    });
    return started;
  }

  private async start(queue: QueueName): Promise<QueueEvents> {
    // The reader starts after the newest event as of now, read before any subscriber reads its job's state (with '$',
    // a job ending just then was never reported, and its event stream waited for it for good).
    const lastEventId = await newestEventId(this.queues, queue);
    if (this.closed) throw new Error('the job event hub is closed');
    // A waiting connection of its own (XREAD BLOCK must not share the api's fail-fast one), owned by BullMQ.
    const qe = new QueueEvents(queue, {
      connection: bullConnectionOptions(redisUrl(this.env), `events-${queue}`),
      prefix: this.env.QUEUE_PREFIX,
      autorun: true,
      lastEventId,
    });
    qe.on('error', () => undefined);
    const emit = (jobId: string, e: JobEvent) => this.listeners.get(`${queue}/${jobId}`)?.forEach((l) => l(e));
    qe.on('progress', ({ jobId, data }) => emit(jobId, { type: 'progress', data }));
    qe.on('completed', ({ jobId, returnvalue }) => emit(jobId, { type: 'completed', returnvalue }));
    qe.on('failed', ({ jobId, failedReason }) => emit(jobId, { type: 'failed', failedReason }));
    this.readers.add(qe);
    return qe;
  }

  /**
   * Subscribes to one job's events; resolves once the stream reader is running. Returns the
   * unsubscribe (idempotent). When the reader cannot start, the listener is removed and it throws.
   */
  async subscribe(queue: QueueName, jobId: string, l: Listener): Promise<() => void> {
    const k = `${queue}/${jobId}`;
    const set = this.listeners.get(k) ?? new Set();
    set.add(l);
    this.listeners.set(k, set);
    let done = false;
    const unsubscribe = () => {
      if (done) return;
      done = true;
      set.delete(l);
      // Only drop the key if it still maps to this set (a later subscriber may have made a new one).
      if (set.size === 0 && this.listeners.get(k) === set) this.listeners.delete(k);
    };
    try {
      await (await this.ensure(queue)).waitUntilReady();
    } catch (err) {
      unsubscribe();
      throw err;
    }
    return unsubscribe;
  }

  /** Listeners subscribed right now (all jobs). */
  listenerCount(): number {
    let n = 0;
    for (const set of this.listeners.values()) n += set.size;
    return n;
  }

  /** Starts a keep-alive timer for a stream; the returned function stops it. Counted, so a leak shows. */
  keepAlive(beat: () => void, everyMs: number): () => void {
    const timer = setInterval(beat, everyMs);
    this.heartbeats.add(timer);
    return () => {
      clearInterval(timer);
      this.heartbeats.delete(timer);
    };
  }

  /**
   * Registers how to end one open event stream when the api shuts down; returns the unregister (idempotent). After
   * endStreams, a stream registered is told at once.
   */
  trackStream(endForShutdown: () => void): () => void {
    if (this.ending) {
      endForShutdown();
      return () => undefined;
    }
    this.streams.add(endForShutdown);
    return () => void this.streams.delete(endForShutdown);
  }

  /**
   * Ends every open event stream (the api is shutting down): a stream only ends when its job does, so each would
   * otherwise hold the http server's close until SHUTDOWN_GRACE_MS cut it. Clients reopen it (the state is replayed
   * first) against whatever serves next. Returns how many were open.
   */
  endStreams(): number {
    this.ending = true;
    const all = [...this.streams];
    this.streams.clear();
    for (const end of all) end();
    return all.length;
  }

  /** Event streams open right now. */
  streamCount(): number {
    return this.streams.size;
  }

  /** Keep-alive timers running right now. */
  heartbeatCount(): number {
    return this.heartbeats.size;
  }

  async close(): Promise<void> {
    this.closed = true;
    // Starts under way end first (bounded here: the CLI's connection has no command timeout of its own).
    await withTimeout(Promise.allSettled([...this.events.values()]), 2000).catch(() => undefined);
    const all = [...this.readers];
    // Let each reader finish initialising first (bounded): BullMQ emits an unheard 'error' — fatal —
    // when a connection is closed mid-initialisation, and close() drops the listener that would hear it.
    await withTimeout(Promise.allSettled(all.map((qe) => qe.waitUntilReady())), 2000).catch(() => undefined);
    await Promise.allSettled(all.map((qe) => qe.close()));
    this.readers.clear();
    this.events.clear();
  }
}
