import type { Logger } from '../logger';
import { QDRANT_BACKFILL_DEDUPLICATION_ID, type JobData } from '../queue/jobs';
import type { QueueLayer, RecordedJob } from '../queue/queues';
import { QDRANT_POINT_KIND, type QdrantVectorStore } from '../vector/qdrant.store';
import type { SqliteVecStore } from '../vector/sqlite-vec.store';
import type { MemoryChange } from './memory.service';
import type { QdrantSettingsService } from './qdrant-settings';
import type { JobHooks } from './reindex.service';

/** Memory ids per qdrant-sync job (the payload's cap). */
const SYNC_CHUNK = 200;
const LIVE_STATES = new Set(['active', 'waiting', 'delayed', 'prioritized', 'paused', 'waiting-children']);

export interface BackfillProgress {
  phase: 'counting' | 'copying' | 'switching' | 'done' | 'skipped';
  done: number;
  total: number;
  failed: number;
  afterRowId?: number;
  collection?: string;
  switchedFrom?: string | null;
  dropped?: string[];
  reason?: string;
}

/** Hooks of the backfill job: progress, checkpoint (may hand the job back) and persisting the cursor. */
export interface BackfillHooks extends Pick<JobHooks, 'progress' | 'checkpoint'> {
  saveCursor(c: { afterRowId: number; done: number; failed: number; signature: string }): Promise<void>;
}

/**
 * Keeps Qdrant in step with SQLite: qdrant-sync after every embed, update and delete (ids only),
 * the backfill of existing rows (resumable, switches the alias to a complete collection and drops
 * the old ones), and the cleanup of expired or orphaned points.
 */
export class QdrantSyncService {
  /**
   * Outbox rows recordSyncInTx wrote in the transaction that is committing now (each a qdrant-sync
   * of up to SYNC_CHUNK deleted or updated ids); onChanges, right after that commit, takes them over.
   */
  private recorded: { row: RecordedJob; memoryIds: string[] }[] = [];

  constructor(
    private readonly d: {
      qdrant: QdrantVectorStore;
      qdrantSettings: QdrantSettingsService;
      vectors: SqliteVecStore;
      queues: QueueLayer;
      log: Logger;
    },
  ) {}

  /** Queues qdrant-sync for these memories when Qdrant receives writes (through the outbox when Redis is down). */
  async enqueueSync(memoryIds: string[]): Promise<number> {
    if (memoryIds.length === 0 || !this.d.qdrantSettings.syncing(true)) return 0;
    const unique = [...new Set(memoryIds)];
    let jobs = 0;
    for (let i = 0; i < unique.length; i += SYNC_CHUNK) {
      await this.d.queues.enqueue('qdrant-sync', { memoryIds: unique.slice(i, i + SYNC_CHUNK) });
      jobs++;
    }
    return jobs;
  }

  /**
   * The memory store's delete and update hook, inside the change's transaction: records the point's
   * sync as a pending outbox row (qdrant-sync of the changed ids, one row per SYNC_CHUNK ids) that
   * commits with the change. Nothing else would bring it back: a job whose process dies between the
   * commit and the add of its qdrant-sync (summarize, expiry, an api delete) finds the rows gone when
   * it runs again, and the point would stay in Qdrant for good; an update's point would keep its old
   * payload (session, expiry, type: what Qdrant filters on) for good. onChanges drops the rows once
   * the job is added; otherwise the relay adds them. A new row needs none: its point is written once
   * its vector is, and the repair sweep re-embeds a row whose embed job was lost.
   */
  recordSyncInTx(memoryId: string): void {
    if (!this.d.qdrantSettings.syncing()) return;
    const last = this.recorded[this.recorded.length - 1];
    if (last && last.memoryIds.length < SYNC_CHUNK) {
      // False when that row was rolled back with an earlier transaction: then a new row.
      if (this.d.queues.appendRecorded(last.row, 'memoryIds', memoryId)) {
        last.memoryIds.push(memoryId);
        return;
      }
    }
    this.recorded.push({ row: this.d.queues.recordInTx('qdrant-sync', { memoryIds: [memoryId] }), memoryIds: [memoryId] });
  }

