import crypto from 'node:crypto';
import type { Db } from '../db/connection';
import { nowIso } from '../db/connection';
import { MemoryRepository } from './memory.repository';
import { conflict } from '../errors';
import { MemoryReadCache } from './read-cache';
import {
  toPublic,
  type ChangeContext,
  type CreateMemoryInput,
  type EventOp,
  type ListFilter,
  type Memory,
  type MemoryEvent,
  type MemoryRecord,
  type UpdateMemoryInput,
} from './types';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** One memory as an import brings it: every public field, already validated and normalised. */
export type ImportRecord = Memory;

/** A record that cannot be imported (reported with its line; the rest of the file goes on). */
export class ImportRecordError extends Error {}

/** sha-256 of the text that gets embedded (content only, as the original). */
export function contentHash(content: string): string {
  return crypto.createHash('sha256').update(content).digest('hex');
}

/** What a committed change did; listeners enqueue follow-up jobs (embedding, Qdrant sync). */
export interface MemoryChange {
  op: EventOp;
  memory: MemoryRecord;
  contentChanged: boolean;
  /**
   * True for a pure re-assertion: the upsert changed nothing but the row's bookkeeping
   * (updated_at, reassert_count, last_asserted_at). No history row, no hooks, no embedding.
   */
  reasserted: boolean;
}

export interface UpsertOptions {
  /**
   * Metadata keys that only record where an assertion came from (extraction: extractedAt,
   * requestId): a difference in these alone is a re-assertion, and the stored values stay.
   */
  provenanceKeys?: readonly string[];
}

