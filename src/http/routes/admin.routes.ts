import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import cookieParser from 'cookie-parser';
import express, { Router, type RequestHandler } from 'express';
import { z } from 'zod';
import type { ApiContext } from '../api-context';
import { safeEqual } from '../../auth/management-token';
import type { AdminSessionService } from '../../auth/admin-sessions.service';
import { MGMT_COOKIE, MGMT_COOKIE_PATH, clearSessionCookie, requireManagement } from '../auth';
import { closeIfBodyUnread, sendError } from '../error-handler';
import { clientIp, MANAGEMENT_IDENTITY, sendThrottled } from '../auth-throttle';
import { documented, type RouteDoc } from '../route-doc';
import { refuseOversizedBody } from '../validate';

/** The sign-in form's body (token + next): the only body read before authentication, so a small one. */
const LOGIN_BODY_LIMIT = 4096;

const loginBody = z.object({ token: z.string().max(512).default(''), next: z.string().max(256).optional() });

const LOGIN_DOC: RouteDoc = {
  summary: 'Sign in with the management token (opens a server-side session, HttpOnly cookie)',
  requestContentType: 'application/x-www-form-urlencoded',
  responses: {
    200: { description: 'Signed in (a JSON request, as the dashboard sends): {success, expiresAt}' },
    303: { description: 'Signed in (the HTML form): redirect to `next` (/dashboard… or /admin/queues…, else /admin/queues)' },
    403: { description: 'Wrong token (the form again, or the error shape for a JSON request)', contentType: 'text/html' },
    429: { description: 'Too many wrong tokens from this address (AUTH_FAILURE_LIMIT): Retry-After; the form again, or the error shape for a JSON request', contentType: 'text/html' },
  },
};

/** Where the login form may send the browser afterwards (never an arbitrary URL: no open redirect). */
function safeNext(next: unknown): string {
  return typeof next === 'string' && /^\/(dashboard|admin\/queues)(\/[A-Za-z0-9/_-]*)?$/.test(next) ? next : '/admin/queues';
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** Whether the caller wants JSON (the dashboard's fetch) rather than the HTML form flow. */
const wantsJson = (req: express.Request) => req.accepts(['html', 'json']) === 'json';

function loginPage(message: string | null, next = '/admin/queues'): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Engram · sign in</title>
<style>body{font-family:system-ui,sans-serif;background:#f4f5f7;display:grid;place-items:center;min-height:100vh;margin:0}
form{background:#fff;padding:2rem;border-radius:8px;box-shadow:0 1px 4px #0002;min-width:22rem}
h1{font-size:1.2rem;margin:0 0 1rem}label{display:block;margin-bottom:.4rem}input{width:100%;box-sizing:border-box;padding:.5rem;margin-bottom:1rem}
button{padding:.5rem 1rem}.err{color:#b00020;margin-bottom:1rem}</style></head>
<body><form method="post" action="/admin/login">
<h1>Engram operators</h1>
${message ? `<div class="err" role="alert">${message}</div>` : ''}
<input type="hidden" name="next" value="${escapeHtml(next)}">
<label for="token">Management token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<button type="submit">Sign in</button>
<p><small>The token is <code>MANAGEMENT_TOKEN</code>, or the file <code>DATA_DIR/management-token</code>.</small></p>
</form></body></html>`;
}

/** /admin: a login form that opens a server-side session (HttpOnly cookie), logout, then bull-board at /admin/queues for every queue. */
export function adminRoutes(ctx: ApiContext, sessions: AdminSessionService): Router {
  const r = Router();
  r.use(cookieParser());

  r.get(
    '/login',
    documented({ summary: 'Operators’ sign-in page', responses: { 200: { description: 'HTML form', contentType: 'text/html' } } }, (req, res) => {
      res.type('html').send(loginPage(null, safeNext(req.query.next)));
    }),
  );

  // The only body read before authentication: the login form itself, small.
  const loginParsers = [refuseOversizedBody(LOGIN_BODY_LIMIT, ['application/x-www-form-urlencoded', 'application/json']), express.urlencoded({ extended: false, limit: LOGIN_BODY_LIMIT }), express.json({ limit: LOGIN_BODY_LIMIT })];
  r.post('/login', ...loginParsers, documented(LOGIN_DOC, async (req, res) => {
    const body = loginBody.safeParse(req.body ?? {});
    const token = body.success ? body.data.token : '';
    const next = safeNext(body.success ? body.data.next : undefined);
    const ip = clientIp(req);
    const throttled = (verdict: { retryAfterSeconds: number }) => {
      if (wantsJson(req)) return sendThrottled(res, verdict);
      res.setHeader('retry-after', String(verdict.retryAfterSeconds));
      closeIfBodyUnread(res);
      res.status(429).type('html').send(loginPage(`Too many failed sign-ins from this address; try again in ${verdict.retryAfterSeconds} s.`, next));
    };
    // Checked first, throttled second, nothing awaited in between (see AuthThrottle.verdict); an empty token is no guess.
    const valid = token !== '' && safeEqual(token, ctx.managementToken);
    const verdict = token ? await ctx.authThrottle.verdict(ip, valid ? MANAGEMENT_IDENTITY : null) : { blocked: false as const };
    if (verdict.blocked) return throttled(verdict);
    if (!valid) {
      if (wantsJson(req)) return sendError(res, 403, 'forbidden', 'That token is not valid');
      closeIfBodyUnread(res);
      res.status(403).type('html').send(loginPage('That token is not valid.', next));
      return;
    }
    const session = sessions.create();
    res.cookie(MGMT_COOKIE, session.id, { httpOnly: true, sameSite: 'strict', path: MGMT_COOKIE_PATH, secure: req.secure, maxAge: session.maxAgeMs });
    // A cookie left at the old /admin path would be sent first and shadow this one.
    res.clearCookie(MGMT_COOKIE, { path: '/admin' });
    // The dashboard signs in with fetch and gets JSON; the HTML form is redirected.
    if (wantsJson(req)) return res.json({ success: true, expiresAt: session.expiresAt });
    res.redirect(303, next);
  }, { body: loginBody }));

  r.post('/logout', documented({ summary: 'Sign out (the server-side session is revoked)', responses: { 303: { description: 'Redirect to the sign-in page' } } }, (req, res) => {
    // Server-side: a copy of the cookie is worthless from now on.
    sessions.revoke(req.cookies?.[MGMT_COOKIE] as string | undefined);
    clearSessionCookie(res);
    if (wantsJson(req)) return res.json({ success: true });
    res.redirect(303, '/admin/login');
  }));

  const board = new ExpressAdapter();
  board.setBasePath('/admin/queues');
  createBullBoard({
    queues: ctx.queues.allQueues().map((q) => new BullMQAdapter(q)),
    serverAdapter: board,
    options: { uiConfig: { boardTitle: 'Engram jobs' } },
  });
  const boardRouter = board.getRouter() as Router & { mountPath?: string };
  boardRouter.mountPath = '/queues';
  // bull-board's API would answer a 500 with an ioredis message while Redis is down: ours is a 503 (after auth).
  const redisGuard: RequestHandler = (req, res, next) => {
    if (!/^\/api(\/|$)/i.test(req.path) || ctx.queues.isReady()) return next();
    sendError(res, 503, 'dependency_unavailable', 'Redis is unreachable; queue data is unavailable', { redis: ctx.queues.connection.status });
  };
  r.use('/queues', requireManagement(ctx.managementToken, { sessions, loginRedirect: '/admin/login', throttle: ctx.authThrottle }), redisGuard, boardRouter);
  return r;
}
