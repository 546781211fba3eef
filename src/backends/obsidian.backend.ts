import crypto from 'node:crypto';
import YAML from 'yaml';
import { z } from 'zod';
import type { ChangeContext, ListFilter, Memory, UpdateMemoryInput } from '../memory/types';
import type { OutboundPolicy } from '../net/url-policy';
import { backendBaseUrl, backendFetch, jsonOf, statusError, type OutboundResponse } from './outbound';
import { safeFileSegment } from './safe-name';
import { BackendError, countByType, matchesFilter, parseRemoteMemory, type BackendCreateInput, type BackendHealth, type BackendListResult, type BackendSearch, type MemoryBackend } from './types';

/** backendConfigs.obsidian: the Local REST API plugin's address and key, and the vault folder for memories. */
export const obsidianConfigSchema = z.strictObject({
  type: z.literal('obsidian').default('obsidian'),
  displayName: z.string().max(100).optional(),
  baseUrl: z.string().min(1).max(2048).default('http://127.0.0.1:27123'),
  apiKey: z.string().min(1).max(4096),
  folder: z
    .string()
    .max(200)
    .default('Engram')
    .transform((f) => f.split('/').filter((p) => p !== '' && p !== '.' && p !== '..').map((p) => safeFileSegment(p, 'Engram')).join('/') || 'Engram'),
  timeoutMs: z.number().int().min(100).max(120_000).default(10_000),
  maxResponseBytes: z.number().int().min(1024).max(64 * 1_048_576).default(4 * 1_048_576),
});
export type ObsidianConfigInput = z.input<typeof obsidianConfigSchema>;

const searchHits = z.array(z.object({ filename: z.string() }).loose());
const FM_PREFIX = 'engram_';

/**
 * Memories as notes of an Obsidian vault through the Local REST API plugin: one Markdown file per
 * memory at `<folder>/<tenant>/<key>.md` (both segments made safe: a key such as `../../x` cannot
 * leave the folder), its fields in YAML front-matter, looked up by id with the plugin's JsonLogic search.
 */
export class ObsidianBackend implements MemoryBackend {
  readonly displayName: string;
  private readonly base: URL;
  private readonly cfg: z.output<typeof obsidianConfigSchema>;

  constructor(
    readonly id: string,
    config: unknown,
    private readonly policy: OutboundPolicy,
  ) {
    this.cfg = obsidianConfigSchema.parse(config);
    this.displayName = this.cfg.displayName ?? 'Obsidian (Local REST API)';
    this.base = backendBaseUrl(this.cfg.baseUrl, policy);
  }

  /** The vault path of a memory's note. */
  notePath(apiKeyId: string, key: string, id: string): string {
    return `${this.cfg.folder}/${safeFileSegment(apiKeyId, 'default')}/${safeFileSegment(key || id)}.md`;
  }

  private async call(method: string, path: string, opts: { body?: string; contentType?: string; accept?: string; query?: Record<string, string> } = {}): Promise<OutboundResponse> {
    const url = new URL(path, this.base);
    for (const [k, v] of Object.entries(opts.query ?? {})) url.searchParams.set(k, v);
    const headers: Record<string, string> = { authorization: `Bearer ${this.cfg.apiKey}`, accept: opts.accept ?? 'application/json' };
    if (opts.contentType) headers['content-type'] = opts.contentType;
    return backendFetch(this.id, { method, url, headers, body: opts.body, timeoutMs: this.cfg.timeoutMs, maxResponseBytes: this.cfg.maxResponseBytes }, this.policy);
  }

  private vaultUrl(path: string): string {
    return `vault/${path.split('/').map(encodeURIComponent).join('/')}`;
  }

  private ok(r: OutboundResponse): OutboundResponse {
    if (r.status < 200 || r.status >= 300) throw statusError(this.id, r);
    return r;
  }

  private render(m: Memory): string {
    const fm: Record<string, unknown> = {
      [`${FM_PREFIX}id`]: m.id,
      [`${FM_PREFIX}apiKeyId`]: m.apiKeyId,
      [`${FM_PREFIX}sessionId`]: m.sessionId,
      [`${FM_PREFIX}type`]: m.type,
      [`${FM_PREFIX}key`]: m.key,
      [`${FM_PREFIX}createdAt`]: m.createdAt,
      [`${FM_PREFIX}updatedAt`]: m.updatedAt,
      [`${FM_PREFIX}expiresAt`]: m.expiresAt,
      [`${FM_PREFIX}metadata`]: JSON.stringify(m.metadata),
    };
    return `---\n${YAML.stringify(fm)}---\n${m.content}\n`;
  }

