import type { Env } from '../config/env';
import type { Db } from '../db/connection';
import type { EmbeddingService } from '../embedding/embedding.service';
import type { SqliteVecStore } from '../vector/sqlite-vec.store';
import type { SettingsService } from './settings';

/** What engine status reads. */
export interface EngineStatusDeps {
  env: Pick<Env, 'MEMORY_VEC_QUANTIZATION'>;
  /** The connection the FTS5 probe runs on. */
  fts: Db;
  vecError: string | null;
  settings: SettingsService;
  embedding: EmbeddingService;
  vectors: SqliteVecStore;
  /** Qdrant's health when it is enabled (null: disabled). */
  qdrantHealth?: { ok: boolean; latencyMs: number | null; reason: string } | null;
}

/** The original's engine-status shape: keyword, embedding (with cache stats), vector store, qdrant, rerank. */
export function engineStatus(ctx: EngineStatusDeps) {
  const settings = ctx.settings.memory();
  let ftsOk = true;
  let ftsReason = 'FTS5 index over content and key';
  try {
    ctx.fts.prepare("SELECT rowid FROM memory_fts WHERE memory_fts MATCH '\"engram\"' LIMIT 1").all();
  } catch (err) {
    ftsOk = false;
    ftsReason = `FTS5 unavailable: ${(err as Error).message}`;
  }
  const emb = ctx.embedding.resolve(settings);
  const vec = ctx.vectors.stats();
  const current = ctx.vectors.signatureFor(emb);
  const indexMatches = vec.signature !== null && (current === null || current === vec.signature);
  const [provider, ...rest] = (settings.rerankProviderModel ?? '').split('/');
  const rerankModel = rest.join('/') || null;
  return {
    keyword: { available: ftsOk, backend: ftsOk ? 'FTS5' : 'none', reason: ftsReason },
    embedding: {
      source: emb.source,
      model: emb.model,
      dimensions: emb.dimensions ?? vec.activeDim,
      available: emb.source !== null,
      reason: emb.reason,
      signature: emb.signature,
      cacheStats: ctx.embedding.cacheStats(),
    },
    vectorStore: {
      backend: vec.available ? 'sqlite-vec' : 'none',
      available: vec.available && indexMatches,
      rowCount: vec.rowCount,
      needsReindex: vec.needsReindex,
      activeDim: vec.activeDim,
      signature: vec.signature,
      quantization: ctx.env.MEMORY_VEC_QUANTIZATION,
      reason: !vec.available
        ? `sqlite-vec not loaded: ${ctx.vecError ?? 'unknown'}`
        : vec.signature === null
          ? 'no vector index yet (built by the reindex job once an embedding source is configured)'
          : indexMatches
            ? `sqlite-vec active, dim=${vec.activeDim}`
            : `index built for ${vec.signature}; the current model is ${current}: reindex pending`,
    },
    qdrant: ctx.qdrantHealth
      ? { enabled: true, healthy: ctx.qdrantHealth.ok, latencyMs: ctx.qdrantHealth.latencyMs, error: ctx.qdrantHealth.ok ? null : ctx.qdrantHealth.reason }
      : { enabled: false, healthy: null, latencyMs: null, error: null },
    rerank: {
      enabled: settings.rerankEnabled,
      provider: settings.rerankProviderModel ? provider : null,
      model: rerankModel,
      available: settings.rerankEnabled && !!settings.rerankProviderModel,
      reason: !settings.rerankEnabled ? 'rerank disabled in settings' : !settings.rerankProviderModel ? 'no rerank model configured' : 'rerank configured',
    },
  };
}
