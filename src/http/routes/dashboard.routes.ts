import fs from 'node:fs';
import path from 'node:path';
import express, { Router, type RequestHandler } from 'express';
import { sendError } from '../error-handler';
import { documented } from '../route-doc';

/**
 * What the dashboard's page may do: its own scripts, styles and API only. No inline script or style
 * element, no other origin, never framed (clickjacking), forms post only here.
 */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
  "form-action 'self'",
].join('; ');

const DASHBOARD_DOC = {
  summary: 'Memory Studio, the operators’ dashboard (static page; its data comes from /api under the session)',
  responses: {
    200: { description: 'The page', contentType: 'text/html' },
    301: { description: 'Redirect to the trailing-slash URL its relative assets need' },
    503: { description: 'Not built yet: run `npm run build`' },
  },
};

const securityHeaders: RequestHandler = (_req, res, next) => {
  res.setHeader('content-security-policy', DASHBOARD_CSP);
  res.setHeader('x-content-type-options', 'nosniff');
  res.setHeader('x-frame-options', 'DENY');
  res.setHeader('referrer-policy', 'no-referrer');
  next();
};

/**
 * /dashboard: Memory Studio's static files as `npm run build` wrote them into `dir` (index.html, hashed
 * assets/). Hashed assets are cached for a year, index.html is revalidated every time. The page holds no
 * data: everything it shows comes from /api under the operator's session. Before a build, a 503 says so.
 */
export function dashboardRoutes(dir: string): Router & { mountPath?: string } {
  const r = Router();
  r.use(securityHeaders);
  const index = path.join(dir, 'index.html');
  const built = () => fs.existsSync(index);

  r.get('/', documented(DASHBOARD_DOC, (req, res, next) => {
    // Relative asset URLs need the trailing slash: /dashboard → /dashboard/ (query kept).
    if (!req.originalUrl.split('?')[0].endsWith('/')) {
      const q = req.originalUrl.indexOf('?');
      return res.redirect(301, `${req.baseUrl}/${q >= 0 ? req.originalUrl.slice(q) : ''}`);
    }
    if (!built()) return sendError(res, 503, 'dashboard_not_built', 'The dashboard is not built: run `npm run build`');
    res.setHeader('cache-control', 'no-cache');
    res.sendFile(index, (err) => {
      if (err) next(err);
    });
  }));
  r.use(
    '/assets',
    express.static(path.join(dir, 'assets'), {
      index: false,
      fallthrough: true,
      immutable: true,
      maxAge: '365d',
      dotfiles: 'ignore',
    }),
  );
  r.use((req, res) => sendError(res, 404, 'not_found', `No dashboard file ${req.path}`));
  return r;
}
