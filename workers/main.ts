import os from 'node:os';
import { Worker } from 'bullmq';
import { loadEnv, redisUrl, type Env } from '../src/config/env';
import { openServices } from '../src/services';
import { createLogger, processLogDestination, type Logger } from '../src/logger';
import { Metrics } from '../src/metrics';
import { JOBS, JOB_NAMES, jobsOfQueue, type JobSpec } from '../src/queue/jobs';
import type { QueueName } from '../src/config/queue-names';
import { registerOutboxQuarantineGauge } from '../src/queue/outbox-metrics';
import { bullConnectionOptions, checkEvictionPolicy } from '../src/queue/redis';
import { dropWorkerMetrics, pushWorkerMetrics } from '../src/queue/worker-metrics';
import { installProcessGuards } from '../src/process-guards';
import { Shutdown } from '../src/shutdown';
import type { Registry, WorkerContext } from './context';
import { createProcessor, type StopFlag } from './dispatch';
import { registry as defaultRegistry } from './registry';

/** Queues whose jobs embed (extraction embeds its new facts inline with a local model). */
const EMBEDDING_QUEUES = new Set<QueueName>(['embedding', 'reindex', 'extraction']);

const DEFAULT_CONCURRENCY: Record<QueueName, number> = { maintenance: 1, extraction: 4, embedding: 2, reindex: 1, summarize: 1, import: 1 };

export interface RunningWorker {
  ctx: WorkerContext;
  workers: Map<QueueName, Worker>;
  shutdown: Shutdown;
  metrics: Metrics;
  /** Lets active jobs finish (within the grace period), then closes queues, Redis and SQLite. */
  stop(): Promise<void>;
  /** Pushes this process' metrics snapshot now (it is also pushed every 10 s). */
  publishMetrics(): Promise<void>;
}

/** Fails boot when a job has no handler or a served queue has no job (the registry type makes the first a compile error too). */
export function assertRegistryComplete(handlers: Record<string, unknown>, queues: readonly QueueName[]): void {
  const missing = JOB_NAMES.filter((n) => typeof handlers[n] !== 'function');
  if (missing.length) throw new Error(`jobs without a handler: ${missing.join(', ')}`);
  const empty = queues.filter((q) => jobsOfQueue(q).length === 0);
  if (empty.length) throw new Error(`queues without jobs: ${empty.join(', ')}`);
}

