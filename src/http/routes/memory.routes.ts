import { Router } from 'express';
import { conflict, notFound } from '../../errors';
import { listEmbeddingProviders } from '../../embedding/embedding.service';
import { engineStatus } from '../../memory/engine-status';
import type { ApiContext } from '../api-context';
import { handle } from '../validate';
import { createBody, idParams, listQuery, previewBody, reindexBody, updateBody } from './memory.schema';

/** /api/memory: the original's CRUD, list/filters/pagination/stats, health, history. */
export function memoryRoutes(ctx: ApiContext): Router {
  const r = Router();
  const { memory } = ctx;

  r.get(
    '/',
    handle({ query: listQuery }, ({ query }) => {
      const limit = query.limit ?? 50;
      // offset wins over page, as in the original; page is then derived from it.
      const offset = query.offset ?? ((query.page ?? 1) - 1) * limit;
      const page = query.offset !== undefined ? Math.floor(offset / limit) + 1 : (query.page ?? 1);
      const filter = { apiKeyId: query.apiKeyId, type: query.type, sessionId: query.sessionId, q: query.q };
      const result = memory.list(filter, limit, offset);
      const cache = memory.cache.stats();
      return {
        data: result.data,
        total: result.total,
        page,
        limit,
        totalPages: Math.ceil(result.total / limit),
        // Every figure describes the filtered set (total and byType already did; tokensUsed was the whole key's).
        stats: {
          total: result.total,
          byType: result.byType,
          tokensUsed: memory.tokensUsedBy(filter),
          hitRate: cache.hitRate,
          cacheStats: { hits: cache.hits, misses: cache.misses, size: cache.size },
        },
      };
    }),
  );

  r.post(
    '/',
    handle({ body: createBody }, ({ body }, _req, res) => {
      const { memory: m, created } = memory.create(body, { source: 'api', requestId: res.locals.requestId });
      res.status(created ? 201 : 200);
      return { success: true, id: m.id, created, memory: m };
    }),
  );

  r.get(
    '/health',
    handle({}, () => {
      const started = performance.now();
      try {
        memory.selfTest();
        return { working: true, latencyMs: Math.round((performance.now() - started) * 100) / 100 };
      } catch (err) {
        ctx.log.warn({ err }, 'memory health check failed');
        return { working: false, latencyMs: Math.round(performance.now() - started), error: 'memory store self-test failed' };
      }
    }),
  );

  r.post(
    '/retrieve-preview',
    handle({ body: previewBody }, async ({ body }) => {
      const settings = ctx.settings.memory();
      const result = await ctx.retrieval.retrieve(
        body.apiKeyId ?? null,
        {
          query: body.query,
          strategy: body.strategy,
          maxTokens: body.maxTokens,
          retentionDays: settings.retentionDays,
          sessionId: body.sessionId ?? null,
          scope: body.sessionId ? 'session' : 'apiKey',
          limit: body.limit,
          fusion: { method: body.hybridFusion, ftsWeight: body.ftsWeight, vectorWeight: body.vectorWeight },
        },
        { preview: true },
      );
      return {
        memories: result.items.map((it) => ({
          id: it.memory.id,
          apiKeyId: it.memory.apiKeyId,
          type: it.memory.type,
          key: it.memory.key,
          content: it.memory.content,
          score: it.score,
          tokens: it.tokens,
          tier: it.tier,
          vecScore: it.vecScore,
          ftsScore: it.ftsScore,
          truncated: it.truncated,
        })),
        resolution: result.resolution,
        totalTokensUsed: result.totalTokens,
        budgetMaxTokens: result.budgetMaxTokens,
      };
    }),
  );

  r.post(
    '/reindex',
    handle({ body: reindexBody }, async ({ body }, _req, res) => {
      const pending = body.force ? ctx.memory.count() : ctx.vectors.countPending();
      const r = await ctx.reindex.request('api', body.force);
      if (r.existing) throw conflict('A reindex job is already running', { jobId: r.jobId });
      res.status(202);
      return { jobId: r.jobId, queue: r.queue, started: true, pending, via: r.via };
    }),
  );

  r.get('/engine-status', handle({}, () => engineStatus({ ...ctx, fts: ctx.db.db, vecError: ctx.db.vecError })));

  r.get('/embedding-providers', handle({}, () => ({ providers: listEmbeddingProviders(ctx.env) })));

  r.get(
    '/:id',
    handle({ params: idParams }, ({ params }) => {
      const m = memory.get(params.id);
      if (!m) throw notFound('Memory');
      return { memory: m };
    }),
  );

  r.put(
    '/:id',
    handle({ params: idParams, body: updateBody }, ({ params, body }, _req, res) => {
      const m = memory.update(params.id, body, { source: 'api', requestId: res.locals.requestId });
      if (!m) throw notFound('Memory');
      return { success: true, memory: m };
    }),
  );

  r.delete(
    '/:id',
    handle({ params: idParams }, ({ params }, _req, res) => {
      if (!memory.delete(params.id, { source: 'api', requestId: res.locals.requestId })) throw notFound('Memory');
      return { success: true };
    }),
  );

  r.get(
    '/:id/history',
    handle({ params: idParams }, ({ params }) => {
      const events = memory.history(params.id);
      if (events.length === 0) throw notFound('Memory');
      return { id: params.id, events };
    }),
  );

  return r;
}
