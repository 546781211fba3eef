import type { EmbeddingService } from '../embedding/embedding.service';
import type { Logger } from '../logger';
import type { EnqueueResult, QueueLayer } from '../queue/queues';
import { REINDEX_DEDUPLICATION_ID } from '../queue/jobs';
import { parseSignature, vectorSignature } from '../vector/signature';
import type { SqliteVecStore } from '../vector/sqlite-vec.store';
import type { MemoryChange, MemoryService } from './memory.service';
import type { SettingsService } from './settings';

/** What a long job hands the service: progress reports and a checkpoint that may give the job back. */
export interface JobHooks {
  progress(p: object): Promise<void>;
  /** Throws (after handing the job back) when the worker is stopping; the flags are the checkpoint. */
  checkpoint(): Promise<void>;
  /** Called once the `force` flag has been applied, so a retry resumes instead of starting over. */
  forceApplied?(): Promise<void>;
}

export interface ReindexResult {
  phase: 'done' | 'skipped';
  done: number;
  total: number;
  failed: number;
  signature?: string;
  rebuilt?: boolean;
  reason?: string;
  qdrantBackfillJobId?: string;
}

/** Why the index does not match the embedding model in effect (null: it matches, or nothing can be built). */
export type DriftReason = 'no_index' | 'model_changed' | 'quantization_changed' | null;

/** The one rule for which changes need a (new) vector: their content changed on a create, update or import. */
function needsEmbedding(c: MemoryChange): boolean {
  return c.contentChanged && (c.op === 'create' || c.op === 'update' || c.op === 'import');
}

const LIVE_STATES = new Set(['active', 'waiting', 'delayed', 'prioritized', 'paused', 'waiting-children']);

/**
 * Keeps the vector tier in step with the memories: one embedding per changed row, the singleton
 * reindex (at most one live job, BullMQ deduplication id `reindex`, added atomically in Redis),
 * drift detection when the model or quantization changed under it, and the reindex itself
 * (batches whose checkpoint is the `needs_reindex` flag).
 */
export class ReindexService {
  constructor(
    private readonly d: {
      memory: MemoryService;
      settings: SettingsService;
      embedding: EmbeddingService;
      vectors: SqliteVecStore;
      queues: QueueLayer;
      log: Logger;
      /** Told about written vectors, so the Qdrant tier follows (qdrant-sync, backfill after a reindex). */
      qdrantSync?: { enqueueSync(memoryIds: string[]): Promise<number>; afterReindex(): Promise<string | null> };
    },
  ) {}

  /**
   * Enqueues `embed-memory` for every change that altered content; returns how many. `bulk` adds
   * them in one round trip (the import job's batches) instead of one job at a time through the
   * outbox-backed path.
   */
  async enqueueEmbeds(changes: MemoryChange[], opts: { bulk?: boolean } = {}): Promise<number> {
    const inputs = changes
      .filter(needsEmbedding)
      .map((c) => ({ memoryId: c.memory.id, contentHash: c.memory.contentHash }));
    if (opts.bulk) return this.d.queues.enqueueMany('embed-memory', inputs);
    await Promise.all(inputs.map((input) => this.d.queues.enqueue('embed-memory', input)));
    return inputs.length;
  }

  /**
   * Embeds the changed rows of one extraction in the job that wrote them when the source runs in
   * this process (static, transformers): one embed call and one vec0 transaction instead of an
   * `embed-memory` job per fact, which saves a queue hop per chat. Whatever it cannot finish here
   * (a remote source, no index for this model yet, an embedding or SQLite error) is queued as
   * `embed-memory` exactly as before, so the retry and reindex paths stay the same. The upsert is
   * keyed by row and content hash: a second run stores the same vectors and changes nothing else.
   */
  async embedInline(changes: MemoryChange[]): Promise<{ inline: number; queued: number }> {
    const wanted = changes.filter(needsEmbedding);
    if (wanted.length === 0) return { inline: 0, queued: 0 };
    const queue = async () => ({ inline: 0, queued: await this.enqueueEmbeds(wanted) });
    const settings = this.d.settings.memoryFresh();
    const source = this.d.embedding.resolve(settings).source;
    if ((source !== 'static' && source !== 'transformers') || !this.d.vectors.available()) return queue();
    try {
      const { vectors, resolution } = await this.d.embedding.embedMany(
        wanted.map((c) => c.memory.content),
        settings,
      );
      const signature = this.d.vectors.signatureFor(resolution);
      // No index for this model yet (or it is being rebuilt): embed-memory asks for the reindex.
      if (!signature || this.d.vectors.activeSignature() !== signature) return queue();
      const res = await this.d.vectors.upsert(
        wanted.map((c, i) => ({ rowId: c.memory.rowId, apiKeyId: c.memory.apiKeyId, vector: vectors[i] ?? new Float32Array(resolution.dimensions ?? 0), contentHash: c.memory.contentHash })),
        signature,
      );
      if (res.missing < wanted.length) await this.d.qdrantSync?.enqueueSync(wanted.map((c) => c.memory.id));
      return { inline: wanted.length, queued: 0 };
    } catch (err) {
      this.d.log.warn({ err: { message: (err as Error).message }, rows: wanted.length }, 'inline embedding failed; embed-memory jobs queued instead');
      return queue();
    }
  }

