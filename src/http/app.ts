import crypto from 'node:crypto';
import express, { type Express, type Router } from 'express';
import cookieParser from 'cookie-parser';
import helmet from 'helmet';
import type { ApiContext } from './api-context';
import type { Logger } from '../logger';
import type { Metrics } from '../metrics';
import { proxyRoutes } from './routes/proxy.routes';
import { serveDirect } from './direct-route';
import { requireApiKey, requireManagement } from './auth';
import { errorHandler, notFoundHandler, sendError, useOpenAiErrors } from './error-handler';
import { adminRoutes } from './routes/admin.routes';
import { docsRoutes } from './routes/docs.routes';
import { dashboardRoutes } from './routes/dashboard.routes';
import { jobsRoutes } from './routes/jobs.routes';
import { keysRoutes } from './routes/keys.routes';
import { mcpRoutes } from './routes/mcp.routes';
import { memoryRoutes } from './routes/memory.routes';
import { memoryTransferRoutes } from './routes/memory-transfer.routes';
import { qdrantMemoryRoutes, qdrantSettingsRoutes } from './routes/qdrant.routes';
import { settingsRoutes } from './routes/settings.routes';
import { systemRoutes } from './routes/system.routes';
import { jsonBody, routePattern } from './validate';

/** JSON nesting limits: management bodies are flat; chat bodies carry tool schemas and structured content, so more. */
const API_MAX_JSON_DEPTH = 64;
const PROXY_MAX_JSON_DEPTH = 256;

const REQUEST_ID_RE = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * Headers every answer but /v1's carries (helmet; /v1's are apiHeaders below): nosniff, X-Frame-Options DENY (no Engram page is ever framed),
 * Referrer-Policy no-referrer, COOP/CORP same-origin, and the rest of helmet's defaults. Two are left to
 * their owners: the Content-Security-Policy (the dashboard sets its strict one, /admin its frame-ancestors;
 * the docs page loads swagger-ui) and HSTS (Engram speaks plain HTTP on 127.0.0.1; the TLS terminator
 * in front decides).
 */
const securityHeaders = helmet({ contentSecurityPolicy: false, strictTransportSecurity: false, xFrameOptions: { action: 'deny' } });

/** Answers that carry memories, keys, jobs or a session are never stored by a browser or a proxy (set before auth: errors too). */
const noStore: express.RequestHandler = (_req, res, next) => {
  res.setHeader('cache-control', 'no-store');
  next();
};

/**
 * /v1's headers: what OWASP's REST Security Cheat Sheet lists for every API answer (nosniff, X-Frame-Options DENY and
 * CSP frame-ancestors 'none', no-store; HSTS stays with the TLS terminator, as above), and none of helmet's others.
 * /v1 is the OpenAI-compatible API: called by programs with a key in a header (never a cookie, so a cross-site page
 * cannot make an authenticated request to it), answering JSON or an event stream, never a page. helmet's other eight
 * (COOP, CORP, Origin-Agent-Cluster, Referrer-Policy, X-DNS-Prefetch-Control, X-Download-Options,
 * X-Permitted-Cross-Domain-Policies, X-XSS-Protection) govern documents; on a chat they were 8 of its answer's 22
 * headers, and node's header code was the largest part of the code a memory-off chat ran beyond the bare proxy's
 * (bench/README.md, "Eighteenth pass").
 */
const apiHeaders: express.RequestHandler = (_req, res, next) => {
  res.setHeader('x-content-type-options', 'nosniff');
  res.setHeader('x-frame-options', 'DENY');
  res.setHeader('content-security-policy', "frame-ancestors 'none'");
  res.setHeader('cache-control', 'no-store');
  next();
};

/** Whether a request's url is under /v1 as express's router matches the '/v1' mount: any case, then '/', '?' or nothing. */
function underV1(url: string): boolean {
  if (url[0] !== '/' || (url[1] !== 'v' && url[1] !== 'V') || url[2] !== '1') return false;
  const c = url[3];
  return c === undefined || c === '/' || c === '?';
}

/** The security headers of every answer: /v1's API set there, helmet's everywhere else. */
const securityHeadersFor: express.RequestHandler = (req, res, next) => (underV1(req.url) ? apiHeaders(req, res, next) : securityHeaders(req, res, next));

/** /admin: the login form and bull-board are never framed (clickjacking), also where only CSP is honoured. */
const adminFrameAncestors: express.RequestHandler = (_req, res, next) => {
  res.setHeader('content-security-policy', "frame-ancestors 'none'");
  next();
};

/** A router with the prefix it is mounted at, so the route table can be walked (auth test). */
export type MountedRouter = Router & { mountPath?: string };

function mount(app: Express, path: string, ...handlers: [...express.RequestHandler[], MountedRouter]): void {
  const router = handlers[handlers.length - 1] as MountedRouter;
  router.mountPath = path;
  app.use(path, ...(handlers as express.RequestHandler[]));
}

/**
 * The access log line of a request: method, path and status only — no bodies, no query strings (they can carry
 * memory text), no headers. `info` when answered, `warn` for 4xx and for a response cut before it finished (the client left), `error` for 5xx.
 */
function logRequest(log: Logger, req: express.Request, res: express.Response, id: string, seconds: number): void {
  const finished = res.writableFinished;
  const level = res.statusCode >= 500 ? 'error' : res.statusCode >= 400 || !finished ? 'warn' : 'info';
  if (!log.isLevelEnabled(level)) return;
  const url = req.originalUrl;
  const q = url.indexOf('?');
  log[level](
    { req: { id, method: req.method, path: q < 0 ? url : url.slice(0, q) }, res: { statusCode: res.statusCode }, responseTime: Math.round(seconds * 1000) },
    !finished ? 'request aborted' : res.statusCode >= 500 ? 'request errored' : 'request completed',
  );
}

