import { AppError, unavailable } from '../errors';
import type { Logger } from '../logger';
import type { MemoryChange, MemoryService } from '../memory/memory.service';
import type { Retriever } from '../memory/retrieval.types';
import type { MemorySettings, SettingsService } from '../memory/settings';
import type { ChangeContext, ListFilter, Memory, UpdateMemoryInput } from '../memory/types';
import type { OutboundPolicy } from '../net/url-policy';
import type { QueueLayer } from '../queue/queues';
import { buildBackend, checkBackendSettings } from './factory';
import { SqliteBackend } from './sqlite.backend';
import type { BackendCreateInput, BackendHealth, BackendListResult, BackendSearch, MemoryBackend } from './types';

export interface BackendManagerDeps {
  memory: MemoryService;
  settings: SettingsService;
  queues: Pick<QueueLayer, 'enqueueAfterCommit'>;
  policy: OutboundPolicy;
  log: Logger;
}

interface Routing {
  signature: string;
  primary: MemoryBackend;
  fallbacks: MemoryBackend[];
  /** Why the configured primary could not be built (requests then answer 503), or null. */
  primaryError: string | null;
}

export interface SyncResult {
  backendId: string;
  memoryId: string;
  action: 'created' | 'updated' | 'deleted' | 'absent' | 'skipped';
}

/**
 * The original's MemoryManager (digest §8.1), built from the settings `memoryPrimaryBackend`,
 * `memoryFallbackBackends` and `memoryBackendConfigs` (rebuilt when they change). Routing: create
 * and list → primary; get → primary, then fallbacks until one has it; update/delete → primary, and
 * every fallback is brought up to date by a retried `backend-sync` job (never fire-and-forget);
 * search → fallbacks in order only when the primary throws.
 */
export class BackendManager {
  readonly sqlite: SqliteBackend;
  private routing: Routing | null = null;
  private retriever: Retriever | null = null;
  /** backend-sync enqueues of committed local changes still running (shutdown waits for them before the queues and the store close). */
  private readonly pending = new Set<Promise<void>>();

  constructor(private readonly d: BackendManagerDeps) {
    this.sqlite = new SqliteBackend(d.memory, d.settings, () => this.retriever);
    // Every committed change of the local store (API, MCP, extraction, expiry) reaches the fallbacks while SQLite is primary.
    d.memory.addHooks({ afterCommit: (changes) => this.localChanges(changes) });
  }

  /** The retrieval the SQLite backend searches with (the api process has one; workers do not search). */
  useRetriever(r: Retriever): void {
    this.retriever = r;
  }

  private current(): Routing {
    const s = this.d.settings.memory();
    const signature = JSON.stringify([s.primaryBackend, s.fallbackBackends, s.backendConfigs]);
    if (this.routing?.signature === signature) return this.routing;
    const old = this.routing;
    this.routing = this.build(s, signature);
    if (old) for (const b of [old.primary, ...old.fallbacks]) if (b !== this.sqlite) void b.shutdown?.().catch(() => undefined);
    return this.routing;
  }

  private make(id: string, s: MemorySettings): MemoryBackend {
    if (id === 'sqlite') return this.sqlite;
    return buildBackend(id, s.backendConfigs[id], this.d.policy);
  }

  private build(s: MemorySettings, signature: string): Routing {
    let primary: MemoryBackend = this.sqlite;
    let primaryError: string | null = null;
    try {
      primary = this.make(s.primaryBackend, s);
    } catch (err) {
      primaryError = `memory backend "${s.primaryBackend}" is not usable: ${(err as Error).message}`;
      this.d.log.error({ backend: s.primaryBackend, err: { message: (err as Error).message } }, 'primary memory backend is misconfigured');
    }
    const fallbacks: MemoryBackend[] = [];
    for (const id of s.fallbackBackends) {
      if (id === s.primaryBackend || fallbacks.some((f) => f.id === id)) continue;
      try {
        fallbacks.push(this.make(id, s));
      } catch (err) {
        this.d.log.warn({ backend: id, err: { message: (err as Error).message } }, 'fallback memory backend is misconfigured; skipped');
      }
    }
    return { signature, primary, fallbacks, primaryError };
  }

