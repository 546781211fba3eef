import crypto from 'node:crypto';
import { z } from 'zod';
import type { ChangeContext, ListFilter, Memory, UpdateMemoryInput } from '../memory/types';
import type { OutboundPolicy } from '../net/url-policy';
import { backendBaseUrl, backendFetch, jsonOf, statusError, type OutboundResponse } from './outbound';
import { BackendError, countByType, matchesFilter, parseRemoteMemory, type BackendCreateInput, type BackendHealth, type BackendListResult, type BackendSearch, type MemoryBackend } from './types';

/** backendConfigs.notion: an integration token and the database that holds the memories (its properties: see README). */
export const notionConfigSchema = z.strictObject({
  type: z.literal('notion').default('notion'),
  displayName: z.string().max(100).optional(),
  baseUrl: z.string().min(1).max(2048).default('https://api.notion.com'),
  apiKey: z.string().min(1).max(4096),
  databaseId: z.string().regex(/^[A-Za-z0-9-]{8,64}$/, 'expected a Notion database id'),
  notionVersion: z.string().regex(/^\d{4}-\d{2}-\d{2}$/).default('2022-06-28'),
  timeoutMs: z.number().int().min(100).max(120_000).default(10_000),
  maxResponseBytes: z.number().int().min(1024).max(64 * 1_048_576).default(4 * 1_048_576),
});

/** Notion's limit per rich-text object, and how many objects one property may hold. */
const RICH_TEXT_CHUNK = 2000;
const RICH_TEXT_MAX_PARTS = 100;
/** Listing reads at most this many pages of 100 results. */
const MAX_QUERY_PAGES = 50;

const richText = (s: string) => {
  const parts: { type: 'text'; text: { content: string } }[] = [];
  for (let i = 0; i < s.length && parts.length < RICH_TEXT_MAX_PARTS; i += RICH_TEXT_CHUNK) parts.push({ type: 'text', text: { content: s.slice(i, i + RICH_TEXT_CHUNK) } });
  return { rich_text: parts };
};
const plain = (prop: unknown): string => {
  const p = prop as { rich_text?: { plain_text?: string; text?: { content?: string } }[]; title?: { plain_text?: string; text?: { content?: string } }[] } | undefined;
  return (p?.rich_text ?? p?.title ?? []).map((t) => t.plain_text ?? t.text?.content ?? '').join('');
};

const page = z.object({ id: z.string(), created_time: z.string().optional(), last_edited_time: z.string().optional(), archived: z.boolean().optional(), properties: z.record(z.string(), z.unknown()) }).loose();
const queryAnswer = z.object({ results: z.array(page), has_more: z.boolean().default(false), next_cursor: z.string().nullable().default(null) }).loose();

/**
 * Memories as pages of a Notion database, spoken to with Notion's own API (pages, database query,
 * archive for delete) — not the generic `/memories` protocol the original's preset pointed at.
 * Properties: Name (title) = key, Content, MemoryId, ApiKeyId, SessionId, Metadata, ExpiresAt (rich text), Type (select).
 */
export class NotionBackend implements MemoryBackend {
  readonly displayName: string;
  private readonly base: URL;
  private readonly cfg: z.output<typeof notionConfigSchema>;

  constructor(
    readonly id: string,
    config: unknown,
    private readonly policy: OutboundPolicy,
  ) {
    this.cfg = notionConfigSchema.parse(config);
    this.displayName = this.cfg.displayName ?? 'Notion';
    this.base = backendBaseUrl(this.cfg.baseUrl, policy);
  }

