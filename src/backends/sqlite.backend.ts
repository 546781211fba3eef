import type { MemoryService } from '../memory/memory.service';
import type { SettingsService } from '../memory/settings';
import type { Retriever } from '../memory/retrieval.types';
import type { ChangeContext, ListFilter, Memory, UpdateMemoryInput } from '../memory/types';
import type { BackendCreateInput, BackendHealth, BackendListResult, BackendSearch, MemoryBackend } from './types';

/** The local store (today's MemoryService + retrieval) as a backend: every change has its history row. */
export class SqliteBackend implements MemoryBackend {
  readonly id = 'sqlite';
  readonly displayName = 'SQLite (local)';

  constructor(
    private readonly memory: MemoryService,
    private readonly settings: SettingsService,
    private readonly retriever: () => Retriever | null,
  ) {}

  async create(input: BackendCreateInput, ctx: ChangeContext): Promise<{ memory: Memory; created: boolean }> {
    // A fallback copy keeps the primary's id when it is a UUID (so get/update/delete by id reach it); upsert by (apiKeyId, key) as always.
    return this.memory.create(input, ctx);
  }

  async get(id: string): Promise<Memory | null> {
    return this.memory.get(id);
  }

  async update(id: string, patch: UpdateMemoryInput, ctx: ChangeContext): Promise<Memory | null> {
    return this.memory.update(id, patch, ctx);
  }

  async delete(id: string, ctx: ChangeContext): Promise<boolean> {
    return this.memory.delete(id, ctx);
  }

  async list(filter: ListFilter, limit: number, offset: number): Promise<BackendListResult> {
    const r = this.memory.list(filter, limit, offset);
    return { data: r.data, total: r.total, byType: r.byType };
  }

  async search(q: BackendSearch): Promise<Memory[]> {
    const retriever = this.retriever();
    if (!retriever) throw new Error('search is not available in this process (no retrieval service)');
    const r = await retriever.retrieve(q.apiKeyId, {
      query: q.query,
      strategy: q.strategy ?? 'hybrid',
      maxTokens: q.maxTokens ?? 2000,
      retentionDays: q.retentionDays ?? this.settings.memory().retentionDays,
      scope: 'apiKey',
    });
    const out = r.items.map((it) => it.memory);
    return q.limit ? out.slice(0, q.limit) : out;
  }

  async health(): Promise<BackendHealth> {
    const started = performance.now();
    try {
      this.memory.selfTest();
      return { ok: true, latencyMs: Math.round((performance.now() - started) * 100) / 100 };
    } catch {
      return { ok: false, latencyMs: Math.round(performance.now() - started), error: 'memory store self-test failed' };
    }
  }
}
