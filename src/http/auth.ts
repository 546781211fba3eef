import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { AdminSessionService } from '../auth/admin-sessions.service';
import type { ApiKeyService } from '../auth/api-keys.service';
import { safeEqual } from '../auth/management-token';
import type { ApiKeyRecord } from '../auth/api-key.repository';
import { sendError } from './error-handler';
import { apiKeyIdentity, type AuthThrottle, clientIp, MANAGEMENT_IDENTITY, sendThrottled, type ThrottleVerdict } from './auth-throttle';

/** The operators' browser session cookie (its value is a random session id, see AdminSessionService). */
export const MGMT_COOKIE = 'engram_mgmt';
/** Path of the session cookie: the whole site, so /admin and /dashboard share one session. */
export const MGMT_COOKIE_PATH = '/';
/** Where the cookie lived before sessions were server-side; cleared so a stale copy never shadows the new one. */
const LEGACY_COOKIE_PATH = '/admin';

/**
 * The header a browser session must send on /api (with any value): a custom header is not "simple", so a
 * cross-site page cannot attach it without a CORS preflight, which Engram never grants. SameSite=Strict
 * already keeps the cookie off cross-site requests; this is the second, independent CSRF defence.
 */
export const CSRF_HEADER = 'x-engram-csrf';

/** Clears the session cookie (and its legacy /admin copy). */
export function clearSessionCookie(res: Response): void {
  res.clearCookie(MGMT_COOKIE, { path: MGMT_COOKIE_PATH });
  res.clearCookie(MGMT_COOKIE, { path: LEGACY_COOKIE_PATH });
}

/** The bearer token of a request, or null. */
export function bearer(req: Request): string | null {
  const h = req.headers.authorization;
  if (typeof h !== 'string') return null;
  const m = /^Bearer\s+(.+)$/i.exec(h.trim());
  return m ? m[1].trim() : null;
}

/** Every handler requireManagement made: the OpenAPI description reads a route's audience off its own handlers (isManagementGuard). */
const MANAGEMENT_GUARDS = new WeakSet<object>();

/** Whether `fn` is a requireManagement guard. */
export function isManagementGuard(fn: unknown): boolean {
  return typeof fn === 'function' && MANAGEMENT_GUARDS.has(fn);
}

/**
 * Management auth: `Authorization: Bearer <token>`, or (where `sessions` is given: the browser pages) a live
 * session cookie; with `cookieNeedsCsrfHeader` (/api) the cookie counts only on a same-site request carrying
 * the CSRF_HEADER (403 `csrf_header_required` / `cross_site_refused` otherwise). 401 without credentials (a browser GET is redirected to `loginRedirect`), 403 for a wrong
 * token. A revoked, expired or foreign session counts as no credentials: the browser signs in again.
 */
export function requireManagement(
  token: string,
  opts: { sessions?: AdminSessionService; loginRedirect?: string; cookieNeedsCsrfHeader?: boolean; throttle?: AuthThrottle } = {},
): RequestHandler {
  const guard: RequestHandler = async (req, res, next) => {
    const header = bearer(req);
    if (header) {
      // Checked first, throttled second, nothing awaited in between (see AuthThrottle.verdict).
      const valid = safeEqual(header, token);
      const verdict = opts.throttle ? await opts.throttle.verdict(clientIp(req), valid ? MANAGEMENT_IDENTITY : null) : { blocked: false as const };
      if (verdict.blocked) return sendThrottled(res, verdict);
      if (!valid) return sendError(res, 403, 'forbidden', 'Invalid management token');
    } else {
      const cookie = opts.sessions ? (req.cookies?.[MGMT_COOKIE] as string | undefined) : undefined;
      if (cookie && opts.cookieNeedsCsrfHeader) {
        // Refused before the session is even looked up: a cookie alone (a cross-site form, an <img>) never acts here.
        if (req.headers[CSRF_HEADER] === undefined) {
          return sendError(res, 403, 'csrf_header_required', `A browser session needs the ${CSRF_HEADER} header on this path (the dashboard sends it; cross-site requests cannot)`);
        }
        const site = req.headers['sec-fetch-site'];
        if (site !== undefined && site !== 'same-origin' && site !== 'none') {
          return sendError(res, 403, 'cross_site_refused', 'A browser session is accepted from this site only');
        }
      }
      if (!cookie || !opts.sessions!.verify(cookie)) {
        if (cookie) clearSessionCookie(res);
        if (opts.loginRedirect && req.method === 'GET' && req.accepts(['json', 'html']) === 'html') return res.redirect(303, opts.loginRedirect);
        const message = cookie ? 'Session expired or signed out; sign in again' : 'Management token required (Authorization: Bearer <MANAGEMENT_TOKEN>)';
        return sendError(res, 401, 'unauthorized', message);
      }
    }
    res.locals.auth = { kind: 'management' };
    next();
  };
  MANAGEMENT_GUARDS.add(guard);
  return guard;
}

const NOT_THROTTLED: ThrottleVerdict = { blocked: false };

/** Client API key auth for /v1: Bearer egk_… (or x-api-key); 401 without and for an unknown or revoked key, as OpenAI answers. */
export function requireApiKey(keys: ApiKeyService, throttle?: AuthThrottle): RequestHandler {
  const admit = (res: Response, next: NextFunction, rec: ApiKeyRecord | null, verdict: ThrottleVerdict): void => {
    if (verdict.blocked) return sendThrottled(res, verdict);
    // Never echo what was presented.
    if (!rec) return sendError(res, 401, 'unauthorized', 'Incorrect or revoked API key provided');
    res.locals.auth = { kind: 'apiKey', key: rec };
    next();
  };
  // Not async: a working client's key is admitted in the same turn (the throttle answers a remembered pair at once).
  return (req, res, next) => {
    const presented = bearer(req) ?? (typeof req.headers['x-api-key'] === 'string' ? req.headers['x-api-key'] : null);
    if (!presented) return sendError(res, 401, 'unauthorized', "You didn't provide an API key (Authorization: Bearer <key>)");
    // Checked first, throttled second, nothing awaited in between (see AuthThrottle.verdict).
    const rec = keys.verify(presented);
    const verdict = throttle ? throttle.verdict(clientIp(req), rec ? apiKeyIdentity(rec.id) : null) : NOT_THROTTLED;
    if (verdict instanceof Promise) {
      verdict.then((v) => admit(res, next, rec, v)).catch(next);
      return;
    }
    admit(res, next, rec, verdict);
  };
}

/** The API key a /v1 request authenticated with. */
export function apiKeyOf(res: { locals: Record<string, unknown> }): ApiKeyRecord {
  const a = res.locals.auth as { kind: string; key?: ApiKeyRecord } | undefined;
  if (!a || a.kind !== 'apiKey' || !a.key) throw new Error('route is not behind requireApiKey');
  return a.key;
}
