import fs from 'node:fs';
import path from 'node:path';
import { Router, type Express } from 'express';
import { z } from 'zod';
import { buildOpenApi } from '../openapi';
import { documented } from '../route-doc';

/** The Swagger UI files /docs serves, from the swagger-ui-dist package (no CDN). */
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};
const assetParams = z.object({ file: z.enum(Object.keys(ASSETS) as [string, ...string[]]) });

function assetDir(): string {
  return path.dirname(require.resolve('swagger-ui-dist/package.json'));
}

/** Engram's version, from the nearest package.json named engram above this file (source or dist). */
function engramVersion(): string {
  for (let dir = __dirname, i = 0; i < 6; i++, dir = path.dirname(dir)) {
    try {
      const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'engram' && pkg.version) return pkg.version;
    } catch {
      // not here
    }
  }
  return '0.0.0';
}

const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Engram API reference</title>
<link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head><body><div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/swagger-ui-standalone-preset.js"></script>
<script src="/docs/init.js"></script>
</body></html>`;

const INIT = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: '/openapi.json',
    dom_id: '#swagger-ui',
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    layout: 'StandaloneLayout',
    validatorUrl: null,
    persistAuthorization: false
  });
});
`;

/** GET /openapi.json (generated from the app's own routes and schemas) and /docs (Swagger UI from local files). Public: they hold no data. */
export function docsRoutes(getApp: () => Express): Router {
  const r = Router();
  let cached: unknown = null;
  r.get(
    '/openapi.json',
    documented(
      { summary: 'This OpenAPI 3.1 document', responses: { 200: { description: 'The document, generated from the routes and the zod schemas they validate with' } } },
      (_req, res) => {
        cached ??= buildOpenApi(getApp(), { version: engramVersion() });
        res.json(cached);
      },
    ),
  );
  r.get(
    '/docs',
    documented({ summary: 'API reference page (Swagger UI, served locally)', responses: { 200: { description: 'HTML page', contentType: 'text/html' } } }, (_req, res) => {
      res.type('html').send(PAGE);
    }),
  );
  r.get(
    '/docs/init.js',
    documented({ summary: 'The reference page’s start-up script', responses: { 200: { description: 'JavaScript', contentType: 'text/javascript' } } }, (_req, res) => {
      res.type('text/javascript').send(INIT);
    }),
  );
  r.get(
    '/docs/assets/:file',
    documented(
      { summary: 'Swagger UI files (from the swagger-ui-dist package)', responses: { 200: { description: 'The file', contentType: 'application/octet-stream' }, 404: { description: 'No such asset' } } },
      (req, res) => {
        const p = assetParams.safeParse(req.params);
        if (!p.success) {
          res.status(404).json({ error: { code: 'not_found', message: 'No such asset', details: null }, requestId: res.locals.requestId ?? null });
          return;
        }
        res.setHeader('cache-control', 'public, max-age=86400');
        res.type(ASSETS[p.data.file]).sendFile(path.join(assetDir(), p.data.file));
      },
      { params: assetParams },
    ),
  );
  return r;
}
