import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { Router, type RequestHandler } from 'express';
import { safeEqual } from '../../auth/management-token';
import { createMcpServer, type McpPrincipal } from '../../mcp/server';
import type { ApiContext } from '../api-context';
import { bearer } from '../auth';
import { apiKeyIdentity, clientIp, MANAGEMENT_IDENTITY, sendThrottled } from '../auth-throttle';
import { sendError } from '../error-handler';
import { jsonBody } from '../validate';
import { documented, type RouteDoc } from '../route-doc';
import { z } from 'zod';

/**
 * MCP auth: `Authorization: Bearer` with the management token (any tenant, `apiKeyId` required) or
 * a client key (its own memories only). 401 without credentials and for anything else, with the
 * Bearer challenge MCP clients look for; the presented value is never echoed.
 */
export function requireMcpAuth(ctx: Pick<ApiContext, 'managementToken' | 'apiKeys' | 'authThrottle'>): RequestHandler {
  return async (req, res, next) => {
    const token = bearer(req);
    res.setHeader('www-authenticate', 'Bearer realm="engram-mcp"');
    if (!token) return sendError(res, 401, 'unauthorized', 'Credentials required (Authorization: Bearer <client API key or MANAGEMENT_TOKEN>)');
    // Checked first, throttled second, nothing awaited in between (see AuthThrottle.verdict).
    let principal: McpPrincipal | null = null;
    if (safeEqual(token, ctx.managementToken)) principal = { kind: 'management' };
    else {
      const rec = ctx.apiKeys.verify(token);
      if (rec) principal = { kind: 'apiKey', apiKeyId: rec.id };
    }
    const identity = principal === null ? null : principal.kind === 'management' ? MANAGEMENT_IDENTITY : apiKeyIdentity(principal.apiKeyId);
    const verdict = await ctx.authThrottle.verdict(clientIp(req), identity);
    if (verdict.blocked) return sendThrottled(res, verdict);
    if (!principal) return sendError(res, 401, 'unauthorized', 'Incorrect or revoked API key or management token');
    res.removeHeader('www-authenticate');
    res.locals.mcpPrincipal = principal;
    next();
  };
}

const MAX_JSON_DEPTH = 64;

/** What a POST carries: one JSON-RPC message or a batch (the SDK's transport checks the rest). */
const jsonRpcMessage = z.union([z.object({ jsonrpc: z.literal('2.0'), method: z.string().optional(), id: z.union([z.string(), z.number()]).optional() }).loose(), z.array(z.unknown())]);

const MCP_DOC: RouteDoc = {
  summary: 'MCP (streamable HTTP, stateless): tools omniroute_memory_search / _add / _clear, memory:// resources, the remember-context prompt',
  description:
    'Authorization: a client key acts on its own memories only (naming another apiKeyId is refused); the management token may name any key and must. Send `Accept: application/json, text/event-stream`.',
  requestExample: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'omniroute_memory_search', arguments: { query: 'editor' } } },
  responses: { 200: { description: 'The JSON-RPC response', example: { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: '{\n  "success": true,\n  "data": {…}\n}' }] } } } },
};
const NOT_ALLOWED_DOC: RouteDoc = { summary: 'Not used by a stateless MCP server', responses: { 405: { description: 'POST only' } } };

/**
 * /mcp: MCP over streamable HTTP, stateless (a server and transport per request, so every request
 * is authorized on its own and nothing is kept between them). GET (server-initiated streams) and
 * DELETE (sessions) have nothing to serve in stateless mode: 405, as the SDK's stateless example answers.
 */
export function mcpRoutes(ctx: ApiContext): Router {
  const r = Router();
  const deps = { backends: ctx.backends, settings: ctx.settings, retrieval: ctx.retrieval, log: ctx.log };
  r.post('/', requireMcpAuth(ctx), jsonBody({ limit: ctx.env.BODY_LIMIT_BYTES, maxDepth: MAX_JSON_DEPTH }), documented(MCP_DOC, async (req, res, next) => {
    const server = createMcpServer(deps, res.locals.mcpPrincipal as McpPrincipal);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close().catch(() => undefined);
      void server.close().catch(() => undefined);
    });
    try {
      await server.connect(transport);
      await transport.handleRequest(req, res, req.body);
    } catch (err) {
      next(err);
    }
  }, { body: jsonRpcMessage }));
  const notAllowed: RequestHandler = (_req, res) => {
    res.status(405).setHeader('allow', 'POST').json({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed: this MCP endpoint is stateless (POST only)' }, id: null });
  };
  r.get('/', requireMcpAuth(ctx), documented(NOT_ALLOWED_DOC, notAllowed));
  r.delete('/', requireMcpAuth(ctx), documented(NOT_ALLOWED_DOC, notAllowed));
  return r;
}
