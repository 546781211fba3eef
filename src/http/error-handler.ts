import type { ErrorRequestHandler, RequestHandler } from 'express';
import { AppError } from '../errors';
import type { Logger } from '../logger';

/** Sends the one error shape: {error:{code,message,details}, requestId}. */
export function sendError(res: Parameters<RequestHandler>[1], status: number, code: string, message: string, details: unknown = null): void {
  res.status(status).json({ error: { code, message, details }, requestId: res.locals.requestId ?? null });
}

/** 404 for anything no route matched. */
export const notFoundHandler: RequestHandler = (req, res) => {
  sendError(res, 404, 'not_found', `No route for ${req.method} ${req.path}`);
};

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
    const busy = (err as { code?: string }).code === 'SQLITE_BUSY';
    log.error({ err, requestId: res.locals.requestId, path: req.path }, 'unhandled error');
    if (busy) return sendError(res, 503, 'database_busy', 'The database is busy; retry shortly');
    sendError(res, 500, 'internal_error', 'Internal error');
  };
}
