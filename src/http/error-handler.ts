import type { ErrorRequestHandler, RequestHandler } from 'express';
import { AppError } from '../errors';
import type { Logger } from '../logger';

/** Seconds a client should wait before retrying a 503 (every 503 the app sends carries it). */
export const RETRY_AFTER_SECONDS = 5;

/** OpenAI's error `type` for a status Engram itself answers with on /v1. */
function openAiType(status: number): string {
  if (status >= 500) return 'server_error';
  if (status === 403) return 'permission_error';
  if (status === 429) return 'rate_limit_error';
  return 'invalid_request_error';
}

/** The request field an error is about, OpenAI style (`messages.0.role`): the first detail's zod path without `body.`. */
function openAiParam(details: unknown): string | null {
  const first = Array.isArray(details) ? (details[0] as { path?: unknown } | undefined) : undefined;
  return typeof first?.path === 'string' ? first.path.replace(/^(body|query|params)\.?/, '') || null : null;
}

/** Marks a request as OpenAI-compatible (/v1): its errors use OpenAI's shape `{error:{message,type,param,code}}`. */
export const useOpenAiErrors: RequestHandler = (_req, res, next) => {
  res.locals.errorFormat = 'openai';
  next();
};

/**
 * An answer sent while the request's body is still unread (refused before parsing: no or a wrong credential, a
 * 415, a 404) closes the connection. On keep-alive Node would otherwise read and drop the rest of the body
 * (`req._dump()`) to reach the next request — any amount, before authentication.
 */
export function closeIfBodyUnread(res: { req?: { complete: boolean; readableFlowing: boolean | null; headers: Record<string, unknown> }; headersSent: boolean; setHeader(name: string, value: string): unknown }): void {
  const req = res.req;
  if (!req || res.headersSent || req.complete || req.readableFlowing !== null) return;
  const length = req.headers['content-length'];
  if (req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')) res.setHeader('connection', 'close');
}

/**
 * Sends an error: the one shape `{error:{code,message,details}, requestId}`, or on /v1 OpenAI's
 * `{error:{message,type,param,code}}` (a 401 there is always `invalid_api_key`, as OpenAI's SDKs expect).
 * A 503 also gets Retry-After.
 */
export function sendError(res: Parameters<RequestHandler>[1], status: number, code: string, message: string, details: unknown = null): void {
  closeIfBodyUnread(res);
  if (status === 503) res.setHeader('retry-after', String(RETRY_AFTER_SECONDS));
  if (res.locals.errorFormat === 'openai') {
    res.status(status).json({ error: { message, type: openAiType(status), param: openAiParam(details), code: status === 401 ? 'invalid_api_key' : code } });
    return;
  }
  res.status(status).json({ error: { code, message, details }, requestId: res.locals.requestId ?? null });
}

/** 404 for anything no route matched. */
export const notFoundHandler: RequestHandler = (req, res) => {
  sendError(res, 404, 'not_found', `No route for ${req.method} ${req.path}`);
};

// What ioredis and BullMQ throw when Redis is down or too slow: a dependency problem, not a bug.
const REDIS_MESSAGES = [/enableOfflineQueue options is false/i, /^Connection is closed\.?$/i, /^Command timed out$/i, /Reached the max retries per request limit/i];
const NETWORK_CODES: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTCONN', 'NR_CLOSED']);

/** Whether an error (or its cause) is a Redis connection failure from ioredis/BullMQ. */
export function isRedisUnavailable(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 3) return false;
  const e = err as { name?: unknown; message?: unknown; code?: unknown; cause?: unknown };
  if (e.name === 'MaxRetriesPerRequestError') return true;
  if (typeof e.message === 'string' && REDIS_MESSAGES.some((re) => re.test(e.message as string))) return true;
  if (typeof e.code === 'string' && NETWORK_CODES.has(e.code)) return true;
  return isRedisUnavailable(e.cause, depth + 1);
}

// The disk under DATA_DIR is full (SQLite's SQLITE_FULL, Node's ENOSPC, a quota's EDQUOT): the client is not at
// fault and retrying at once will not help; 507 says so. SQLite rolls the statement back, so nothing is half-written.
const STORAGE_FULL_CODES: ReadonlySet<string> = new Set(['SQLITE_FULL', 'ENOSPC', 'EDQUOT']);

/** Whether an error (or its cause) says the disk is full. */
export function isStorageFull(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 3) return false;
  const e = err as { code?: unknown; cause?: unknown };
  if (typeof e.code === 'string' && STORAGE_FULL_CODES.has(e.code)) return true;
  return isStorageFull(e.cause, depth + 1);
}

/** Maps every error to the one shape; never a stack trace, never a secret. */
export function errorHandler(log: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (err instanceof AppError) {
      if (err.status >= 500) log.warn({ code: err.code, requestId: res.locals.requestId }, err.message);
      sendError(res, err.status, err.code, err.message, err.details);
      return;
    }
    // body-parser errors carry `type` and `status`.
    const type = (err as { type?: string }).type;
    if (type === 'entity.too.large') return sendError(res, 413, 'payload_too_large', 'Request body is too large');
    if (type === 'entity.too.deep') return sendError(res, 400, 'json_too_deep', (err as Error).message);
    if (type === 'entity.parse.failed') return sendError(res, 400, 'invalid_json', 'Invalid JSON body');
    if (type === 'encoding.unsupported' || type === 'charset.unsupported') return sendError(res, 415, 'unsupported_encoding', 'Unsupported body encoding');
    if (type === 'request.aborted') return sendError(res, 400, 'request_aborted', 'Request aborted');
    // The router decodes path parameters with decodeURIComponent: a malformed escape (%ZZ) is the client's mistake.
    if (err instanceof URIError) return sendError(res, 400, 'invalid_path', 'The URL path has a malformed percent-encoding');
    // Other errors that say they are the client's (http-errors with a 4xx status and expose) keep their status.
    const status = (err as { status?: unknown }).status;
    if (typeof status === 'number' && status >= 400 && status < 500 && (err as { expose?: unknown }).expose === true) {
      return sendError(res, status, 'bad_request', 'Bad request');
    }
    if (isRedisUnavailable(err)) {
      log.warn({ requestId: res.locals.requestId, path: req.path, err: { name: (err as Error).name, code: (err as { code?: unknown }).code } }, 'redis unavailable during a request');
      return sendError(res, 503, 'dependency_unavailable', 'Redis is unreachable or not answering; retry shortly');
    }
    if (isStorageFull(err)) {
      log.error({ requestId: res.locals.requestId, path: req.path, err: { code: (err as { code?: unknown }).code } }, 'disk full: write refused');
      return sendError(res, 507, 'insufficient_storage', 'The server has no disk space left for this write; nothing was changed');
    }
    const busy = (err as { code?: string }).code === 'SQLITE_BUSY';
    log.error({ err, requestId: res.locals.requestId, path: req.path }, 'unhandled error');
    if (busy) return sendError(res, 503, 'database_busy', 'The database is busy; retry shortly');
    sendError(res, 500, 'internal_error', 'Internal error');
  };
}
