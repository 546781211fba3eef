import { Router } from 'express';
import { conflict, notFound } from '../../errors';
import { listEmbeddingProviders } from '../../embedding/embedding.service';
import { engineStatus } from '../../memory/engine-status';
import type { ApiContext } from '../api-context';
import { estimateTokens } from '../../memory/tokens';
import { handle } from '../validate';
import { memoryDocs } from './memory.docs';
import { createBody, idParams, listQuery, previewBody, reindexBody, updateBody } from './memory.schema';

/** /api/memory: the original's CRUD, list/filters/pagination/stats, health, history. */
export function memoryRoutes(ctx: ApiContext): Router {
  const r = Router();
  const { memory, backends } = ctx;

  r.get(
    '/',
    handle({ query: listQuery }, async ({ query }) => {
      const limit = query.limit ?? 50;
      // offset wins over page, as in the original; page is then derived from it.
      const offset = query.offset ?? ((query.page ?? 1) - 1) * limit;
      const page = query.offset !== undefined ? Math.floor(offset / limit) + 1 : (query.page ?? 1);
      const filter = { apiKeyId: query.apiKeyId, type: query.type, sessionId: query.sessionId, q: query.q };
      const result = await backends.list(filter, limit, offset);
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
          tokensUsed: backends.primaryIsLocal() ? memory.tokensUsedBy(filter) : result.data.reduce((n, m) => n + estimateTokens(m.content), 0),
          hitRate: cache.hitRate,
          cacheStats: { hits: cache.hits, misses: cache.misses, size: cache.size },
        },
      };
    }, memoryDocs.list),
  );

  r.post(
    '/',
    handle({ body: createBody }, async ({ body }, _req, res) => {
      const { memory: m, created } = await backends.create(body, { source: 'api', requestId: res.locals.requestId });
      res.status(created ? 201 : 200);
      return { success: true, id: m.id, created, memory: m };
    }, memoryDocs.create),
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
    }, memoryDocs.health),
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
          extras: { keywordFloor: body.keywordFloor, vectorFloor: body.vectorFloor, temporalBoost: body.temporalBoost, prfWeight: body.prfWeight },
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
    }, memoryDocs.preview),
  );

  r.post(
    '/reindex',
    handle({ body: reindexBody }, async ({ body }, _req, res) => {
      const pending = body.force ? ctx.memory.count() : ctx.vectors.countPending();
      const r = await ctx.reindex.request('api', body.force);
      if (r.existing) throw conflict('A reindex job is already running', { jobId: r.jobId });
      res.status(202);
      return { jobId: r.jobId, queue: r.queue, started: true, pending, via: r.via };
    }, memoryDocs.reindex),
  );

  // The configured backends (digest §8.1) and the health of every one of them.
  r.get(
    '/backends',
    handle({}, async () => ({ ...backends.describe(), health: await backends.healthAll() }), memoryDocs.backends),
  );

  r.get(
    '/engine-status',
    handle(
      {},
      async () =>
        engineStatus({ ...ctx, fts: ctx.db.db, vecError: ctx.db.vecError, qdrantHealth: ctx.qdrantSettings.syncing(true) ? await ctx.qdrant.details() : null }),
      memoryDocs.engineStatus,
    ),
  );

  r.get('/embedding-providers', handle({}, () => ({ providers: listEmbeddingProviders(ctx.env) }), memoryDocs.embeddingProviders));

  r.get(
    '/:id',
    handle({ params: idParams }, async ({ params }) => {
      const m = await backends.get(params.id);
      if (!m) throw notFound('Memory');
      return { memory: m };
    }, memoryDocs.get),
  );

  r.put(
    '/:id',
    handle({ params: idParams, body: updateBody }, async ({ params, body }, _req, res) => {
      const m = await backends.update(params.id, body, { source: 'api', requestId: res.locals.requestId });
      if (!m) throw notFound('Memory');
      return { success: true, memory: m };
    }, memoryDocs.update),
  );

  r.delete(
    '/:id',
    handle({ params: idParams }, async ({ params }, _req, res) => {
      if (!(await backends.delete(params.id, { source: 'api', requestId: res.locals.requestId }))) throw notFound('Memory');
      return { success: true };
    }, memoryDocs.delete),
  );

  r.get(
    '/:id/history',
    handle({ params: idParams }, ({ params }) => {
      const events = memory.history(params.id);
      if (events.length === 0) throw notFound('Memory');
      return { id: params.id, events };
    }, memoryDocs.history),
  );

  return r;
}