  private primary(): MemoryBackend {
    const r = this.current();
    if (r.primaryError) throw unavailable(r.primaryError);
    return r.primary;
  }

  /** Runs one call on the primary; a remote backend's failure is a dependency failure (503), not a bug. */
  private async onPrimary<T>(fn: (b: MemoryBackend) => Promise<T>): Promise<T> {
    const b = this.primary();
    if (b === this.sqlite) return fn(b);
    try {
      return await fn(b);
    } catch (err) {
      if (err instanceof AppError) throw err;
      throw unavailable(`memory backend "${b.id}" failed: ${(err as Error).message}`);
    }
  }

  /** Problems with backend settings before they are stored (`{path, message}`; empty when usable). */
  check(s: Pick<MemorySettings, 'primaryBackend' | 'fallbackBackends' | 'backendConfigs'>): { path: string; message: string }[] {
    return checkBackendSettings(s, this.d.policy);
  }

  /** Ids of the primary and the fallbacks in use now. */
  describe(): { primary: string; fallbacks: string[]; primaryError: string | null } {
    const r = this.current();
    return { primary: r.primary.id, fallbacks: r.fallbacks.map((f) => f.id), primaryError: r.primaryError };
  }

  /** A configured backend by id (the primary or a fallback), or null. */
  backend(id: string): MemoryBackend | null {
    const r = this.current();
    return [r.primary, ...r.fallbacks].find((b) => b.id === id) ?? null;
  }

  /** Whether the local store is the primary (retrieval for injection is local in any case). */
  primaryIsLocal(): boolean {
    return this.current().primary === this.sqlite;
  }

  private async syncFallbacks(memoryIds: string[]): Promise<void> {
    const r = this.current();
    // The local store's hook enqueues its own changes; a remote primary's are enqueued here.
    if (r.primary === this.sqlite || r.fallbacks.length === 0) return;
    await this.enqueueSyncs(r.fallbacks, memoryIds);
  }

  private async enqueueSyncs(fallbacks: MemoryBackend[], memoryIds: string[]): Promise<void> {
    // The change is committed: its syncs go to Redis or, when it cannot take them, to the outbox (never dropped).
    for (const f of fallbacks) for (const memoryId of memoryIds) await this.d.queues.enqueueAfterCommit('backend-sync', { backendId: f.id, memoryId });
  }