/** JSON with object keys sorted, so equal values compare equal whatever their key order. */
function canonicalJson(v: unknown): string {
  return JSON.stringify(v, (_k, val: unknown) =>
    val && typeof val === 'object' && !Array.isArray(val)
      ? Object.fromEntries(Object.entries(val as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : val,
  );
}

function withoutKeys(m: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  if (keys.length === 0) return m;
  return Object.fromEntries(Object.entries(m).filter(([k]) => !keys.includes(k)));
}

export interface MemoryHooks {
  /**
   * Runs inside the delete transaction: the vector row goes with the memory row, and the Qdrant
   * deletion is recorded in the same commit (see QdrantSyncService.recordSyncInTx).
   */
  onDeleteInTx?: (rowId: number, memoryId: string) => void;
  /**
   * Runs inside the transaction of every change to an existing row (update, import over it, re-embedding
   * flag included; not a re-assertion, which changes nothing anyone follows): Qdrant's payload sync is
   * recorded in the same commit, as a deletion's is.
   */
  onUpdateInTx?: (rowId: number, memoryId: string) => void;
  /** Runs after commit, once per changed row. */
  afterCommit?: (changes: MemoryChange[]) => void;
}

export interface ListResult {
  data: Memory[];
  total: number;
  byType: Record<string, number>;
  tokensUsed: number;
}

function isUniqueKeyViolation(err: unknown): boolean {
  // Duck-typed: SqliteError may come from another realm (the native addon keeps the first one it saw).
  const e = err as { code?: unknown; message?: unknown } | null;
  return (
    !!e &&
    e.code === 'SQLITE_CONSTRAINT_UNIQUE' &&
    typeof e.message === 'string' &&
    /memories\.api_key_id, memories\.key|idx_memories_api_key_key/.test(e.message)
  );
}

/** The memory store: upserts, reads through the LRU, history for every change, hooks after commit. */
export class MemoryService {
  private readonly repo: MemoryRepository;
  private seenDataVersion: number;
  private hooks: MemoryHooks[] = [];

  constructor(
    private readonly db: Db,
    readonly cache: MemoryReadCache,
  ) {
    this.repo = new MemoryRepository(db);
    this.seenDataVersion = this.repo.dataVersion();
  }

  addHooks(h: MemoryHooks): void {
    this.hooks.push(h);
  }

  private event(op: EventOp, before: MemoryRecord | null, after: MemoryRecord | null, ctx: ChangeContext): void {
    const ref = (after ?? before)!;
    this.repo.insertEvent({
      rowId: ref.rowId,
      memoryUuid: ref.id,
      apiKeyId: ref.apiKeyId,
      op,
      before: before ? toPublic(before) : null,
      after: after ? toPublic(after) : null,
      source: ctx.source,
      jobId: ctx.jobId ?? null,
      requestId: ctx.requestId ?? null,
      createdAt: nowIso(),
    });
    if (before && after) for (const h of this.hooks) h.onUpdateInTx?.(after.rowId, after.id);
  }

  private commit(changes: MemoryChange[]): void {
    for (const c of changes) this.cache.invalidate(c.memory.id);
    // A re-assertion changed nothing anyone follows (content, vectors, points): hooks hear of real changes only.
    const real = changes.filter((c) => !c.reasserted);
    if (real.length === 0) return;
    for (const h of this.hooks) h.afterCommit?.(real);
  }

  /**
   * Upsert inside an open transaction. A row with the same (apiKeyId, key) is updated — history
   * row, re-embedding when the content changed — unless nothing but provenance differs: then it is
   * a re-assertion, counted on the row (reassert_count, last_asserted_at) with updated_at
   * refreshed (retention follows re-assertions), and no history row.
   */
  upsertInTx(input: CreateMemoryInput, ctx: ChangeContext, op: EventOp = 'create', opts: UpsertOptions = {}): MemoryChange {
    const now = nowIso();
    const key = input.key && input.key.length > 0 ? input.key : null;
    const existing = key ? this.repo.findByKey(input.apiKeyId, key) : null;
    if (existing) {
      const hash = contentHash(input.content);
      const contentChanged = hash !== existing.contentHash;
      const metadata = { ...existing.metadata, ...(input.metadata ?? {}) };
      const provenance = opts.provenanceKeys ?? [];
      const sessionId = input.sessionId === undefined ? undefined : input.sessionId || null;
      const changed =
        contentChanged ||
        input.type !== existing.type ||
        (sessionId !== undefined && (sessionId ?? '') !== existing.sessionId) ||
        (input.expiresAt !== undefined && input.expiresAt !== existing.expiresAt) ||
        canonicalJson(withoutKeys(metadata, provenance)) !== canonicalJson(withoutKeys(existing.metadata, provenance));
      if (!changed) {
        this.repo.reassert(existing.rowId, now);
        return { op: 'update', memory: this.repo.findByRowId(existing.rowId)!, contentChanged: false, reasserted: true };
      }
      this.repo.update(existing.rowId, {
        content: input.content,
        metadata,
        sessionId,
        type: input.type,
        expiresAt: input.expiresAt,
        contentHash: hash,
        needsReindex: contentChanged ? true : undefined,
        updatedAt: now,
      });
      const after = this.repo.findByRowId(existing.rowId)!;
      this.event(op === 'create' ? 'update' : op, existing, after, ctx);
      return { op: 'update', memory: after, contentChanged, reasserted: false };
    }
    const id = input.id && UUID_RE.test(input.id) ? input.id.toLowerCase() : crypto.randomUUID();
    const rowId = this.repo.insert({
      id,
      apiKeyId: input.apiKeyId,
      sessionId: input.sessionId || null,
      type: input.type,
      key,
      content: input.content,
      metadata: input.metadata ?? {},
      createdAt: now,
      expiresAt: input.expiresAt ?? null,
      contentHash: contentHash(input.content),
    });
    const after = this.repo.findByRowId(rowId)!;
    this.event(op, null, after, ctx);
    return { op: 'create', memory: after, contentChanged: true, reasserted: false };
  }

  /** Creates a memory, or updates the one with the same (apiKeyId, key): metadata merged, createdAt kept. */
  create(input: CreateMemoryInput, ctx: ChangeContext): { memory: Memory; created: boolean } {
    const change = this.db.transaction(() => this.upsertInTx(input, ctx)).immediate();
    this.commit([change]);
    return { memory: toPublic(change.memory), created: change.op === 'create' };
  }

  /** Upserts many in one transaction (extraction, import); returns the changes, re-assertions included. */
  upsertMany(inputs: CreateMemoryInput[], ctx: ChangeContext, op: EventOp = 'create', opts: UpsertOptions = {}): MemoryChange[] {
    const changes = this.db.transaction(() => inputs.map((i) => this.upsertInTx(i, ctx, op, opts))).immediate();
    this.commit(changes);
    return changes;
  }

  /**
   * upsertMany whose transaction first asks `claim` (a durable job's record, see QueueLayer.claimDurable):
   * when it says no, nothing is written and the answer is null. Record and facts commit together.
   */
  upsertManyClaimed(inputs: CreateMemoryInput[], ctx: ChangeContext, claim: () => boolean, op: EventOp = 'create', opts: UpsertOptions = {}): MemoryChange[] | null {
    const changes = this.db.transaction(() => (claim() ? inputs.map((i) => this.upsertInTx(i, ctx, op, opts)) : null)).immediate();
    if (changes) this.commit(changes);
    return changes;
  }

  private syncCacheWithOtherProcesses(): void {
    const v = this.repo.dataVersion();
    if (v !== this.seenDataVersion) {
      this.seenDataVersion = v;
      this.cache.clear();
    }
  }

  /** Reads one memory (through the cache); null when absent. */
  getRecord(id: string): MemoryRecord | null {
    if (typeof id !== 'string' || id.length === 0) return null;
    this.syncCacheWithOtherProcesses();
    const hit = this.cache.get(id);
    if (hit) return hit;
    const r = this.repo.findById(id);
    if (r) this.cache.set(r);
    return r;
  }

  /** Reads one row straight from SQLite (job handlers: the current state, never a cached one). */
  findFresh(id: string): MemoryRecord | null {
    return this.repo.findById(id);
  }

  /** The row of a key's memory with this upsert key, if any. */
  findByKey(apiKeyId: string, key: string): MemoryRecord | null {
    return this.repo.findByKey(apiKeyId, key);
  }

  /** How many memories exist (all tenants). */
  count(): number {
    return this.repo.count();
  }

  get(id: string): Memory | null {
    const r = this.getRecord(id);
    return r ? toPublic(r) : null;
  }

  /**
   * Applies a partial update; null when the memory does not exist; 409 when the new key is taken. A patch that
   * changes nothing (every field it names already holds that value) writes nothing: no history row, no updated_at,
   * no re-embedding or sync; the memory is answered as it is.
   */
  update(id: string, patch: UpdateMemoryInput, ctx: ChangeContext): Memory | null {
    let change: MemoryChange | null;
    let untouched: MemoryRecord | null = null;
    try {
      change = this.db
        .transaction((): MemoryChange | null => {
          const before = this.repo.findById(id);
          if (!before) return null;
          const hash = patch.content !== undefined ? contentHash(patch.content) : before.contentHash;
          const contentChanged = hash !== before.contentHash;
          const sessionId = patch.sessionId === undefined ? undefined : patch.sessionId || null;
          if (
            !contentChanged &&
            (patch.type === undefined || patch.type === before.type) &&
            (patch.key === undefined || patch.key === before.key) &&
            (patch.metadata === undefined || canonicalJson(patch.metadata) === canonicalJson(before.metadata)) &&
            (patch.expiresAt === undefined || patch.expiresAt === before.expiresAt) &&
            (sessionId === undefined || (sessionId ?? '') === before.sessionId)
          ) {
            untouched = before;
            return null;
          }
          this.repo.update(before.rowId, {
            type: patch.type,
            key: patch.key,
            content: patch.content,
            metadata: patch.metadata,
            expiresAt: patch.expiresAt,
            sessionId,
            contentHash: contentChanged ? hash : undefined,
            needsReindex: contentChanged ? true : undefined,
            updatedAt: nowIso(),
          });
          const after = this.repo.findByRowId(before.rowId)!;
          this.event('update', before, after, ctx);
          return { op: 'update', memory: after, contentChanged, reasserted: false };
        })
        .immediate();
    } catch (err) {
      if (isUniqueKeyViolation(err)) throw conflict('Another memory of this API key already uses that key', { field: 'key' });
      throw err;
    }
    if (!change) return untouched ? toPublic(untouched) : null;
    this.commit([change]);
    return toPublic(change.memory);
  }

  /** Deletes inside an open transaction: history row, vector hook, the row (FTS follows by trigger). */
  deleteInTx(id: string, ctx: ChangeContext, op: 'delete' | 'expire' | 'summarize' = 'delete'): MemoryChange | null {
    const before = this.repo.findById(id);
    if (!before) return null;
    this.event(op, before, null, ctx);
    for (const h of this.hooks) h.onDeleteInTx?.(before.rowId, before.id);
    this.repo.delete(before.rowId);
    return { op, memory: before, contentChanged: false, reasserted: false };
  }

  /** Deletes a memory; false when it did not exist. The text stays in the history. */
  delete(id: string, ctx: ChangeContext, op: 'delete' | 'expire' | 'summarize' = 'delete'): boolean {
    const change = this.db.transaction(() => this.deleteInTx(id, ctx, op)).immediate();
    if (!change) return false;
    this.commit([change]);
    return true;
  }

  /** Deletes several memories in one transaction; returns how many existed. */
  deleteMany(ids: string[], ctx: ChangeContext, op: 'delete' | 'expire' | 'summarize' = 'delete'): number {
    const changes = this.db
      .transaction(() => ids.map((id) => this.deleteInTx(id, ctx, op)).filter((c): c is MemoryChange => c !== null))
      .immediate();
    this.commit(changes);
    return changes.length;
  }

  /**
   * Runs `fn` in one immediate transaction (a throw rolls all of it back); the changes it reports
   * are announced to the hooks after commit. Summaries use it to write a summary and delete what it
   * covers atomically.
   */
  transaction<T>(fn: (report: (c: MemoryChange | null) => void) => T): { result: T; changes: MemoryChange[] } {
    let changes: MemoryChange[] = [];
    const result = this.db
      .transaction(() => {
        changes = [];
        return fn((c) => {
          if (c) changes.push(c);
        });
      })
      .immediate();
    this.commit(changes);
    return { result, changes };
  }

  /** Memories of a key created before the cutoff, oldest first (optionally one session; '' = no session). */
  createdBefore(apiKeyId: string, cutoffIso: string, sessionId?: string): MemoryRecord[] {
    return this.repo.createdBefore(apiKeyId, cutoffIso, sessionId);
  }

  /** API keys owning memories created before the cutoff. */
  ownersCreatedBefore(cutoffIso: string, sessionId?: string): string[] {
    return this.repo.ownersCreatedBefore(cutoffIso, sessionId);
  }

  /** API keys whose memories exceed `threshold` estimated tokens. */
  ownersOverTokens(threshold: number): { apiKeyId: string; tokens: number }[] {
    return this.repo.ownersOverTokens(threshold);
  }

  /** A key's memories (summaries excepted), the ones most worth keeping first. */
  byKeepPriority(apiKeyId: string): MemoryRecord[] {
    return this.repo.byKeepPriority(apiKeyId);
  }

  /**
   * Brings a deleted, summarised or expired memory back from its history: same id, same content,
   * type, key, session, metadata and creation time (a past expiry is cleared, or it would go again).
   * null when there is no history of it; 409 when it exists or its key is taken meanwhile.
   */
  restore(id: string, ctx: ChangeContext): Memory | null {
    let change: MemoryChange | null;
    try {
      change = this.db
        .transaction((): MemoryChange | null => {
          if (this.repo.findById(id)) throw conflict('The memory exists; only a deleted or summarised memory can be restored', { id });
          const last = [...this.repo.events(id)].reverse().find((e) => e.before !== null);
          if (!last?.before) return null;
          const m = last.before;
          const now = nowIso();
          const rowId = this.repo.insertFull({
            id: m.id,
            apiKeyId: m.apiKeyId,
            sessionId: m.sessionId || null,
            type: m.type,
            key: m.key || null,
            content: m.content,
            metadata: m.metadata,
            createdAt: m.createdAt,
            updatedAt: now,
            expiresAt: m.expiresAt !== null && m.expiresAt <= now ? null : m.expiresAt,
            contentHash: contentHash(m.content),
            accessCount: m.accessCount,
            lastAccessedAt: m.lastAccessedAt,
          });
          const after = this.repo.findByRowId(rowId)!;
          this.event('create', null, after, ctx);
          return { op: 'create', memory: after, contentChanged: true, reasserted: false };
        })
        .immediate();
    } catch (err) {
      if (isUniqueKeyViolation(err)) throw conflict('Another memory of this API key uses that key now', { field: 'key' });
      throw err;
    }
    if (!change) return null;
    this.commit([change]);
    return toPublic(change.memory);
  }

  /**
   * Imports one record inside an open transaction (in a savepoint of its own, so a bad record undoes
   * only itself): matched by id (same tenant only), else by (apiKeyId, key); an identical record
   * changes nothing; otherwise the row is created or brought to the record, history op `import`.
   */
  importInTx(rec: ImportRecord, ctx: ChangeContext): { outcome: 'created' | 'updated' | 'unchanged'; change: MemoryChange | null } {
    return this.db.transaction(() => {
      const byId = this.repo.findById(rec.id);
      // Also a deleted or summarised memory's id: taking it over would mix two tenants in one history and make restore 409.
      if ((byId && byId.apiKeyId !== rec.apiKeyId) || (!byId && this.repo.historyOfOtherKey(rec.id, rec.apiKeyId))) {
        throw new ImportRecordError('the id belongs to a memory of another API key');
      }
      const key = rec.key ? rec.key : null;
      const target = byId ?? (key ? this.repo.findByKey(rec.apiKeyId, key) : null);
      const hash = contentHash(rec.content);
      if (!target) {
        const rowId = this.repo.insertFull({
          id: rec.id,
          apiKeyId: rec.apiKeyId,
          sessionId: rec.sessionId || null,
          type: rec.type,
          key,
          content: rec.content,
          metadata: rec.metadata,
          createdAt: rec.createdAt,
          updatedAt: rec.updatedAt,
          expiresAt: rec.expiresAt,
          contentHash: hash,
          accessCount: rec.accessCount,
          lastAccessedAt: rec.lastAccessedAt,
        });
        const after = this.repo.findByRowId(rowId)!;
        this.event('import', null, after, ctx);
        return { outcome: 'created' as const, change: { op: 'import' as const, memory: after, contentChanged: true, reasserted: false } };
      }
      const same =
        hash === target.contentHash &&
        rec.type === target.type &&
        (key ?? '') === target.key &&
        (rec.sessionId || '') === target.sessionId &&
        rec.expiresAt === target.expiresAt &&
        canonicalJson(rec.metadata) === canonicalJson(target.metadata);
      if (same) return { outcome: 'unchanged' as const, change: null };
      const contentChanged = hash !== target.contentHash;
      this.repo.update(target.rowId, {
        content: rec.content,
        metadata: rec.metadata,
        sessionId: rec.sessionId || null,
        type: rec.type,
        key,
        expiresAt: rec.expiresAt,
        contentHash: hash,
        needsReindex: contentChanged ? true : undefined,
        updatedAt: rec.updatedAt > target.updatedAt ? rec.updatedAt : nowIso(),
      });
      const after = this.repo.findByRowId(target.rowId)!;
      this.event('import', target, after, ctx);
      return { outcome: 'updated' as const, change: { op: 'import' as const, memory: after, contentChanged, reasserted: false } };
    })();
  }

  /** Filtered, paginated listing with totals per type and the token footprint. */
  list(filter: ListFilter, limit: number, offset: number): ListResult {
    const byType = this.repo.countByType(filter);
    const total = Object.values(byType).reduce((a, b) => a + b, 0);
    const data = total > offset ? this.repo.list(filter, limit, offset).map(toPublic) : [];
    return { data, total, byType, tokensUsed: this.repo.tokensUsed(filter.apiKeyId) };
  }

  /**
   * Deletes up to `batchSize` memories past their expiry through the normal delete path (history,
   * vectors, cache); each row's expiry is re-checked inside the transaction, so a fact re-asserted
   * since it was found (new expiry or none) is kept. Returns how many were deleted.
   */
  /** The token footprint of exactly the rows a listing filter selects. */
  tokensUsedBy(filter: ListFilter): number {
    return this.repo.tokensUsedBy(filter);
  }

  expireBatch(nowIso: string, batchSize: number, ctx: ChangeContext): number {
    const changes = this.db
      .transaction(() =>
        this.repo
          .expiredIds(nowIso, batchSize)
          .map((id) => {
            const row = this.repo.findById(id);
            if (!row || row.expiresAt === null || row.expiresAt > nowIso) return null;
            return this.deleteInTx(id, ctx, 'expire');
          })
          .filter((c): c is MemoryChange => c !== null),
      )
      .immediate();
    this.commit(changes);
    return changes.length;
  }

  /**
   * Bumps access counters of injected memories (the record-access job; bookkeeping, no history row). With `claim` (the
   * job's claimOnce): null, and nothing written, when it says an earlier run already did.
   */
  recordAccess(ids: string[], nowIso: string, counts?: readonly number[], claim?: () => boolean): number | null {
    const n = this.repo.recordAccess(ids, nowIso, counts, claim);
    if (n === null) return null;
    for (const id of ids) this.cache.invalidate(id);
    return n;
  }

  history(id: string): MemoryEvent[] {
    return this.repo.events(id);
  }

  /**
   * Exercises the write path (insert + FTS trigger), the listing and the delete inside a
   * transaction that is rolled back: proves the store works and leaves nothing behind.
   */
  selfTest(): void {
    const rollback = new Error('rollback');
    try {
      this.db
        .transaction(() => {
          const probeKey = `__health__:${crypto.randomUUID()}`;
          const c = this.upsertInTx({ apiKeyId: '__engram_health__', type: 'factual', key: probeKey, content: 'pipeline verification test' }, { source: 'api' });
          const listed = this.repo.list({ apiKeyId: '__engram_health__', q: 'pipeline verification' }, 100, 0);
          if (!listed.some((r) => r.id === c.memory.id)) throw new Error('created memory not listed');
          const fts = this.db.prepare('SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?').all('"verification"') as { rowid: number }[];
          if (!fts.some((r) => r.rowid === c.memory.rowId)) throw new Error('created memory not in keyword index');
          if (!this.repo.delete(c.memory.rowId)) throw new Error('delete failed');
          throw rollback;
        })
        .immediate();
    } catch (err) {
      if (err !== rollback) throw err;
    }
  }
}