  /**
   * The memory store's after-commit hook: updates and deletes sync now; a content change is synced
   * once its new vector is written (the embed job), so new rows wait for their embedding. The
   * deletions recorded in the transaction are dropped from the outbox once their job is added.
   */
  onChanges(changes: MemoryChange[]): void {
    // Taken synchronously, right after the commit: the next transaction records its own.
    const recorded = this.recorded.splice(0);
    const ids = [
      ...changes.filter((c) => !(c.contentChanged && (c.op === 'create' || c.op === 'import'))).map((c) => c.memory.id),
      ...recorded.flatMap((r) => r.memoryIds),
    ];
    if (ids.length === 0) return;
    this.enqueueSync(ids)
      .then(() => this.d.queues.dropRecorded(recorded.map((r) => r.row)))
      .catch((err: Error) => this.d.log.warn({ err: { message: err.message }, count: ids.length }, 'could not queue qdrant-sync; recorded deletions stay in the outbox for the repair sweep'));
  }

  /** The qdrant-sync job. */
  async sync(memoryIds: string[]): Promise<Record<string, unknown>> {
    if (!this.d.qdrantSettings.syncing(true)) return { skipped: 'qdrant_disabled' };
    return this.d.qdrant.syncMemories(memoryIds);
  }

  /** The backfill job that is waiting or running, if any. */
  async liveBackfill(): Promise<{ id: string; state: string } | null> {
    if (!this.d.queues.isReady()) return null;
    const q = this.d.queues.queue('reindex');
    const id = await q.getDeduplicationJobId(QDRANT_BACKFILL_DEDUPLICATION_ID);
    if (!id) return null;
    const job = await q.getJob(id);
    if (!job) return null;
    const state = await job.getState();
    return LIVE_STATES.has(state) ? { id, state } : null;
  }

  /** Starts a backfill unless one is live; `existing` tells the caller it was already running. */
  async requestBackfill(reason: 'api' | 'reindex' | 'enable'): Promise<{ jobId: string; existing: boolean }> {
    const live = await this.liveBackfill();
    if (live) return { jobId: live.id, existing: true };
    const r = await this.d.queues.enqueue('qdrant-backfill', { reason });
    return { jobId: r.jobId, existing: r.deduplicated };
  }

  /**
   * The qdrant-backfill job: pages through every memory in row order, writing the vectors sqlite-vec
   * holds into the collection of the current signature; the cursor is saved after each page, so a
   * crash resumes there. When every row is written the alias is switched to that collection (one
   * atomic request) and older collections are dropped.
   */
  async backfill(data: JobData<'qdrant-backfill'>, hooks: BackfillHooks): Promise<BackfillProgress> {
    const { qdrant, log } = this.d;
    if (!this.d.qdrantSettings.syncing(true)) return { phase: 'skipped', done: 0, total: 0, failed: 0, reason: 'Qdrant is not enabled' };
    const current = qdrant.currentCollection();
    if (!current) return { phase: 'skipped', done: 0, total: 0, failed: 0, reason: 'no vector index yet (the reindex job builds it, then backfills)' };
    // A checkpoint for another signature (the model changed meanwhile) starts over.
    let afterRowId = data.signature === current.signature ? data.afterRowId : 0;
    let done = data.signature === current.signature ? data.done : 0;
    let failed = data.signature === current.signature ? data.failed : 0;
    const total = done + qdrant.remainingAfter(afterRowId);
    await hooks.progress({ phase: 'copying', done, total, failed, afterRowId, collection: current.collection });
    // Created here, not by the first page: with no memory to copy the alias must still get a collection to name.
    await qdrant.ensureCollection(current.signature, current.dim);
    for (;;) {
      await hooks.checkpoint();
      const page = await qdrant.backfillPage(current.signature, afterRowId, data.batchSize);
      if (page.rows === 0) break;
      afterRowId = page.lastRowId;
      done += page.rows;
      await hooks.saveCursor({ afterRowId, done, failed, signature: current.signature });
      await hooks.progress({ phase: 'copying', done, total: Math.max(total, done), failed, afterRowId, collection: current.collection });
    }
    await hooks.progress({ phase: 'switching', done, total: Math.max(total, done), failed, collection: current.collection });
    const switchedFrom = await qdrant.switchAlias(current.collection);
    const dropped: string[] = [];
    for (const name of await qdrant.staleCollections(current.collection)) {
      if (await qdrant.dropCollection(name)) dropped.push(name);
    }
    if (switchedFrom !== current.collection) log.info({ from: switchedFrom, to: current.collection, dropped }, 'qdrant: alias switched to the complete collection');
    const result: BackfillProgress = { phase: 'done', done, total: Math.max(total, done), failed, collection: current.collection, switchedFrom, dropped };
    await hooks.progress(result);
    return result;
  }

