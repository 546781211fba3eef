import { z } from 'zod';
import type { ChangeContext, ListFilter, Memory, UpdateMemoryInput } from '../memory/types';
import type { OutboundPolicy } from '../net/url-policy';
import { backendBaseUrl, backendFetch, jsonOf, statusError, type OutboundResponse } from './outbound';
import { BackendError, countByType, parseRemoteMemory, type BackendCreateInput, type BackendHealth, type BackendListResult, type BackendSearch, type MemoryBackend } from './types';

const ENDPOINT_NAMES = ['search', 'create', 'list', 'get', 'update', 'delete', 'health'] as const;
type EndpointName = (typeof ENDPOINT_NAMES)[number];

/** The original's defaults (digest §8.2). */
export const DEFAULT_ENDPOINTS: Record<EndpointName, string> = {
  search: 'GET /memories/search',
  create: 'POST /memories',
  list: 'GET /memories',
  get: 'GET /memories/{id}',
  update: 'PATCH /memories/{id}',
  delete: 'DELETE /memories/{id}',
  health: 'GET /health',
};

const QUERY_PARAMS = ['query', 'apiKeyId', 'limit', 'offset', 'strategy', 'maxTokens', 'type', 'sessionId', 'orderBy', 'orderDir', 'options', 'q'] as const;
const headerName = z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/, 'not a valid header name');
const headerValue = z.string().max(4096).regex(/^[^\r\n]*$/, 'header values cannot contain line breaks');
const endpoint = z.string().regex(/^(GET|POST|PUT|PATCH|DELETE) \/[^\s?#]*$/, 'expected "METHOD /path/{id}"');

/** backendConfigs[<id>] of a generic HTTP backend (validated: a bad config names its path). */
export const httpBackendConfigSchema = z.strictObject({
  type: z.literal('http').default('http'),
  displayName: z.string().max(100).optional(),
  baseUrl: z.string().min(1).max(2048),
  apiKey: z.string().max(4096).optional(),
  headers: z.record(headerName, headerValue).default({}),
  timeoutMs: z.number().int().min(100).max(120_000).default(10_000),
  maxResponseBytes: z.number().int().min(1024).max(64 * 1_048_576).default(4 * 1_048_576),
  endpoints: z.partialRecord(z.enum(ENDPOINT_NAMES), endpoint).default({}),
  /** Query parameter renaming: our name → the service's name. */
  queryParams: z.partialRecord(z.enum(QUERY_PARAMS), z.string().min(1).max(100)).default({}),
  /** Path parameter renaming: `{id}` / `{memoryId}` → the placeholder the templates use. */
  pathParams: z.partialRecord(z.enum(['id', 'memoryId']), z.string().regex(/^[A-Za-z0-9_]{1,64}$/)).default({}),
});
export type HttpBackendConfig = z.output<typeof httpBackendConfigSchema>;
export type HttpBackendConfigInput = z.input<typeof httpBackendConfigSchema>;

const listAnswer = z.union([
  z.array(z.unknown()).transform((data) => ({ data, total: undefined as number | undefined, byType: undefined as Record<string, number> | undefined })),
  z.object({
    data: z.array(z.unknown()),
    total: z.number().int().nonnegative().optional(),
    byType: z.record(z.string(), z.number()).optional(),
  }),
]);
const searchAnswer = z.union([z.array(z.unknown()), z.object({ data: z.array(z.unknown()) }).transform((o) => o.data), z.object({ memories: z.array(z.unknown()) }).transform((o) => o.memories)]);
const oneAnswer = z.union([z.object({ memory: z.unknown() }).transform((o) => o.memory), z.object({ data: z.object({ id: z.unknown() }).loose() }).transform((o) => o.data), z.unknown()]);

/**
 * "." and ".." survive encodeURIComponent and URL resolution removes them ("/memories/.." is the base):
 * such an id would address another path of the service (DELETE /api/memory/%2E%2E, memory://..). No memory has it.
 */
const isDotSegment = (id: string) => id === '.' || id === '..';

/**
 * A memory service spoken to over HTTP/JSON (digest §8.2): endpoint templates with `{placeholders}`,
 * renamed query and path parameters, bearer and custom headers, a timeout and a response-size limit
 * on every call, the shared outbound URL policy; 404 on get/update/delete means "not there".
 */
export class HttpBackend implements MemoryBackend {
  readonly displayName: string;
  private readonly base: URL;
  private readonly config: HttpBackendConfig;

  constructor(
    readonly id: string,
    config: HttpBackendConfigInput,
    private readonly policy: OutboundPolicy,
  ) {
    this.config = httpBackendConfigSchema.parse(config);
    this.displayName = this.config.displayName ?? `HTTP (${id})`;
    this.base = backendBaseUrl(this.config.baseUrl, policy);
  }

  private url(name: EndpointName, pathValues: Record<string, string>, query: Record<string, string | number | undefined>): { method: string; url: URL } {
    const [method, template] = (this.config.endpoints[name] ?? DEFAULT_ENDPOINTS[name]).split(' ');
    const idName = this.config.pathParams.id ?? 'id';
    const memoryIdName = this.config.pathParams.memoryId ?? 'memoryId';
    const values: Record<string, string> = {};
    if (pathValues.id !== undefined) {
      values[idName] = pathValues.id;
      values[memoryIdName] = pathValues.id;
    }
    const path = template.replace(/\{([A-Za-z0-9_]+)\}/g, (_m, p: string) => {
      const v = values[p];
      if (v === undefined) throw new BackendError(`backend ${this.id}: endpoint ${name} has an unknown placeholder {${p}}`);
      return encodeURIComponent(v);
    });
    // Relative to the base (its path kept): "/memories" under https://h/api/ is https://h/api/memories.
    const url = new URL(path.replace(/^\/+/, ''), this.base);
    for (const [k, v] of Object.entries(query)) {
      if (v === undefined || v === '') continue;
      const name = this.config.queryParams[k as (typeof QUERY_PARAMS)[number]] ?? k;
      url.searchParams.set(name, String(v));
    }
    return { method, url };
  }

  private async call(name: EndpointName, pathValues: Record<string, string>, query: Record<string, string | number | undefined>, body?: unknown): Promise<OutboundResponse> {
    const { method, url } = this.url(name, pathValues, query);
    const headers: Record<string, string> = { accept: 'application/json', ...this.config.headers };
    if (this.config.apiKey) headers.authorization = `Bearer ${this.config.apiKey}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    return backendFetch(
      this.id,
      { method, url, headers, body: body === undefined ? undefined : JSON.stringify(body), timeoutMs: this.config.timeoutMs, maxResponseBytes: this.config.maxResponseBytes },
      this.policy,
    );
  }

  private ok(r: OutboundResponse): OutboundResponse {
    if (r.status < 200 || r.status >= 300) throw statusError(this.id, r);
    return r;
  }

  async create(input: BackendCreateInput, _ctx: ChangeContext): Promise<{ memory: Memory; created: boolean }> {
    const r = this.ok(await this.call('create', {}, {}, input));
    const body = jsonOf(this.id, r);
    const created = (body as { created?: unknown } | undefined)?.created;
    return { memory: parseRemoteMemory(this.id, oneAnswer.parse(body)), created: typeof created === 'boolean' ? created : r.status === 201 };
  }

  async get(id: string): Promise<Memory | null> {
    if (isDotSegment(id)) return null;
    const r = await this.call('get', { id }, {});
    if (r.status === 404) return null;
    return parseRemoteMemory(this.id, oneAnswer.parse(jsonOf(this.id, this.ok(r))));
  }

  async update(id: string, patch: UpdateMemoryInput, _ctx: ChangeContext): Promise<Memory | null> {
    if (isDotSegment(id)) return null;
    const r = await this.call('update', { id }, {}, patch);
    if (r.status === 404) return null;
    const body = jsonOf(this.id, this.ok(r));
    // A service that answers 204 or {success:true} is read back.
    if (body === undefined || (typeof body === 'object' && body !== null && !('id' in body) && !('memory' in body) && !('data' in body))) return this.get(id);
    return parseRemoteMemory(this.id, oneAnswer.parse(body));
  }

  async delete(id: string, _ctx: ChangeContext): Promise<boolean> {
    if (isDotSegment(id)) return false;
    const r = await this.call('delete', { id }, {});
    if (r.status === 404) return false;
    this.ok(r);
    return true;
  }

  async list(filter: ListFilter, limit: number, offset: number): Promise<BackendListResult> {
    const r = this.ok(await this.call('list', {}, { apiKeyId: filter.apiKeyId, type: filter.type, sessionId: filter.sessionId, q: filter.q, limit, offset }));
    const parsed = listAnswer.safeParse(jsonOf(this.id, r));
    if (!parsed.success) throw new BackendError(`backend ${this.id}: the list answer is neither an array nor {data: [...]}`);
    const all = parsed.data.data.map((m) => parseRemoteMemory(this.id, m));
    // As in search: whatever the service sends (a renamed tenant parameter it does not know, a careless
    // service), a tenant's listing holds only its own memories — MCP clear deletes what it lists.
    const data = filter.apiKeyId === undefined ? all : all.filter((m) => m.apiKeyId === filter.apiKeyId);
    // A bare array says nothing of the total: a full page means there may be more (callers that page on, as MCP clear, go on).
    const total = parsed.data.total ?? offset + all.length + (all.length >= limit ? 1 : 0);
    return { data, total, byType: data.length === all.length ? (parsed.data.byType ?? countByType(data)) : countByType(data) };
  }

  async search(q: BackendSearch): Promise<Memory[]> {
    const r = this.ok(
      await this.call('search', {}, {
        query: q.query,
        apiKeyId: q.apiKeyId,
        limit: q.limit || undefined,
        maxTokens: q.maxTokens || undefined,
        strategy: q.strategy,
      }),
    );
    const parsed = searchAnswer.safeParse(jsonOf(this.id, r));
    if (!parsed.success) throw new BackendError(`backend ${this.id}: the search answer is not a list of memories`);
    // Whatever the service sends, a tenant only ever gets its own memories back.
    return parsed.data.map((m) => parseRemoteMemory(this.id, m)).filter((m) => m.apiKeyId === q.apiKeyId);
  }

  async health(): Promise<BackendHealth> {
    const started = performance.now();
    try {
      this.ok(await this.call('health', {}, {}));
      return { ok: true, latencyMs: Math.round(performance.now() - started) };
    } catch (err) {
      return { ok: false, latencyMs: Math.round(performance.now() - started), error: (err as Error).message };
    }
  }
}
