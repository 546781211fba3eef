import { Router } from 'express';
import { z } from 'zod';
import { AppError, conflict } from '../../errors';
import { EMBEDDING_PROVIDERS } from '../../embedding/providers';
import { sanitizeEmbeddingMessage } from '../../embedding/embedding.service';
import { qdrantSettingsUpdateSchema } from '../../memory/qdrant-settings';
import { JOBS } from '../../queue/jobs';
import { QDRANT_MAX_TOP_K, sanitizeQdrantMessage } from '../../vector/qdrant.store';
import { VectorUnavailableError } from '../../vector/types';
import type { ApiContext } from '../api-context';
import { handle } from '../validate';

/** POST /api/settings/qdrant/search: a tenant-scoped test search (the original had no tenant scope and capped at 20). */
const searchBody = z.strictObject({
  query: z.string().min(1).max(4000),
  apiKeyId: z.string().min(1).max(128),
  sessionId: z.string().min(1).max(256).optional(),
  topK: z.number().int().min(1).max(QDRANT_MAX_TOP_K).default(5),
});

const cleanupBody = z.strictObject({ batchSize: z.number().int().min(1).max(1000).optional() });

/** /api/settings/qdrant: settings (api key masked), health, test search, cleanup job, embedding models. */
export function qdrantSettingsRoutes(ctx: ApiContext): Router {
  const r = Router();
  r.get('/', handle({}, () => ctx.qdrantSettings.masked()));
  r.put(
    '/',
    handle({ body: qdrantSettingsUpdateSchema }, async ({ body }) => {
      const wasSyncing = ctx.qdrantSettings.syncing(true);
      const out = ctx.qdrantSettings.update(body);
      if (wasSyncing || !ctx.qdrantSettings.syncing(true)) return out;
      // Turned on: searches stay on sqlite-vec until a backfill has copied every memory and pointed the alias.
      try {
        const backfill = await ctx.qdrantSync.requestBackfill('enable');
        ctx.log.info({ jobId: backfill.jobId, existing: backfill.existing }, 'qdrant enabled; backfill queued (Qdrant serves searches once it completes)');
        return { ...out, backfill: { jobId: backfill.jobId, queue: JOBS['qdrant-backfill'].queue } };
      } catch (err) {
        // The settings are saved; POST /api/memory/qdrant/backfill starts it later.
        ctx.log.warn({ err: { message: (err as Error).message } }, 'qdrant enabled, but its backfill could not be queued');
        return { ...out, backfill: null };
      }
    }),
  );
  // Reads only: readyz, alias target, dimension, point count; never creates anything.
  r.get('/health', handle({}, () => ctx.qdrant.details()));
  r.post(
    '/search',
    handle({ body: searchBody }, async ({ body }) => {
      const started = performance.now();
      const settings = ctx.settings.memoryFresh();
      let embedded;
      try {
        embedded = await ctx.embedding.embedOne(body.query, settings);
      } catch (err) {
        return { ok: false, latencyMs: 0, error: `embedding failed: ${sanitizeEmbeddingMessage((err as Error).message)}`, results: [] };
      }
      if (!embedded.vector || !embedded.resolution.source) return { ok: false, latencyMs: 0, error: embedded.resolution.reason || 'no embedding source configured', results: [] };
      try {
        const signature = ctx.vectors.signatureFor(embedded.resolution) ?? undefined;
        const results = await ctx.qdrant.searchWithPayload({
          apiKeyId: body.apiKeyId,
          vector: embedded.vector,
          k: body.topK,
          filter: { nowIso: new Date().toISOString(), sessionId: body.sessionId ?? null, signature },
        });
        return { ok: true, latencyMs: Math.round((performance.now() - started) * 10) / 10, results };
      } catch (err) {
        if (!(err instanceof VectorUnavailableError)) throw err;
        return { ok: false, latencyMs: Math.round((performance.now() - started) * 10) / 10, error: sanitizeQdrantMessage(err.message, ctx.qdrantSettings.get().apiKey), results: [] };
      }
    }),
  );
  r.post(
    '/cleanup',
    handle({ body: cleanupBody }, async ({ body }, _req, res) => {
      if (!ctx.qdrantSettings.syncing(true)) throw new AppError(409, 'conflict', 'Qdrant is not enabled');
      const job = await ctx.queues.enqueue('qdrant-cleanup', body.batchSize ? { batchSize: body.batchSize } : {});
      res.status(202);
      return { jobId: job.jobId, queue: job.queue, via: job.via };
    }),
  );
  // Engram stores the memory embedding's own vectors in Qdrant; this lists the embedding models it can use (the original's shape).
  r.get(
    '/embedding-models',
    handle({}, () => ({
      models: EMBEDDING_PROVIDERS.flatMap((p) => p.models.map((m) => ({ value: `${p.id}/${m.id}`, label: `${m.name} (${p.id})` }))).sort((a, b) => a.value.localeCompare(b.value)),
    })),
  );
  return r;
}

/** /api/memory/qdrant: the backfill of existing memories into Qdrant (202 with the job id; 409 while one runs). */
export function qdrantMemoryRoutes(ctx: ApiContext): Router {
  const r = Router();
  r.post(
    '/backfill',
    handle({ body: z.strictObject({}) }, async (_input, _req, res) => {
      if (!ctx.qdrantSettings.syncing(true)) throw new AppError(409, 'conflict', 'Qdrant is not enabled (PUT /api/settings/qdrant {"enabled": true, "host": …})');
      const r2 = await ctx.qdrantSync.requestBackfill('api');
      // The queue comes from the job map, so a client follows the job where it really runs (GET /api/jobs/:queue/:id/events).
      const queue = JOBS['qdrant-backfill'].queue;
      if (r2.existing) throw conflict('A Qdrant backfill is already running', { jobId: r2.jobId, queue });
      res.status(202);
      return { jobId: r2.jobId, queue, started: true, total: ctx.memory.count() };
    }),
  );
  return r;
}
