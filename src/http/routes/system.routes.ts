import { Router } from 'express';
import type { ApiContext } from '../api-context';
import type { Metrics } from '../../metrics';
import { QUEUE_NAMES } from '../../config/queue-names';
import { registerOutboxQuarantineGauge } from '../../queue/outbox-metrics';
import { readWorkerMetrics } from '../../queue/worker-metrics';
import { Gauge } from 'prom-client';
import { requireManagement } from '../auth';
import { RETRY_AFTER_SECONDS } from '../error-handler';
import { documented, type RouteDoc } from '../route-doc';

const STATES = ['waiting', 'active', 'delayed', 'failed', 'completed', 'paused', 'prioritized', 'waiting-children'] as const;

const READYZ_DOC: RouteDoc = {
  summary: 'Readiness: SQLite and Redis answer',
  responses: { 200: { description: 'Ready; every check', example: { status: 'ready', checks: { sqlite: { ok: true, latencyMs: 0.05 }, redis: { ok: true, latencyMs: 0.3 } } } }, 503: { description: 'A dependency is down; which one is in `checks`' } },
};
const METRICS_DOC: RouteDoc = {
  summary: 'Prometheus metrics (api and workers)',
  description:
    'The management token as a bearer token (Prometheus: `authorization: { credentials_file: ... }`), unless `METRICS_PUBLIC=true`: the counts cover every key (requests by route, queue depths, jobs), which is the operator\'s view, not a client\'s.',
  responses: { 200: { description: 'Prometheus text exposition', contentType: 'text/plain' } },
};

/** Liveness and readiness (no auth: they reveal no data), and Prometheus metrics (the operator's: see METRICS_DOC). */
export function systemRoutes(ctx: ApiContext, metrics: Metrics): Router {
  const r = Router();

  r.get(
    '/healthz',
    documented({ summary: 'Liveness', responses: { 200: { description: 'The process serves requests', example: { status: 'ok' } } } }, (_req, res) => {
      res.json({ status: 'ok' });
    }),
  );

  r.get('/readyz', documented(READYZ_DOC, async (_req, res) => {
    const checks: Record<string, { ok: boolean; error?: string; latencyMs?: number }> = {};
    const t0 = performance.now();
    try {
      ctx.db.db.prepare('SELECT 1').get();
      checks.sqlite = { ok: true, latencyMs: Math.round((performance.now() - t0) * 100) / 100 };
    } catch {
      checks.sqlite = { ok: false, error: 'sqlite query failed' };
    }
    const t1 = performance.now();
    if (!ctx.queues.isReady()) checks.redis = { ok: false, error: `redis ${ctx.queues.connection.status}` };
    else {
      try {
        await ctx.queues.connection.ping();
        checks.redis = { ok: true, latencyMs: Math.round((performance.now() - t1) * 100) / 100 };
      } catch {
        checks.redis = { ok: false, error: 'redis ping failed' };
      }
    }
    checks.sqliteVec = ctx.db.vecLoaded ? { ok: true } : { ok: true, error: `vector search off: ${ctx.db.vecError}` };
    const ok = checks.sqlite.ok && checks.redis.ok;
    if (!ok) res.setHeader('retry-after', String(RETRY_AFTER_SECONDS));
    res.status(ok ? 200 : 503).json({ status: ok ? 'ready' : 'not_ready', checks, outbox: ctx.queues.outboxCount() });
  }));

  const depth = new Gauge({
    name: 'engram_queue_jobs',
    help: 'Jobs per queue and state',
    labelNames: ['queue', 'state'],
    registers: [metrics.registry],
    async collect() {
      if (!ctx.queues.isReady()) return;
      const results = await Promise.allSettled(QUEUE_NAMES.map((q) => ctx.queues.queue(q).getJobCounts(...STATES)));
      results.forEach((res, i) => {
        if (res.status !== 'fulfilled') return;
        for (const s of STATES) this.set({ queue: QUEUE_NAMES[i], state: s }, res.value[s] ?? 0);
      });
    },
  });
  void depth;
  new Gauge({
    name: 'engram_outbox_rows',
    help: 'Jobs waiting in the SQLite outbox for Redis',
    registers: [metrics.registry],
    collect() {
      this.set(ctx.queues.outboxCount());
    },
  });
  registerOutboxQuarantineGauge(metrics.registry, ctx.queues);

  const metricsAuth = ctx.env.METRICS_PUBLIC ? [] : [requireManagement(ctx.managementToken, { throttle: ctx.authThrottle })];
  r.get('/metrics', ...metricsAuth, documented(METRICS_DOC, async (_req, res, next) => {
    try {
      const snapshots = ctx.queues.isReady() ? await readWorkerMetrics(ctx.queues.connection, ctx.queues.prefix).catch(() => []) : [];
      const out = await metrics.exposition(snapshots);
      res.setHeader('content-type', out.contentType);
      res.send(out.body);
    } catch (err) {
      next(err);
    }
  }));
  return r;
}
