import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { BackendManager } from '../backends/manager';
import type { Logger } from '../logger';
import { formatMemoryContext } from '../memory/injection';
import type { Retriever } from '../memory/retrieval.types';
import type { SettingsService } from '../memory/settings';
import { estimateTokens } from '../memory/tokens';
import { memoryTypeSchema, type Memory } from '../memory/types';

/** Who is calling: the management token (any tenant, `apiKeyId` required) or one client key (its own memories only). */
export type McpPrincipal = { kind: 'management' } | { kind: 'apiKey'; apiKeyId: string };

export interface McpDeps {
  backends: BackendManager;
  settings: SettingsService;
  /** Local retrieval (the injection path) for the `remember-context` prompt. */
  retrieval: Retriever;
  log: Logger;
  version?: string;
}

/** A refusal or failure a tool reports as `isError` with `Error: <message>` (the original's shape). */
class ToolError extends Error {}

const apiKeyIdArg = z.string().min(1).max(128).optional().describe('The API key whose memories to use. A client key may only name itself (or omit it); the management token must give it.');

/** The original's input schemas (digest §7); `apiKeyId` is optional for a client key, which acts on its own memories. */
export const searchArgs = {
  apiKeyId: apiKeyIdArg,
  query: z.string().max(8192).optional().describe('What to look for; empty = newest memories'),
  type: memoryTypeSchema.optional().describe('Keep only this type (applied after retrieval)'),
  maxTokens: z.number().int().min(1).max(8000).optional().describe('Token budget (default: the memory settings, 2000 when memory is off)'),
  limit: z.number().int().min(1).max(100).optional().describe('Keep at most this many (applied after retrieval)'),
};
export const addArgs = {
  apiKeyId: apiKeyIdArg,
  sessionId: z.string().max(256).optional(),
  type: memoryTypeSchema,
  key: z.string().trim().min(1).max(512),
  content: z.string().trim().min(1).max(65_536),
  metadata: z.record(z.string(), z.unknown()).optional(),
};
export const clearArgs = {
  apiKeyId: apiKeyIdArg,
  type: memoryTypeSchema.optional(),
  olderThan: z.string().max(64).optional().describe('Only memories created before this ISO-8601 date'),
};

/** The pretty-printed JSON text result every tool answers with. */
function ok(data: unknown): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify({ success: true, data }, null, 2) }] };
}

function fail(err: unknown): CallToolResult {
  const message = err instanceof Error ? err.message : String(err);
  return { content: [{ type: 'text', text: `Error: ${message}` }], isError: true };
}

/** The tenant a call acts on: the client key's own, or the one the management token named. */
export function tenantOf(principal: McpPrincipal, apiKeyId: string | undefined): string {
  if (principal.kind === 'apiKey') {
    if (apiKeyId !== undefined && apiKeyId !== principal.apiKeyId) throw new ToolError('apiKeyId names another API key; a client key can only use its own memories');
    return principal.apiKeyId;
  }
  if (!apiKeyId) throw new ToolError('apiKeyId is required when authenticated with the management token');
  return apiKeyId;
}

/** Every id of a tenant's memories that match (all pages, not 50 a call as the original). */
async function matchingIds(backends: BackendManager, apiKeyId: string, type: Memory['type'] | undefined, before: Date | null): Promise<string[]> {
  const ids: string[] = [];
  const page = 200;
  for (let offset = 0; ; offset += page) {
    const r = await backends.list({ apiKeyId, type }, page, offset);
    // Only the tenant's own (a backend's listing is not trusted to have applied the filter): clear never reaches another key.
    for (const m of r.data) if (m.apiKeyId === apiKeyId && (!type || m.type === type) && (!before || new Date(m.createdAt).getTime() < before.getTime())) ids.push(m.id);
    if (r.data.length === 0 || offset + page >= r.total) break;
  }
  return [...new Set(ids)];
}

/**
 * The MCP server of one caller: the original's three tools (digest §7) with authorization it
 * lacked, a read-only resource per memory (`memory://<id>`) and the `remember-context` prompt.
 */