/** Starts one BullMQ Worker per served queue, the job schedulers, and metrics publishing. */
export async function startWorker(env: Env, log: Logger, opts: { handlers?: Registry; dbFile?: string; exit?: (code: number) => void } = {}): Promise<RunningWorker> {
  const handlers = opts.handlers ?? defaultRegistry;
  const served = env.WORKER_QUEUES;
  assertRegistryComplete(handlers, served);

  const ctx: WorkerContext = openServices(env, log, 'worker', { dbFile: opts.dbFile });
  const { queues } = ctx;
  const metrics = new Metrics('worker');
  registerOutboxQuarantineGauge(metrics.registry, queues);
  const shutdown = new Shutdown(log, env.SHUTDOWN_GRACE_MS, opts.exit);

  await queues.connection.ping();
  await checkEvictionPolicy(queues.connection, log);

  const stopFlag: StopFlag = { stopping: false };
  const workers = new Map<QueueName, Worker>();
  for (const q of served) {
    // BullMQ owns these connections (a handed-in one it would not close, and one closed mid-connect would throw).
    const connection = bullConnectionOptions(redisUrl(env), `worker-${q}`);
    const w = new Worker(q, createProcessor(q, handlers, ctx, metrics, stopFlag), {
      connection,
      prefix: env.QUEUE_PREFIX,
      concurrency: env.WORKER_CONCURRENCY[q] ?? DEFAULT_CONCURRENCY[q] ?? 1,
      stalledInterval: env.WORKER_STALLED_INTERVAL_MS,
      lockDuration: env.WORKER_LOCK_DURATION_MS,
      maxStalledCount: 2,
      // Started at the end of boot, once shutdown (and, in the process, its signal handlers) exists:
      // a job taken earlier could not be handed back on SIGTERM.
      autorun: false,
    });
    w.on('error', (err) => log.debug({ err: { message: err.message }, queue: q }, 'worker error'));
    workers.set(q, w);
  }
  const missingWorkers = served.filter((q) => !workers.has(q));
  if (missingWorkers.length) throw new Error(`queues without a worker: ${missingWorkers.join(', ')}`);
  // Boot completes with every worker's connections up. BullMQ emits an 'error' nobody hears (the
  // process dies) when a connection is closed while it is still initialising: a stop right after
  // start (SIGTERM during boot, a quick test) must find them initialised.
  await Promise.all([...workers.values()].map((w) => w.waitUntilReady()));

  // Repeatable schedules, created idempotently (same scheduler id every time). A Redis that comes
  // back empty (restart without persistence, failover) has lost them: re-create on every reconnect.
  const ensureSchedules = async () => {
    for (const name of JOB_NAMES) {
      const spec = JOBS[name] as JobSpec;
      if (!spec.scheduleEveryMs || !served.includes(spec.queue)) continue;
      const every = spec.scheduleEveryMs(env);
      // 0 turns a schedule off (and removes one an earlier boot created).
      if (every === 0) await queues.queue(spec.queue).removeJobScheduler(`schedule-${name}`);
      else await queues.queue(spec.queue).upsertJobScheduler(`schedule-${name}`, { every }, { name, data: spec.schema.parse({}) as object });
    }
  };
  await ensureSchedules();
  // A model or quantization changed through env since the index was built: reindex (a singleton).
  await ctx.reindex.reindexOnDrift().catch((err) => log.warn({ err: { message: (err as Error).message } }, 'drift check failed; repair-sweep will retry'));
  // A local model loads now rather than inside the first chat's extraction or the first reindex batch.
  if (served.some((q) => EMBEDDING_QUEUES.has(q))) {
    void ctx.embedding
      .warm(ctx.settings.memoryFresh())
      .then((w) => w && log.info(w, 'embedding model loaded'))
      .catch((err) => log.warn({ err: { message: (err as Error).message } }, 'embedding model could not be loaded at boot; jobs will retry it'));
  }
  // The connection is ready by now (pinged above), so every later 'ready' is a reconnect.
  queues.connection.on('ready', () => {
    void ensureSchedules()
      .then(() => log.info('redis reconnected: job schedules ensured'))
      .catch((err) => log.warn({ err: { message: (err as Error).message } }, 'could not re-create job schedules after reconnect'));
  });

  const workerId = `${os.hostname()}-${process.pid}`;
  const publish = async () => pushWorkerMetrics(queues.connection, env.QUEUE_PREFIX, workerId, await metrics.registry.getMetricsAsJSON());
  const metricsTimer = setInterval(() => void publish().catch(() => undefined), 10_000);
  metricsTimer.unref();
  void publish().catch(() => undefined);
  // Also publish shortly after jobs finish (at most once a second), so /metrics is fresh under light load.
  let soon: NodeJS.Timeout | null = null;
  const publishSoon = () => {
    if (soon) return;
    soon = setTimeout(() => {
      soon = null;
      void publish().catch(() => undefined);
    }, 1000);
    soon.unref();
  };
  for (const w of workers.values()) {
    w.on('completed', publishSoon);
    w.on('failed', publishSoon);
  }

  shutdown
    .add('workers', async () => {
      clearInterval(metricsTimer);
      // Long jobs hand themselves back at their next checkpoint; short ones finish.
      stopFlag.stopping = true;
      // close() waits for active jobs; past the grace period, force so the process can exit (the job stalls and is retried elsewhere).
      const graceful = Promise.all([...workers.values()].map((w) => w.close()));
      const timedOut = await Promise.race([
        graceful.then(() => false),
        new Promise<boolean>((r) => setTimeout(() => r(true), env.SHUTDOWN_GRACE_MS).unref()),
      ]);
      if (timedOut) {
        log.warn({ graceMs: env.SHUTDOWN_GRACE_MS }, 'active jobs did not finish within the grace period; closing anyway');
        await Promise.all([...workers.values()].map((w) => w.close(true)));
      }
    })
    .add('metrics', async () => {
      await publish().catch(() => undefined);
      await dropWorkerMetrics(queues.connection, env.QUEUE_PREFIX, workerId).catch(() => undefined);
    })
    .add('embedding', () => ctx.embedding.close())
    .add('backends', () => ctx.backends.shutdown())
    .add('summarizer', () => ctx.summarize.close())
    .add('queues', () => queues.close())
    .add('sqlite', () => ctx.db.close());

  for (const [q, w] of workers) {
    w.run().catch((err) => log.error({ err: { message: (err as Error).message }, queue: q }, 'worker loop stopped'));
  }
  log.info({ queues: served, prefix: env.QUEUE_PREFIX }, 'worker ready; waiting for jobs');
  return { ctx, workers, shutdown, metrics, stop: () => shutdown.run('stop'), publishMetrics: publish };
}

/** Entry point of the worker process. */
export async function runWorkerProcess(): Promise<void> {
  const env = loadEnv();
  const log = createLogger(env.LOG_LEVEL, 'engram-worker', processLogDestination(env.LOG_FLUSH_MS));
  const w = await startWorker(env, log);
  w.shutdown.onSignals();
  installProcessGuards({ log, metrics: w.metrics, shutdown: w.shutdown });
}

if (require.main === module) {
  runWorkerProcess().catch((err) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
