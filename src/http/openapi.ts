import type { Express } from 'express';
import { z } from 'zod';
import { routeMetaOf, type RouteMeta } from './route-doc';
import { isManagementGuard } from './auth';
import { walkRoutes, type RouteEntry } from './route-table';

type Json = Record<string, unknown>;

/** Routes that are a third-party UI, not Engram's API (bull-board's pages and their XHR API). */
export const UNDOCUMENTED_ROUTES = [/^\/admin\/queues(\/|$)/];

/** The one error shape of Engram's own routes (DESIGN §8). */
export const errorSchema = z
  .object({
    error: z.object({ code: z.string(), message: z.string(), details: z.unknown() }),
    requestId: z.string().nullable(),
  })
  .meta({ example: { error: { code: 'validation_failed', message: 'Invalid body: body.content: Too small: expected string to have >=1 characters', details: [{ path: 'body.content', message: 'Too small: expected string to have >=1 characters', code: 'too_small' }] }, requestId: '3b1f0c9e-2d4a-4c51-9f1e-6a8f2f0b9c11' } });

/** OpenAI's error shape, as /v1 answers. */
export const openAiErrorSchema = z
  .object({ error: z.object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.string().nullable() }) })
  .meta({ example: { error: { message: 'Incorrect or revoked API key provided', type: 'invalid_request_error', param: null, code: 'invalid_api_key' } } });

/** JSON Schema (2020-12, what OpenAPI 3.1 uses) of a zod schema: `input` for what a client sends, `output` for what it gets. */
export function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output'): Json {
  const js = z.toJSONSchema(schema, { io, target: 'draft-2020-12', unrepresentable: 'any' }) as Json;
  delete js.$schema;
  return js;
}

type Audience = 'management' | 'client' | 'mcp' | 'public';

function audienceOf(route: RouteEntry): Audience {
  const path = route.path;
  // /api is guarded where it is mounted; a route elsewhere (/metrics unless METRICS_PUBLIC) by a guard of its own.
  if (path.startsWith('/api/') || route.handlers.some(isManagementGuard)) return 'management';
  if (path.startsWith('/v1/')) return 'client';
  if (path === '/mcp') return 'mcp';
  return 'public';
}

const SECURITY: Record<Audience, Json[]> = {
  management: [{ managementToken: [] }],
  client: [{ clientKey: [] }, { clientKeyHeader: [] }],
  mcp: [{ clientKey: [] }, { managementToken: [] }],
  public: [],
};

function tagOf(path: string): string {
  const parts = path.split('/').filter(Boolean);
  if (parts[0] === 'api') return parts[1] ?? 'api';
  if (parts[0] === 'v1') return 'openai';
  if (['healthz', 'readyz', 'metrics'].includes(parts[0] ?? '')) return 'system';
  return parts[0] ?? 'system';
}

/** `/api/memory/:id` → `/api/memory/{id}` (and express 5's `*name` wildcards). */
function openApiPath(path: string): { path: string; params: string[] } {
  const params: string[] = [];
  const p = path.replace(/[:*]([A-Za-z_][A-Za-z0-9_]*)/g, (_m, name: string) => {
    params.push(name);
    return `{${name}}`;
  });
  return { path: p, params };
}

function objectParams(schema: z.ZodType | undefined, where: 'query' | 'path'): Json[] {
  if (!schema) return [];
  const js = jsonSchemaOf(schema, 'input');
  const props = (js.properties ?? {}) as Record<string, Json>;
  const required = new Set((js.required ?? []) as string[]);
  return Object.entries(props).map(([name, s]) => {
    const { description, ...rest } = s;
    return { name, in: where, required: where === 'path' ? true : required.has(name), ...(description ? { description } : {}), schema: rest };
  });
}

function errorResponses(audience: Audience, meta: RouteMeta | null, hasPathParams: boolean): Record<string, Json> {
  const ref = audience === 'client' ? '#/components/schemas/OpenAiError' : '#/components/schemas/Error';
  const r = (description: string) => ({ description, content: { 'application/json': { schema: { $ref: ref } } } });
  const out: Record<string, Json> = {};
  const validates = meta && (meta.schemas.body || meta.schemas.query || meta.schemas.params);
  if (validates) out['400'] = r('Invalid input: the zod path of every problem is in `details`; nothing changed');
  if (audience === 'management') {
    out['401'] = r('No credentials');
    out['403'] = r('Wrong management token');
    out['429'] = r('Too many wrong credentials from this address (AUTH_FAILURE_LIMIT per AUTH_FAILURE_WINDOW_MS): refused for AUTH_BLOCK_MS, see `Retry-After`');
    if (hasPathParams) out['404'] = r('Not found');
    out['503'] = r('A dependency (Redis, a memory backend) is down; retry after `Retry-After` seconds');
  } else if (audience === 'client' || audience === 'mcp') {
    out['401'] = r('No, unknown or revoked credentials');
    out['429'] = r('Too many wrong credentials from this address (AUTH_FAILURE_LIMIT per AUTH_FAILURE_WINDOW_MS): refused for AUTH_BLOCK_MS, see `Retry-After`');
  }
  return out;
}

