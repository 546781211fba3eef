import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { AdminSessionService } from './auth/admin-sessions.service';
import { ApiKeyService } from './auth/api-keys.service';
import { resolveManagementToken } from './auth/management-token';
import { loadEnv, type Env } from './config/env';
import { limitHeapGrowth } from './heap-growth';
import type { ApiContext } from './http/api-context';
import { openServices } from './services';
import { rerankerFromEnv } from './memory/rerank';
import { registerQdrantFallbackMetric } from './memory/qdrant-metrics';
import { RetrievalService } from './memory/retrieval.service';
import { createApp } from './http/app';
import { expressServer } from './http/direct-route';
import { OpenResponses } from './http/open-responses';
import { answerClientErrors } from './http/client-error';
import { createLogger, processLogDestination, type Logger } from './logger';
import { Metrics } from './metrics';
import { JobEventsHub } from './queue/job-events';
import { checkEvictionPolicy } from './queue/redis';
import { installProcessGuards } from './process-guards';
import { Shutdown } from './shutdown';
import { UpstreamClient } from './proxy/upstream';
import { AuthThrottle } from './http/auth-throttle';

export interface RunningApi {
  ctx: ApiContext;
  metrics: Metrics;
  server: Server;
  port: number;
  shutdown: Shutdown;
  stop(): Promise<void>;
}