  /** The reindex job that is waiting or running, if any (null while Redis is unreachable). */
  async live(): Promise<{ id: string; state: string } | null> {
    if (!this.d.queues.isReady()) return null;
    const q = this.d.queues.queue('reindex');
    const id = await q.getDeduplicationJobId(REINDEX_DEDUPLICATION_ID);
    if (!id) return null;
    const job = await q.getJob(id);
    if (!job) return null;
    const state = await job.getState();
    return LIVE_STATES.has(state) ? { id, state } : null;
  }

  /**
   * Starts a reindex unless one is live. Concurrent callers (any process) get the same job: the
   * deduplication id is taken atomically in Redis (or, while Redis is down, by the one pending
   * outbox row), and `existing` is true for every caller but the one whose job holds it.
   */
  async request(trigger: 'api' | 'auto', force = false): Promise<EnqueueResult & { existing: boolean }> {
    const live = await this.live();
    if (live) return { jobId: live.id, queue: 'reindex', via: 'queue', deduplicated: true, existing: true };
    const r = await this.d.queues.enqueue('reindex', { force, trigger });
    return { ...r, existing: r.deduplicated };
  }

  /**
   * Compares the index with the embedding in effect (settings and env, e.g. MEMORY_STATIC_MODEL or
   * MEMORY_VEC_QUANTIZATION): a different model, width or storage type is drift. Compared without
   * the width when it is not measured yet in this process.
   */
  drift(): DriftReason {
    const res = this.d.embedding.resolve(this.d.settings.memoryFresh());
    if (!res.source || !this.d.vectors.available()) return null;
    const stored = this.d.vectors.activeSignature();
    if (!stored) return this.d.memory.count() > 0 ? 'no_index' : null;
    const parsed = parseSignature(stored);
    const wanted = this.d.vectors.quantization;
    if (parsed && parsed.quantization !== wanted) return 'quantization_changed';
    const full = this.d.vectors.signatureFor(res);
    if (full) return full === stored ? null : 'model_changed';
    const prefix = vectorSignature({ ...res, dimensions: null }).replace(/:null$/, ':');
    return stored.startsWith(prefix) ? null : 'model_changed';
  }

  /** Starts a reindex when the index drifted from the model in effect (worker start, every repair sweep). */
  async reindexOnDrift(): Promise<{ drift: DriftReason; jobId: string | null }> {
    const drift = this.drift();
    if (!drift) return { drift, jobId: null };
    const { jobId } = await this.request('auto');
    this.d.log.info({ drift, jobId }, 'vector index does not match the embedding model in effect: reindex queued');
    return { drift, jobId };
  }

  /**
   * The `embed-memory` job: re-reads the row (gone or edited since → skip; a newer job carries the
   * new hash), embeds it and upserts its vector. A model change starts the reindex instead.
   */
  async embedOne(memoryId: string, contentHash: string): Promise<Record<string, unknown>> {
    const row = this.d.memory.findFresh(memoryId);
    if (!row) return { skipped: 'memory_gone' };
    if (row.contentHash !== contentHash) return { skipped: 'content_changed' };
    if (!this.d.vectors.available()) return { skipped: 'vector_store_unavailable' };
    const settings = this.d.settings.memoryFresh();
    if (!this.d.embedding.resolve(settings).source) return { skipped: 'no_embedding_source' };
    // Embedding errors throw: BullMQ retries with backoff, and the row stays flagged meanwhile.
    const { vector, resolution } = await this.d.embedding.embedOne(row.content, settings);
    const signature = this.d.vectors.signatureFor(resolution);
    if (!signature) return { skipped: 'dimensions_unknown' };
    if (this.d.vectors.activeSignature() !== signature) {
      const { jobId } = await this.request('auto');
      return { skipped: 'index_signature_changed', reindexJobId: jobId };
    }
    const res = await this.d.vectors.upsert(
      [{ rowId: row.rowId, apiKeyId: row.apiKeyId, vector: vector ?? new Float32Array(resolution.dimensions ?? 0), contentHash }],
      signature,
    );
    // Qdrant follows what sqlite-vec now holds (a zero vector removes the point).
    const qdrantSyncJobs = res.missing ? 0 : ((await this.d.qdrantSync?.enqueueSync([memoryId])) ?? 0);
    return { stored: res.stored === 1, cleared: res.cleared === 1, skipped: res.zeroVectors ? 'zero_vector' : res.missing ? 'memory_missing' : null, qdrantSyncJobs };
  }