  private async call(method: string, path: string, body?: unknown): Promise<OutboundResponse> {
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.cfg.apiKey}`,
      'notion-version': this.cfg.notionVersion,
      accept: 'application/json',
    };
    if (body !== undefined) headers['content-type'] = 'application/json';
    return backendFetch(
      this.id,
      { method, url: new URL(path, this.base), headers, body: body === undefined ? undefined : JSON.stringify(body), timeoutMs: this.cfg.timeoutMs, maxResponseBytes: this.cfg.maxResponseBytes },
      this.policy,
    );
  }

  private ok(r: OutboundResponse): OutboundResponse {
    if (r.status < 200 || r.status >= 300) throw statusError(this.id, r);
    return r;
  }

  private toMemory(p: z.infer<typeof page>): Memory {
    const props = p.properties;
    let metadata: unknown = {};
    try {
      metadata = JSON.parse(plain(props.Metadata) || '{}');
    } catch {
      metadata = {};
    }
    const type = (props.Type as { select?: { name?: string } | null } | undefined)?.select?.name;
    return parseRemoteMemory(this.id, {
      id: plain(props.MemoryId) || p.id,
      apiKeyId: plain(props.ApiKeyId),
      sessionId: plain(props.SessionId),
      type,
      key: plain(props.Name),
      content: plain(props.Content),
      metadata,
      createdAt: p.created_time,
      updatedAt: p.last_edited_time,
      expiresAt: plain(props.ExpiresAt) || null,
    });
  }

  private properties(m: { id?: string; apiKeyId?: string; sessionId?: string; type?: string; key?: string; content?: string; metadata?: Record<string, unknown>; expiresAt?: string | null }) {
    const out: Record<string, unknown> = {};
    if (m.key !== undefined) out.Name = { title: richText(m.key).rich_text };
    if (m.content !== undefined) out.Content = richText(m.content);
    if (m.id !== undefined) out.MemoryId = richText(m.id);
    if (m.apiKeyId !== undefined) out.ApiKeyId = richText(m.apiKeyId);
    if (m.sessionId !== undefined) out.SessionId = richText(m.sessionId);
    if (m.metadata !== undefined) out.Metadata = richText(JSON.stringify(m.metadata));
    if (m.expiresAt !== undefined) out.ExpiresAt = richText(m.expiresAt ?? '');
    if (m.type !== undefined) out.Type = { select: { name: m.type } };
    return out;
  }

  private async query(filter: unknown, max: number): Promise<z.infer<typeof page>[]> {
    const out: z.infer<typeof page>[] = [];
    let cursor: string | null = null;
    for (let i = 0; i < MAX_QUERY_PAGES && out.length < max; i++) {
      const body: Record<string, unknown> = { filter, page_size: Math.min(100, max - out.length) };
      if (cursor) body.start_cursor = cursor;
      const r = this.ok(await this.call('POST', `v1/databases/${encodeURIComponent(this.cfg.databaseId)}/query`, body));
      const parsed = queryAnswer.safeParse(jsonOf(this.id, r));
      if (!parsed.success) throw new BackendError(`backend ${this.id}: the database query answer is not a list of pages`);
      out.push(...parsed.data.results.filter((p) => !p.archived));
      if (!parsed.data.has_more || !parsed.data.next_cursor) break;
      cursor = parsed.data.next_cursor;
    }
    return out;
  }

  private eq(property: string, value: string) {
    return property === 'Type' ? { property, select: { equals: value } } : property === 'Name' ? { property, title: { equals: value } } : { property, rich_text: { equals: value } };
  }

  private async findPage(id: string): Promise<z.infer<typeof page> | null> {
    const [p] = await this.query(this.eq('MemoryId', id), 1);
    return p ?? null;
  }

  async create(input: BackendCreateInput, _ctx: ChangeContext): Promise<{ memory: Memory; created: boolean }> {
    if (input.key) {
      const [existing] = await this.query({ and: [this.eq('ApiKeyId', input.apiKeyId), this.eq('Name', input.key)] }, 1);
      if (existing) {
        const before = this.toMemory(existing);
        const props = this.properties({
          content: input.content,
          type: input.type,
          sessionId: input.sessionId === undefined ? undefined : (input.sessionId ?? ''),
          metadata: { ...before.metadata, ...(input.metadata ?? {}) },
          expiresAt: input.expiresAt,
        });
        const r = this.ok(await this.call('PATCH', `v1/pages/${encodeURIComponent(existing.id)}`, { properties: props }));
        return { memory: this.toMemory(page.parse(jsonOf(this.id, r))), created: false };
      }
    }
    const props = this.properties({
      id: input.id ?? crypto.randomUUID(),
      apiKeyId: input.apiKeyId,
      sessionId: input.sessionId ?? '',
      type: input.type,
      key: input.key ?? '',
      content: input.content,
      metadata: input.metadata ?? {},
      expiresAt: input.expiresAt ?? null,
    });
    const r = this.ok(await this.call('POST', 'v1/pages', { parent: { database_id: this.cfg.databaseId }, properties: props }));
    const parsed = page.safeParse(jsonOf(this.id, r));
    if (!parsed.success) throw new BackendError(`backend ${this.id}: the created page is not a page`);
    return { memory: this.toMemory(parsed.data), created: true };
  }

  async get(id: string): Promise<Memory | null> {
    const p = await this.findPage(id);
    return p ? this.toMemory(p) : null;
  }

  async update(id: string, patch: UpdateMemoryInput, _ctx: ChangeContext): Promise<Memory | null> {
    const p = await this.findPage(id);
    if (!p) return null;
    const props = this.properties({
      key: patch.key,
      content: patch.content,
      type: patch.type,
      metadata: patch.metadata,
      expiresAt: patch.expiresAt,
      sessionId: patch.sessionId === undefined ? undefined : (patch.sessionId ?? ''),
    });
    const r = await this.call('PATCH', `v1/pages/${encodeURIComponent(p.id)}`, { properties: props });
    if (r.status === 404) return null;
    return this.toMemory(page.parse(jsonOf(this.id, this.ok(r))));
  }

  async delete(id: string, _ctx: ChangeContext): Promise<boolean> {
    const p = await this.findPage(id);
    if (!p) return false;
    // Notion deletes by archiving (the page goes to the trash).
    const r = await this.call('PATCH', `v1/pages/${encodeURIComponent(p.id)}`, { archived: true });
    if (r.status === 404) return false;
    this.ok(r);
    return true;
  }

  async list(filter: ListFilter, limit: number, offset: number): Promise<BackendListResult> {
    const clauses: unknown[] = [];
    if (filter.apiKeyId !== undefined) clauses.push(this.eq('ApiKeyId', filter.apiKeyId));
    if (filter.type !== undefined) clauses.push(this.eq('Type', filter.type));
    if (filter.sessionId !== undefined) clauses.push(this.eq('SessionId', filter.sessionId));
    if (filter.q) clauses.push({ or: [{ property: 'Content', rich_text: { contains: filter.q } }, { property: 'Name', title: { contains: filter.q } }] });
    const pages = await this.query(clauses.length === 0 ? { property: 'MemoryId', rich_text: { is_not_empty: true } } : clauses.length === 1 ? clauses[0] : { and: clauses }, MAX_QUERY_PAGES * 100);
    const all = pages.map((p) => this.toMemory(p)).filter((m) => matchesFilter(m, filter));
    return { data: all.slice(offset, offset + limit), total: all.length, byType: countByType(all) };
  }

  async search(q: BackendSearch): Promise<Memory[]> {
    const words = q.query.trim();
    const filter = {
      and: [this.eq('ApiKeyId', q.apiKeyId), ...(words ? [{ or: [{ property: 'Content', rich_text: { contains: words } }, { property: 'Name', title: { contains: words } }] }] : [])],
    };
    const pages = await this.query(filter, q.limit ?? 20);
    return pages.map((p) => this.toMemory(p)).filter((m) => m.apiKeyId === q.apiKeyId);
  }

  async health(): Promise<BackendHealth> {
    const started = performance.now();
    try {
      this.ok(await this.call('GET', `v1/databases/${encodeURIComponent(this.cfg.databaseId)}`));
      return { ok: true, latencyMs: Math.round(performance.now() - started) };
    } catch (err) {
      return { ok: false, latencyMs: Math.round(performance.now() - started), error: (err as Error).message };
    }
  }
}