/** Where `npm run build` puts the dashboard: <package root>/dist/dashboard (the same from src/ under ts-jest and from dist/src/). */
export function defaultDashboardDir(from = __dirname): string {
  let dir = from;
  while (!fs.existsSync(path.join(dir, 'package.json')) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  return path.join(dir, 'dist', 'dashboard');
}

/** Builds the api context (storage, queues, auth) without listening. */
export function buildApiContext(env: Env, log: Logger, opts: { dbFile?: string; dashboardDir?: string } = {}): ApiContext {
  const managementToken = resolveManagementToken(env, log);
  const services = openServices(env, log, 'api', { dbFile: opts.dbFile });
  // Every committed content change gets its embedding job (or an outbox row while Redis is down);
  // the row's needs_reindex flag is the durable record, so a lost enqueue is caught by repair-sweep.
  services.memory.addHooks({
    afterCommit: (changes) => {
      services.reindex.enqueueEmbeds(changes).catch((err) => log.warn({ err: { message: (err as Error).message } }, 'could not enqueue embedding; repair-sweep will'));
    },
  });
  const retrieval = new RetrievalService({ ...services, db: services.db.db, reranker: rerankerFromEnv(env, log) });
  services.backends.useRetriever(retrieval);
  return {
    ...services,
    apiKeys: new ApiKeyService(services.db.db),
    managementToken,
    adminSessions: new AdminSessionService(services.db.db, managementToken),
    authThrottle: new AuthThrottle({ failures: env.AUTH_FAILURE_LIMIT, windowMs: env.AUTH_FAILURE_WINDOW_MS, blockMs: env.AUTH_BLOCK_MS }),
    dashboardDir: opts.dashboardDir ?? defaultDashboardDir(),
    jobEvents: new JobEventsHub(env, log, services.queues),
    retrieval,
    upstream: new UpstreamClient(env),
  };
}

/** Drains the outbox whenever Redis (re)connects, and asks a worker for a repair sweep. */
export function watchRedisForRepair(ctx: ApiContext): void {
  let checkedPolicy = false;
  ctx.queues.connection.on('ready', () => {
    if (!checkedPolicy) {
      checkedPolicy = true;
      void checkEvictionPolicy(ctx.queues.connection, ctx.log);
    }
    if (ctx.queues.outboxCount() === 0) return;
    void ctx.queues
      .flushOutbox()
      .then((r) => {
        ctx.log.info(r, 'outbox flushed after redis reconnect');
        return ctx.queues.enqueue('repair-sweep', { reason: 'reconnect' });
      })
      .catch((err) => ctx.log.warn({ err: { message: (err as Error).message } }, 'outbox flush failed; repair-sweep will retry'));
  });
}

/** What buildApiContext opened, in the order a shutdown closes it (after the http server; tests' buildTestApi too). */
export function contextSteps(ctx: ApiContext): Array<[string, () => Promise<void> | void]> {
  return [
    // No request is in flight any more: the pool's keep-alive sockets to the upstream would otherwise stay open
    // (unref'd) until the upstream timed them out.
    ['upstream', () => ctx.upstream.close()],
    ['job-events', () => ctx.jobEvents.close()],
    ['embedding', () => ctx.embedding.close()],
    ['retrieval', async () => ctx.retrieval.close?.()],
    ['backends', () => ctx.backends.shutdown()],
    ['queues', () => ctx.queues.close()],
    ['sqlite', () => ctx.db.close()],
  ];
}

/** Starts the api: env → db → queues → app → listen, with an ordered shutdown. */
export async function startApi(env: Env, log: Logger, opts: { dbFile?: string; exit?: (code: number) => void } = {}): Promise<RunningApi> {
  // Before anything is loaded: the memory-on chat load's garbage otherwise grows the heap to ~4× its live size.
  if (limitHeapGrowth(env.API_HEAP_GROWING_PERCENT)) log.debug({ percent: env.API_HEAP_GROWING_PERCENT }, 'V8 heap growth capped');
  const ctx = buildApiContext(env, log, opts);
  const metrics = new Metrics('api');
  if (ctx.retrieval instanceof RetrievalService) registerQdrantFallbackMetric(metrics.registry, ctx.retrieval);
  const app = createApp(ctx, metrics);
  watchRedisForRepair(ctx);

  let server: Server;
  try {
    server = await new Promise<Server>((resolve, reject) => {
      const s = expressServer(app);
      s.once('error', reject);
      s.listen(env.PORT, env.HOST, () => resolve(s));
    });
  } catch (err) {
    // The port is taken (EADDRINUSE) or not ours to bind: close what the context opened, then fail, so a
    // caller that handles the error is not left holding SQLite and Redis connections.
    // Bounded by the grace period, and never an exit of its own: the caller decides what a failed start means.
    const undo = new Shutdown(log, env.SHUTDOWN_GRACE_MS, () => undefined);
    for (const [name, run] of contextSteps(ctx)) undo.add(name, run);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([undo.run('listen failed'), new Promise<void>((r) => (timer = setTimeout(r, env.SHUTDOWN_GRACE_MS)))]);
    clearTimeout(timer);
    throw err;
  }
  server.keepAliveTimeout = 65_000;
  // After listen, a server error (e.g. EMFILE on accept) is logged; the process keeps serving.
  server.on('error', (err: NodeJS.ErrnoException) => log.error({ err: { name: err.name, code: err.code, message: err.message } }, 'http server error'));
  answerClientErrors(server, log);
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : env.PORT;

  // Responses not finished yet: at shutdown, those whose head is unsent are told `connection: close`.
  const open = new OpenResponses();
  let draining = false;
  // Shared listeners (`this` is the response): no closures per request.
  function forget(this: ServerResponse): void {
    open.delete(this);
  }
  // Its keep-alive socket is idle from now on: close it (and any other) rather than wait for the grace timer.
  const closeIdle = () => server.closeIdleConnections();
  function finishedWhileDraining(): void {
    setImmediate(closeIdle);
  }
  server.prependListener('request', (_req: IncomingMessage, res: ServerResponse) => {
    open.add(res);
    res.on('close', forget);
    if (draining) {
      res.setHeader('connection', 'close');
      res.on('finish', finishedWhileDraining);
    }
  });

  const shutdown = new Shutdown(log, env.SHUTDOWN_GRACE_MS, opts.exit);
  shutdown
    .add('http', async () => {
      // Stop intake; in-flight requests finish within the grace period (each one's socket closes as it
      // finishes, so keep-alive clients do not hold the process), then whatever is left is cut.
      draining = true;
      // Job event streams end only when their job does: end them now (their clients reopen them), or they hold close() to the grace timer.
      ctx.jobEvents.endStreams();
      for (const res of open.list()) {
        if (!res.headersSent) res.setHeader('connection', 'close');
        if (!res.writableFinished) res.on('finish', finishedWhileDraining);
      }
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeIdleConnections();
      const t = setTimeout(() => server.closeAllConnections(), env.SHUTDOWN_GRACE_MS);
      t.unref();
      await closed;
      clearTimeout(t);
    });
  for (const [name, run] of contextSteps(ctx)) shutdown.add(name, run);

  log.info({ url: `http://${env.HOST}:${port}`, dataDir: env.DATA_DIR, vector: ctx.db.vecLoaded ? 'sqlite-vec' : 'off' }, 'engram api listening');
  return { ctx, metrics, server, port, shutdown, stop: () => shutdown.run('stop') };
}

/** The api process's logger: stdout lines buffered for LOG_FLUSH_MS (processLogDestination). The proxy bench runs the api with it too. */
export function apiProcessLogger(env: Env): Logger {
  return createLogger(env.LOG_LEVEL, 'engram-api', processLogDestination(env.LOG_FLUSH_MS));
}

/** Entry point of the api process. */
export async function runApiProcess(): Promise<void> {
  const env = loadEnv();
  const log = apiProcessLogger(env);
  const api = await startApi(env, log);
  api.shutdown.onSignals();
  installProcessGuards({ log, metrics: api.metrics, shutdown: api.shutdown });
}

if (require.main === module) {
  runApiProcess().catch((err) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