export function createMcpServer(deps: McpDeps, principal: McpPrincipal): McpServer {
  const server = new McpServer({ name: 'engram', version: deps.version ?? '0.1.0' }, { capabilities: { logging: {} } });
  const { backends, settings } = deps;

  const run = async (tool: string, fn: () => Promise<CallToolResult>): Promise<CallToolResult> => {
    try {
      return await fn();
    } catch (err) {
      if (!(err instanceof ToolError)) deps.log.warn({ tool, err: { message: (err as Error).message } }, 'mcp tool failed');
      return fail(err);
    }
  };

  server.registerTool(
    'omniroute_memory_search',
    {
      title: 'Search memories',
      description: "Searches an API key's memories with the configured retrieval strategy (works when memory injection is off).",
      inputSchema: searchArgs,
      annotations: { readOnlyHint: true },
    },
    (args) =>
      run('omniroute_memory_search', async () => {
        const apiKeyId = tenantOf(principal, args.apiKeyId);
        const s = settings.memory();
        const maxTokens = args.maxTokens ?? (s.enabled ? s.maxTokens : 2000);
        let memories: Memory[] = [];
        if (maxTokens > 0) {
          // `recent` is pure recency: the query is dropped, as in the original.
          const strategy = s.strategy === 'recent' ? 'exact' : s.strategy;
          const r = await backends.search({ apiKeyId, query: s.strategy === 'recent' ? '' : (args.query ?? ''), strategy, maxTokens, retentionDays: s.retentionDays });
          memories = r.memories.filter((m) => m.apiKeyId === apiKeyId);
        }
        if (args.type) memories = memories.filter((m) => m.type === args.type);
        if (args.limit) memories = memories.slice(0, args.limit);
        return ok({ memories, count: memories.length, totalTokens: memories.reduce((n, m) => n + estimateTokens(m.content), 0) });
      }),
  );

  server.registerTool(
    'omniroute_memory_add',
    {
      title: 'Add a memory',
      description: 'Stores a memory for an API key (an existing memory with the same key is updated).',
      inputSchema: addArgs,
    },
    (args) =>
      run('omniroute_memory_add', async () => {
        const apiKeyId = tenantOf(principal, args.apiKeyId);
        const { memory } = await backends.create(
          { apiKeyId, sessionId: args.sessionId ?? '', type: args.type, key: args.key, content: args.content, metadata: args.metadata ?? {} },
          { source: 'mcp' },
        );
        return ok({ memory, message: 'Memory created successfully' });
      }),
  );

  server.registerTool(
    'omniroute_memory_clear',
    {
      title: 'Clear memories',
      description: "Deletes every memory of an API key that matches (optionally one type, optionally created before a date); each deletion is kept in the memory's history.",
      inputSchema: clearArgs,
      annotations: { destructiveHint: true },
    },
    (args) =>
      run('omniroute_memory_clear', async () => {
        const apiKeyId = tenantOf(principal, args.apiKeyId);
        let before: Date | null = null;
        if (args.olderThan !== undefined) {
          before = new Date(args.olderThan);
          if (Number.isNaN(before.getTime())) throw new ToolError('olderThan is not a valid date (expected ISO-8601)');
        }
        const ids = await matchingIds(backends, apiKeyId, args.type, before);
        const deletedCount = await backends.deleteMany(ids, { source: 'mcp' });
        return ok({ deletedCount, message: `Cleared ${deletedCount} memories` });
      }),
  );

  const visible = (m: Memory | null): m is Memory => !!m && (principal.kind === 'management' || m.apiKeyId === principal.apiKeyId);
  server.registerResource(
    'memory',
    new ResourceTemplate('memory://{id}', {
      list: async () => {
        const r = await backends.list(principal.kind === 'apiKey' ? { apiKeyId: principal.apiKeyId } : {}, 100, 0);
        return { resources: r.data.filter(visible).map((m) => ({ uri: `memory://${m.id}`, name: m.key || m.id, mimeType: 'application/json' })) };
      },
    }),
    { title: 'Memory', description: 'One memory, read-only (JSON)', mimeType: 'application/json' },
    async (uri, vars) => {
      const id = Array.isArray(vars.id) ? vars.id[0] : vars.id;
      const m = await backends.get(decodeURIComponent(String(id)));
      // Another key's memory is answered exactly like a missing one.
      if (!visible(m)) throw new Error(`Resource ${uri.href} not found`);
      return { contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify(m, null, 2) }] };
    },
  );

  server.registerPrompt(
    'remember-context',
    {
      title: 'Remembered context',
      description: 'The memory context Engram would inject for a query (local retrieval, the configured strategy and budget).',
      argsSchema: { query: z.string().max(8192), apiKeyId: z.string().max(128).optional() },
    },
    async (args) => {
      const apiKeyId = tenantOf(principal, args.apiKeyId || undefined);
      const s = settings.memory();
      const strategy = s.strategy === 'recent' ? 'exact' : s.strategy;
      const r = await deps.retrieval.retrieve(
        apiKeyId,
        { query: s.strategy === 'recent' ? '' : args.query, strategy, maxTokens: Math.max(1, s.maxTokens || 2000), retentionDays: s.retentionDays },
        { preview: true },
      );
      const text = formatMemoryContext(r.items.map((it) => it.memory));
      return {
        description: `${r.items.length} memories, ${r.totalTokens} tokens`,
        messages: [{ role: 'user', content: { type: 'text', text: text || 'Memory context: (nothing relevant remembered)' } }],
      };
    },
  );

  return server;
}