  private localChanges(changes: MemoryChange[]): void {
    let r: Routing;
    try {
      r = this.current();
    } catch {
      return;
    }
    if (r.primary !== this.sqlite || r.fallbacks.length === 0) return;
    const p: Promise<void> = this.enqueueSyncs(
      r.fallbacks,
      changes.map((c) => c.memory.id),
    )
      .catch((err) => this.d.log.warn({ err: { message: (err as Error).message } }, 'could not enqueue backend-sync'))
      .finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  async create(input: BackendCreateInput, ctx: ChangeContext): Promise<{ memory: Memory; created: boolean }> {
    const out = await this.onPrimary((b) => b.create(input, ctx));
    await this.syncFallbacks([out.memory.id]);
    return out;
  }

  async get(id: string): Promise<Memory | null> {
    const r = this.current();
    let firstError: unknown = null;
    for (const b of r.primaryError ? r.fallbacks : [r.primary, ...r.fallbacks]) {
      try {
        const m = await b.get(id);
        if (m) return m;
      } catch (err) {
        firstError ??= err;
        this.d.log.warn({ backend: b.id, err: { message: (err as Error).message } }, 'memory backend get failed; trying the next');
      }
    }
    if (firstError) throw unavailable(`no memory backend could answer: ${(firstError as Error).message}`);
    return null;
  }

  async update(id: string, patch: UpdateMemoryInput, ctx: ChangeContext): Promise<Memory | null> {
    const m = await this.onPrimary((b) => b.update(id, patch, ctx));
    if (m) await this.syncFallbacks([id]);
    return m;
  }

  async delete(id: string, ctx: ChangeContext): Promise<boolean> {
    const ok = await this.onPrimary((b) => b.delete(id, ctx));
    if (ok) await this.syncFallbacks([id]);
    return ok;
  }

  /**
   * Deletes many (MCP clear): one transaction per chunk on the local store (history row per memory),
   * one call each on a remote primary. Returns how many existed.
   */
  async deleteMany(ids: string[], ctx: ChangeContext): Promise<number> {
    const primary = this.primary();
    let n = 0;
    if (primary === this.sqlite) {
      for (let i = 0; i < ids.length; i += 200) n += this.d.memory.deleteMany(ids.slice(i, i + 200), ctx);
      return n;
    }
    for (const id of ids) if (await this.onPrimary((b) => b.delete(id, ctx))) n++;
    await this.syncFallbacks(ids);
    return n;
  }

  async list(filter: ListFilter, limit: number, offset: number): Promise<BackendListResult> {
    return this.onPrimary((b) => b.list(filter, limit, offset));
  }

  /** Primary search; the fallbacks in order only when it throws (an empty answer is an answer). */
  async search(q: BackendSearch): Promise<{ memories: Memory[]; backend: string }> {
    const r = this.current();
    const order = r.primaryError ? r.fallbacks : [r.primary, ...r.fallbacks];
    let lastError: unknown = r.primaryError ? new Error(r.primaryError) : null;
    for (const b of order) {
      try {
        return { memories: await b.search(q), backend: b.id };
      } catch (err) {
        lastError = err;
        this.d.log.warn({ backend: b.id, err: { message: (err as Error).message } }, 'memory backend search failed; trying the next');
      }
    }
    throw unavailable(`every memory backend failed to search: ${(lastError as Error | null)?.message ?? 'none configured'}`);
  }

  /** Health of every configured backend. */
  async healthAll(): Promise<Record<string, BackendHealth & { role: 'primary' | 'fallback' }>> {
    const r = this.current();
    const out: Record<string, BackendHealth & { role: 'primary' | 'fallback' }> = {};
    if (r.primaryError) out[this.d.settings.memory().primaryBackend] = { role: 'primary', ok: false, latencyMs: 0, error: r.primaryError };
    const all = r.primaryError ? r.fallbacks : [r.primary, ...r.fallbacks];
    const results = await Promise.all(all.map((b) => b.health().catch((err: Error) => ({ ok: false, latencyMs: 0, error: err.message }))));
    all.forEach((b, i) => (out[b.id] = { role: b === r.primary && !r.primaryError ? 'primary' : 'fallback', ...results[i] }));
    return out;
  }

  /**
   * The `backend-sync` job: brings one fallback's copy of one memory to the primary's current state
   * (created, updated or deleted). Reading the current state makes it idempotent and order-free:
   * a retry or a late job converges on the same result. Throws (so BullMQ retries) when either side fails.
   */
  async syncFallback(backendId: string, memoryId: string): Promise<SyncResult> {
    const r = this.current();
    const target = r.fallbacks.find((f) => f.id === backendId);
    if (!target) return { backendId, memoryId, action: 'skipped' };
    const state = await this.primary().get(memoryId);
    const ctx: ChangeContext = { source: 'api' };
    if (!state) {
      const gone = await target.delete(memoryId, ctx);
      return { backendId, memoryId, action: gone ? 'deleted' : 'absent' };
    }
    const existing = await target.get(memoryId);
    const fields = { type: state.type, key: state.key, content: state.content, metadata: state.metadata, expiresAt: state.expiresAt, sessionId: state.sessionId };
    if (existing) {
      await target.update(memoryId, fields, ctx);
      return { backendId, memoryId, action: 'updated' };
    }
    await target.create({ ...fields, id: state.id, apiKeyId: state.apiKeyId }, ctx);
    return { backendId, memoryId, action: 'created' };
  }

  async shutdown(): Promise<void> {
    // The syncs of changes already committed go to Redis or the outbox before the caller closes them.
    while (this.pending.size > 0) await Promise.all([...this.pending]);
    const r = this.routing;
    this.routing = null;
    if (r) await Promise.all([r.primary, ...r.fallbacks].filter((b) => b !== this.sqlite).map((b) => b.shutdown?.().catch(() => undefined)));
    await this.d.policy.close();
  }
}