/**
 * The logger of the access log line: the process logger without its redaction. The line's fields are fixed (logRequest),
 * none of them a redacted path, so the output is the same; pino's redaction re-parsed every path on every line, about
 * 20 µs per request (bench/README.md, proxy-targets).
 */
function accessLogger(ctx: { log: Logger }): () => Logger {
  let of: Logger | null = null;
  let child: Logger | null = null;
  // Follows ctx.log when it is replaced (tests swap it to read the lines).
  return () => {
    if (of !== ctx.log || !child) {
      of = ctx.log;
      child = ctx.log.child({}, { redact: [] });
    }
    return child;
  };
}

/**
 * Runs `handlers` in order as one middleware (one router layer instead of one each: every layer costs a path match
 * and a prefix trim on every request); an error, thrown or passed to next, or a rejected promise goes to `next`.
 */
function chain(...handlers: express.RequestHandler[]): express.RequestHandler {
  return (req, res, next) => {
    let i = 0;
    const step = (err?: unknown): void => {
      if (err !== undefined && err !== null) return next(err);
      const h = handlers[i++];
      if (!h) return next();
      try {
        const out = h(req, res, step) as unknown;
        if (out instanceof Promise) out.catch(next);
      } catch (e) {
        next(e);
      }
    };
    step();
  };
}

/** The express app without listen (supertest drives it in tests). */
export function createApp(ctx: ApiContext, metrics: Metrics): Express {
  const app = express();
  const accessLog = accessLogger(ctx);
  app.disable('x-powered-by');
  app.set('trust proxy', ctx.env.TRUST_PROXY);

  // One hook per request for the latency metric and the access log line (pino-http built two child loggers
  // per request, serialising the request each time: 13% of the api's CPU on a proxied chat, bench/README.md).
  app.use((req, res, next) => {
    const given = req.headers['x-request-id'];
    const id = typeof given === 'string' && REQUEST_ID_RE.test(given) ? given : crypto.randomUUID();
    res.locals.requestId = id;
    res.setHeader('x-request-id', id);
    const started = process.hrtime.bigint();
    const quiet = req.url === '/healthz' || req.url === '/metrics';
    // on, not once: 'close' comes once, and once() wraps every listener in another closure.
    res.on('close', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = (res.locals.routePattern as string | undefined) ?? routePattern(req) ?? 'unmatched';
      if (res.writableFinished) metrics.httpDuration.observe({ method: req.method, route, status: String(res.statusCode) }, seconds);
      if (!quiet) logRequest(accessLog(), req, res, id, seconds);
    });
    next();
  });
  app.use(securityHeadersFor);
  app.use(['/api', '/mcp', '/admin'], noStore);
  app.use('/admin', adminFrameAncestors);
  // Authenticate first, parse second: a body is read (up to its limit) only for a caller who may send one.
  // Chat requests can carry images: their own, larger limit and a deeper nesting limit. The proxy comes first: its
  // requests are most of the traffic, and every router before it (system, docs) is walked by each of them.
  app.use('/v1', chain(useOpenAiErrors, requireApiKey(ctx.apiKeys, ctx.authThrottle), jsonBody({ limit: ctx.env.PROXY_BODY_LIMIT_BYTES, maxDepth: PROXY_MAX_JSON_DEPTH, keepRaw: true })));
  mount(app, '/v1', proxyRoutes(ctx));
  const system: MountedRouter = systemRoutes(ctx, metrics);
  system.mountPath = '';
  app.use(system);
  // The API's own description and reference page: public, built from the routes when first asked for.
  mount(app, '', docsRoutes(() => app));
  // MCP over streamable HTTP: its own auth (client key or management token), then its own body parser.
  mount(app, '/mcp', mcpRoutes(ctx));
  // The dashboard calls /api with the operator's session cookie plus the CSRF header; scripts use the bearer token.
  app.use(
    '/api',
    cookieParser(),
    requireManagement(ctx.managementToken, { sessions: ctx.adminSessions, cookieNeedsCsrfHeader: true, throttle: ctx.authThrottle }),
    // JSON only (the dashboard and scripts send JSON; a form body is a 415 in handle()); /api/memory/import reads its raw body itself.
    jsonBody({ limit: ctx.env.BODY_LIMIT_BYTES, maxDepth: API_MAX_JSON_DEPTH }),
  );
  // Before the CRUD router: /export, /summarize, /import are not memory ids.
  mount(app, '/api/memory', memoryTransferRoutes(ctx));
  mount(app, '/api/memory/qdrant', qdrantMemoryRoutes(ctx));
  mount(app, '/api/settings/qdrant', qdrantSettingsRoutes(ctx));
  mount(app, '/api/memory', memoryRoutes(ctx));
  mount(app, '/api/settings', settingsRoutes(ctx));
  mount(app, '/api/keys', keysRoutes(ctx));
  mount(app, '/api/jobs', jobsRoutes(ctx));
  app.use('/api', (_req, res) => sendError(res, 404, 'not_found', 'No such API route'));
  // Browsers reach the admin pages with the login cookie; everything else needs the header. The login form parses its own small body.
  mount(app, '/admin', adminRoutes(ctx, ctx.adminSessions));
  // Static files only (no data): public like the login page; every call it makes goes through /api's auth.
  mount(app, '/dashboard', dashboardRoutes(ctx.dashboardDir));

  app.use(notFoundHandler);
  app.use(errorHandler(ctx.log));
  // Most of the traffic: its handlers above run without express's router walk (the same handlers, in the same order).
  return serveDirect(app, 'POST', '/v1/chat/completions');
}