  private parse(text: string): Memory {
    const m = /^---\r?\n([\s\S]*?)\r?\n---\r?\n?([\s\S]*)$/.exec(text);
    if (!m) throw new BackendError(`backend ${this.id}: a note without Engram front-matter`);
    let fm: Record<string, unknown>;
    try {
      fm = (YAML.parse(m[1]) ?? {}) as Record<string, unknown>;
    } catch {
      throw new BackendError(`backend ${this.id}: a note with unreadable front-matter`);
    }
    const g = (k: string) => fm[`${FM_PREFIX}${k}`];
    let metadata: unknown = {};
    try {
      metadata = typeof g('metadata') === 'string' ? JSON.parse(g('metadata') as string) : {};
    } catch {
      metadata = {};
    }
    return parseRemoteMemory(this.id, {
      id: g('id'),
      apiKeyId: g('apiKeyId'),
      sessionId: g('sessionId'),
      type: g('type'),
      key: g('key'),
      content: m[2].replace(/\n$/, ''),
      metadata,
      createdAt: g('createdAt'),
      updatedAt: g('updatedAt'),
      expiresAt: g('expiresAt'),
    });
  }

  private async read(path: string): Promise<Memory | null> {
    const r = await this.call('GET', this.vaultUrl(path), { accept: 'text/markdown' });
    if (r.status === 404) return null;
    return this.parse(this.ok(r).text);
  }

  private async write(path: string, m: Memory): Promise<void> {
    this.ok(await this.call('PUT', this.vaultUrl(path), { body: this.render(m), contentType: 'text/markdown' }));
  }

  /** Engram notes whose front-matter matches every field given (the plugin's JsonLogic search). */
  private async find(fields: Record<string, string>): Promise<string[]> {
    const clauses: unknown[] = [
      { '!=': [{ var: `frontmatter.${FM_PREFIX}id` }, null] },
      ...Object.entries(fields).map(([k, v]) => ({ '==': [{ var: `frontmatter.${FM_PREFIX}${k}` }, v] })),
    ];
    const logic = { and: clauses };
    const r = this.ok(await this.call('POST', 'search/', { body: JSON.stringify(logic), contentType: 'application/vnd.olrapi.jsonlogic+json' }));
    const hits = searchHits.safeParse(jsonOf(this.id, r));
    if (!hits.success) throw new BackendError(`backend ${this.id}: the search answer is not a list of files`);
    const prefix = `${this.cfg.folder}/`;
    return hits.data.map((h) => h.filename).filter((f) => f.startsWith(prefix) && f.endsWith('.md')).sort();
  }

  private async locate(id: string): Promise<{ path: string; memory: Memory } | null> {
    for (const path of await this.find({ id })) {
      const m = await this.read(path);
      if (m && m.id === id) return { path, memory: m };
    }
    return null;
  }

  async create(input: BackendCreateInput, _ctx: ChangeContext): Promise<{ memory: Memory; created: boolean }> {
    const now = new Date().toISOString();
    const path = this.notePath(input.apiKeyId, input.key ?? '', input.id ?? '');
    const existing = input.key ? await this.read(path) : null;
    if (existing && existing.apiKeyId === input.apiKeyId && existing.key === input.key) {
      // Upsert by (apiKeyId, key), as the local store: id and createdAt kept, metadata merged.
      const m: Memory = {
        ...existing,
        type: input.type,
        content: input.content,
        sessionId: input.sessionId === undefined ? existing.sessionId : (input.sessionId ?? ''),
        metadata: { ...existing.metadata, ...(input.metadata ?? {}) },
        expiresAt: input.expiresAt === undefined ? existing.expiresAt : input.expiresAt,
        updatedAt: now,
      };
      await this.write(path, m);
      return { memory: m, created: false };
    }
    const id = input.id ?? crypto.randomUUID();
    const m: Memory = {
      id,
      apiKeyId: input.apiKeyId,
      sessionId: input.sessionId ?? '',
      type: input.type,
      key: input.key ?? '',
      content: input.content,
      metadata: input.metadata ?? {},
      createdAt: now,
      updatedAt: now,
      expiresAt: input.expiresAt ?? null,
      accessCount: 0,
      lastAccessedAt: null,
    };
    await this.write(input.key ? path : this.notePath(input.apiKeyId, '', id), m);
    return { memory: m, created: true };
  }