function operation(route: RouteEntry, meta: RouteMeta | null, pathParams: string[]): Json {
  const audience = audienceOf(route);
  const doc = meta?.doc ?? {};
  const params = [...objectParams(meta?.schemas.params, 'path'), ...objectParams(meta?.schemas.query, 'query')];
  for (const name of pathParams) if (!params.some((p) => p.name === name && p.in === 'path')) params.push({ name, in: 'path', required: true, schema: { type: 'string' } });
  const op: Json = {
    operationId: `${route.method.toLowerCase()}${route.path.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
    tags: [tagOf(route.path)],
    summary: doc.summary ?? `${route.method} ${route.path}`,
    ...(doc.description ? { description: doc.description } : {}),
    security: SECURITY[audience],
  };
  if (params.length) op.parameters = params;
  if (meta?.schemas.body) {
    const media: Json = { schema: jsonSchemaOf(meta.schemas.body, 'input') };
    if (doc.requestExample !== undefined) media.example = doc.requestExample;
    op.requestBody = { required: true, content: { [doc.requestContentType ?? 'application/json']: media } };
  }
  const responses: Record<string, Json> = {};
  const declared = doc.responses ?? { 200: { description: 'Success' } };
  for (const [status, r] of Object.entries(declared)) {
    const types = Array.isArray(r.contentType) ? r.contentType : [r.contentType ?? 'application/json'];
    const content: Record<string, Json> = {};
    for (const contentType of types) {
      const media: Json = {};
      if (r.schema && contentType === 'application/json') media.schema = jsonSchemaOf(r.schema, 'output');
      else media.schema = contentType === 'application/json' ? { type: 'object' } : { type: 'string' };
      if (r.example !== undefined && contentType === types[0]) media.example = r.example;
      content[contentType] = media;
    }
    responses[status] = status === '204' ? { description: r.description } : { description: r.description, content };
  }
  for (const [status, r] of Object.entries(errorResponses(audience, meta, pathParams.length > 0))) responses[status] ??= r;
  op.responses = responses;
  return op;
}

/** The routes the document covers: every route of the app but the third-party UI. */
export function documentedRoutes(app: Express): RouteEntry[] {
  return walkRoutes(app).filter((r) => !UNDOCUMENTED_ROUTES.some((re) => re.test(r.path)));
}

/**
 * The OpenAPI 3.1 document of the running app, generated from its router table: every route the
 * walk finds is in it, with the request schemas its handler validates with (handle() and
 * documented() attach them), so it cannot drift from what the routes accept.
 */
export function buildOpenApi(app: Express, info: { version: string; serverUrl?: string }): Json {
  const paths: Record<string, Record<string, Json>> = {};
  for (const route of documentedRoutes(app)) {
    const meta = route.handlers.map(routeMetaOf).find((m): m is RouteMeta => m !== null) ?? null;
    const { path, params } = openApiPath(route.path);
    (paths[path] ??= {})[route.method.toLowerCase()] = operation(route, meta, params);
  }
  const errorJs = jsonSchemaOf(errorSchema, 'output');
  const openAiErrorJs = jsonSchemaOf(openAiErrorSchema, 'output');
  return {
    openapi: '3.1.0',
    info: {
      title: 'Engram',
      version: info.version,
      description:
        'Self-hosted memory for LLM applications: an OpenAI-compatible chat proxy that remembers (/v1, client API keys), the management API (/api, the management token), MCP at /mcp. Every error of /api is `{error:{code,message,details}, requestId}`; /v1 answers errors in OpenAI\'s shape.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    ...(info.serverUrl ? { servers: [{ url: info.serverUrl }] } : {}),
    tags: [
      { name: 'memory', description: 'Memories: CRUD, listing, retrieval preview, reindex, backends' },
      { name: 'settings', description: 'Memory settings (the original\'s field names)' },
      { name: 'keys', description: 'Client API keys' },
      { name: 'jobs', description: 'Background jobs and their live events' },
      { name: 'openai', description: 'OpenAI-compatible proxy with memory' },
      { name: 'mcp', description: 'Model Context Protocol (streamable HTTP, stateless)' },
      { name: 'system', description: 'Liveness, readiness, metrics' },
      { name: 'docs', description: 'This document and its reference page' },
      { name: 'admin', description: 'Operators\' sign-in for the browser pages' },
    ],
    paths,
    components: {
      securitySchemes: {
        managementToken: { type: 'http', scheme: 'bearer', description: 'MANAGEMENT_TOKEN (or the file DATA_DIR/management-token): /api and, for any tenant, /mcp' },
        clientKey: { type: 'http', scheme: 'bearer', description: 'A client API key (egk_…): /v1 and, for its own memories only, /mcp' },
        clientKeyHeader: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'A client API key in x-api-key (/v1)' },
      },
      schemas: { Error: errorJs, OpenAiError: openAiErrorJs },
    },
  };
}