  /** After a reindex finished: copy the (new) vectors into Qdrant and switch the alias once complete. */
  async afterReindex(): Promise<string | null> {
    if (!this.d.qdrantSettings.syncing(true)) return null;
    const r = await this.d.queues.enqueue('qdrant-backfill', { reason: 'reindex' });
    return r.jobId;
  }

  /**
   * The qdrant-cleanup job: counts first (expired points, then orphans whose memory is gone), then
   * deletes them, reporting progress. Engram's own expiry job deletes expired memories (and so their
   * points); this catches what a missed sync or an older process left behind.
   */
  async cleanup(batchSize: number, hooks: Pick<JobHooks, 'progress' | 'checkpoint'>): Promise<Record<string, unknown>> {
    const { qdrant } = this.d;
    if (!this.d.qdrantSettings.syncing(true)) return { phase: 'skipped', reason: 'Qdrant is not enabled', deletedCount: 0 };
    const collections = await qdrant.writeTargets();
    const nowUnix = Math.floor(Date.now() / 1000);
    const expiredFilter = { must: [{ key: 'kind', match: { value: QDRANT_POINT_KIND } }, { key: 'expiresAtUnix', range: { lte: nowUnix } }] };
    let expired = 0;
    for (const c of collections) expired += await qdrant.countWhere(c, expiredFilter);
    await hooks.progress({ phase: 'counted', expired, orphans: null, deleted: 0 });
    for (const c of collections) if (expired > 0) await qdrant.deleteWhere(c, expiredFilter);
    // The orphan sweep scans every remaining point: `done`/`total` make its progress a percentage.
    let total = 0;
    for (const c of collections) total += await qdrant.countWhere(c, { must: [{ key: 'kind', match: { value: QDRANT_POINT_KIND } }] });
    await hooks.progress({ phase: 'orphans', expired, orphans: 0, scanned: 0, deleted: expired, done: 0, total });
    let orphans = 0;
    let scanned = 0;
    for (const c of collections) {
      let offset: number | null = null;
      for (;;) {
        await hooks.checkpoint();
        const page = await qdrant.scrollIds(c, offset, batchSize);
        const gone = qdrant.orphans(page.ids);
        if (gone.length) await qdrant.deleteFrom(c, gone);
        orphans += gone.length;
        scanned += page.ids.length;
        await hooks.progress({ phase: 'orphans', expired, orphans, scanned, deleted: expired + orphans, done: scanned, total: Math.max(total, scanned) });
        if (page.next === null) break;
        offset = page.next;
      }
    }
    const result = { phase: 'done', expired, orphans, scanned, deletedCount: expired + orphans, collections, done: scanned, total: Math.max(total, scanned) };
    await hooks.progress(result);
    return result;
  }
}