  async get(id: string): Promise<Memory | null> {
    return (await this.locate(id))?.memory ?? null;
  }

  async update(id: string, patch: UpdateMemoryInput, _ctx: ChangeContext): Promise<Memory | null> {
    const found = await this.locate(id);
    if (!found) return null;
    const b = found.memory;
    const m: Memory = {
      ...b,
      type: patch.type ?? b.type,
      key: patch.key ?? b.key,
      content: patch.content ?? b.content,
      metadata: patch.metadata ?? b.metadata,
      expiresAt: patch.expiresAt === undefined ? b.expiresAt : patch.expiresAt,
      sessionId: patch.sessionId === undefined ? b.sessionId : (patch.sessionId ?? ''),
      updatedAt: new Date().toISOString(),
    };
    const path = this.notePath(m.apiKeyId, m.key, m.id);
    await this.write(path, m);
    if (path !== found.path) {
      const r = await this.call('DELETE', this.vaultUrl(found.path));
      if (r.status !== 404) this.ok(r);
    }
    return m;
  }

  async delete(id: string, _ctx: ChangeContext): Promise<boolean> {
    const found = await this.locate(id);
    if (!found) return false;
    const r = await this.call('DELETE', this.vaultUrl(found.path));
    if (r.status === 404) return false;
    this.ok(r);
    return true;
  }

  async list(filter: ListFilter, limit: number, offset: number): Promise<BackendListResult> {
    const fields: Record<string, string> = {};
    if (filter.apiKeyId !== undefined) fields.apiKeyId = filter.apiKeyId;
    if (filter.type !== undefined) fields.type = filter.type;
    if (filter.sessionId !== undefined) fields.sessionId = filter.sessionId;
    const paths = await this.find(fields);
    if (!filter.q) {
      const data = (await Promise.all(paths.slice(offset, offset + limit).map((p) => this.read(p)))).filter((m): m is Memory => m !== null);
      const all = paths.length;
      return { data, total: all, byType: filter.type ? { [filter.type]: all } : countByType(data) };
    }
    const all = (await Promise.all(paths.map((p) => this.read(p)))).filter((m): m is Memory => m !== null && matchesFilter(m, filter));
    return { data: all.slice(offset, offset + limit), total: all.length, byType: countByType(all) };
  }

  async search(q: BackendSearch): Promise<Memory[]> {
    const r = this.ok(await this.call('POST', 'search/simple/', { query: { query: q.query, contextLength: '0' } }));
    const hits = searchHits.safeParse(jsonOf(this.id, r));
    if (!hits.success) throw new BackendError(`backend ${this.id}: the search answer is not a list of files`);
    const prefix = `${this.cfg.folder}/${safeFileSegment(q.apiKeyId, 'default')}/`;
    const paths = hits.data.map((h) => h.filename).filter((f) => f.startsWith(prefix));
    const limit = q.limit ?? 20;
    const out: Memory[] = [];
    for (const p of paths) {
      if (out.length >= limit) break;
      const m = await this.read(p);
      if (m && m.apiKeyId === q.apiKeyId) out.push(m);
    }
    return out;
  }

  async health(): Promise<BackendHealth> {
    const started = performance.now();
    try {
      const body = jsonOf(this.id, this.ok(await this.call('GET', '')));
      const authenticated = (body as { authenticated?: unknown } | undefined)?.authenticated;
      if (authenticated === false) return { ok: false, latencyMs: Math.round(performance.now() - started), error: 'the Local REST API did not accept the API key' };
      return { ok: true, latencyMs: Math.round(performance.now() - started) };
    } catch (err) {
      return { ok: false, latencyMs: Math.round(performance.now() - started), error: (err as Error).message };
    }
  }
}