  /** Queues `embed-memory` for rows still flagged (deterministic ids: a row with a live job is not queued twice). */
  async enqueueFlagged(batchSize: number, hooks: Pick<JobHooks, 'checkpoint' | 'progress'>): Promise<number> {
    let queued = 0;
    let cursor = 0;
    for (;;) {
      await hooks.checkpoint();
      const rows = this.d.vectors.pendingReindex(batchSize, cursor);
      if (rows.length === 0) break;
      cursor = rows[rows.length - 1].rowId;
      queued += await this.d.queues.enqueueMany(
        'embed-memory',
        rows.map((r) => ({ memoryId: r.id, contentHash: r.contentHash })),
      );
      await hooks.progress({ phase: 'flagged', done: queued });
    }
    return queued;
  }

  /**
   * The `reindex` job: measures the model, rebuilds the index when its signature changed (here and
   * only here), then re-embeds every flagged row in batches. Failed rows stay flagged and are counted.
   */
  async run(opts: { force: boolean; batchSize: number }, hooks: JobHooks): Promise<ReindexResult> {
    const { embedding, vectors, log } = this.d;
    const settings = this.d.settings.memoryFresh();
    if (!embedding.resolve(settings).source) {
      return { phase: 'skipped', reason: embedding.resolve(settings).reason || 'no embedding source configured', done: 0, total: 0, failed: 0 };
    }
    if (opts.force) {
      const flagged = vectors.markAllNeedsReindex();
      await hooks.forceApplied?.();
      log.info({ flagged }, 'reindex: every memory flagged');
    }
    // Measure the model (dimensions are never assumed) and make sure the index matches it.
    const probe = await embedding.embedMany(['engram dimension probe'], settings, undefined, { useCache: false });
    const signature = vectors.signatureFor(probe.resolution);
    const dim = probe.resolution.dimensions;
    if (!signature || !dim) throw new Error('could not measure the embedding dimensions');
    let rebuilt = false;
    if (!vectors.isCompatible(signature)) {
      const { flagged } = vectors.rebuild(signature, dim);
      rebuilt = true;
      log.info({ signature, flagged }, 'reindex: index rebuilt for a new embedding signature');
    }

    const total = vectors.countPending();
    let done = 0;
    let failed = 0;
    let cursor = 0;
    await hooks.progress({ phase: 'embedding', done, total, failed });
    for (;;) {
      await hooks.checkpoint();
      const rows = vectors.pendingReindex(opts.batchSize, cursor);
      if (rows.length === 0) break;
      cursor = rows[rows.length - 1].rowId;
      try {
        const { vectors: embedded } = await embedding.embedMany(
          rows.map((r) => r.content),
          settings,
          undefined,
          { useCache: false },
        );
        const res = await vectors.upsert(
          rows.map((r, i) => ({ rowId: r.rowId, apiKeyId: r.apiKeyId, vector: embedded[i] ?? new Float32Array(dim), contentHash: r.contentHash })),
          signature,
        );
        done += rows.length - res.missing;
      } catch (err) {
        failed += rows.length;
        log.warn({ err: { message: (err as Error).message }, rows: rows.length }, 'reindex: batch failed; its rows stay flagged');
      }
      await hooks.progress({ phase: 'embedding', done, total, failed });
    }
    if (total > 0 && done === 0 && failed > 0) throw new Error(`reindex: every batch failed (${failed} rows still flagged)`);
    // Qdrant gets the rebuilt vectors in a collection of their own; its alias switches once that is complete.
    const qdrantBackfillJobId = (await this.d.qdrantSync?.afterReindex()) ?? undefined;
    const result: ReindexResult = { phase: 'done', done, total, failed, signature, rebuilt, ...(qdrantBackfillJobId ? { qdrantBackfillJobId } : {}) };
    await hooks.progress(result);
    return result;
  }
}
