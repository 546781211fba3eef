import crypto from 'node:crypto';
import type { Request, RequestHandler } from 'express';
import type { ApiKeyService } from '../auth/api-keys.service';
import { safeEqual } from '../auth/management-token';
import type { ApiKeyRecord } from '../auth/api-key.repository';
import { sendError } from './error-handler';

export const MGMT_COOKIE = 'engram_mgmt';

/** The admin login cookie's value: derived from the token, so the token itself never sits in a cookie. */
export function adminSessionValue(token: string): string {
  return crypto.createHmac('sha256', token).update('engram-admin-session-v1').digest('base64url');
}

/** The bearer token of a request, or null. */
export function bearer(req: Request): string | null {
  const h = req.headers.authorization;
  if (typeof h !== 'string') return null;
  const m = /^Bearer\s+(.+)$/i.exec(h.trim());
  return m ? m[1].trim() : null;
}

/** Management auth: `Authorization: Bearer <token>` (or, on /admin, the login cookie); 401 without, 403 wrong. */
export function requireManagement(token: string, opts: { allowCookie?: boolean; loginRedirect?: string } = {}): RequestHandler {
  return (req, res, next) => {
    const header = bearer(req);
    const session = opts.allowCookie ? (req.cookies?.[MGMT_COOKIE] as string | undefined) : undefined;
    if (!header && !session) {
      if (opts.loginRedirect && req.method === 'GET' && req.accepts(['json', 'html']) === 'html') return res.redirect(303, opts.loginRedirect);
      return sendError(res, 401, 'unauthorized', 'Management token required (Authorization: Bearer <MANAGEMENT_TOKEN>)');
    }
    const ok = header ? safeEqual(header, token) : safeEqual(session!, adminSessionValue(token));
    if (!ok) return sendError(res, 403, 'forbidden', 'Invalid management token');
    res.locals.auth = { kind: 'management' };
    next();
  };
}

/** Client API key auth for /v1: Bearer egk_… (or x-api-key); 401 without and for an unknown or revoked key, as OpenAI answers. */
export function requireApiKey(keys: ApiKeyService): RequestHandler {
  return (req, res, next) => {
    const presented = bearer(req) ?? (typeof req.headers['x-api-key'] === 'string' ? req.headers['x-api-key'] : null);
    if (!presented) return sendError(res, 401, 'unauthorized', "You didn't provide an API key (Authorization: Bearer <key>)");
    const rec = keys.verify(presented);
    // Never echo what was presented.
    if (!rec) return sendError(res, 401, 'unauthorized', 'Incorrect or revoked API key provided');
    res.locals.auth = { kind: 'apiKey', key: rec };
    next();
  };
}

/** The API key a /v1 request authenticated with. */
export function apiKeyOf(res: { locals: Record<string, unknown> }): ApiKeyRecord {
  const a = res.locals.auth as { kind: string; key?: ApiKeyRecord } | undefined;
  if (!a || a.kind !== 'apiKey' || !a.key) throw new Error('route is not behind requireApiKey');
  return a.key;
}
