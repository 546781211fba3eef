import express from 'express';
import type { OpenAPIV3_1 } from 'openapi-types';
import request from 'supertest';
import { z } from 'zod';
import { createApp } from '../../src/http/app';
import { buildOpenApi, documentedRoutes, jsonSchemaOf } from '../../src/http/openapi';
import { routeMetaOf } from '../../src/http/route-doc';
import { handle } from '../../src/http/validate';
import { createBody, listQuery, previewBody } from '../../src/http/routes/memory.schema';
import { memorySettingsUpdateSchema } from '../../src/memory/settings';
import { Metrics } from '../../src/metrics';
import { buildTestApi, type TestApi } from '../helpers/api';
import { testEnv } from '../helpers/env';
import { validateOpenApi } from '../helpers/openapi-validate';

type Doc = OpenAPIV3_1.Document;
const oaPath = (p: string) => p.replace(/[:*]([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');

describe('GET /openapi.json and /docs', () => {
  let t: TestApi;
  let doc: Doc;
  beforeAll(async () => {
    t = buildTestApi();
    const res = await request(t.app).get('/openapi.json');
    expect(res.status).toBe(200);
    doc = res.body as Doc;
  });
  afterAll(() => t.close());

  it('is a valid OpenAPI 3.1 document (checked by swagger-parser against the 3.1 schema)', async () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(await validateOpenApi(doc)).toBeNull();
    // The validator does catch a broken document (so the check above can fail).
    expect(await validateOpenApi({ ...doc, paths: { '/x': { get: { responses: { '200': { description: 1 } } } } } })).toMatch(/./);
  });

  it('has every route of the router table, each one described by handle() or documented()', () => {
    const routes = documentedRoutes(t.app);
    expect(routes.length).toBeGreaterThan(25);
    for (const r of routes) {
      const op = doc.paths?.[oaPath(r.path)]?.[r.method.toLowerCase() as 'get'];
      expect({ route: `${r.method} ${r.path}`, documented: !!op }).toEqual({ route: `${r.method} ${r.path}`, documented: true });
      expect({ route: `${r.method} ${r.path}`, meta: r.handlers.some((h) => routeMetaOf(h) !== null) }).toEqual({ route: `${r.method} ${r.path}`, meta: true });
    }
    // And nothing else: every operation is a real route.
    const ops = Object.entries(doc.paths ?? {}).flatMap(([p, item]) => Object.keys(item ?? {}).map((m) => `${m.toUpperCase()} ${p}`));
    expect(ops.sort()).toEqual(routes.map((r) => `${r.method} ${oaPath(r.path)}`).sort());
    const ids = Object.values(doc.paths ?? {}).flatMap((item) => Object.values(item ?? {}).map((op) => (op as OpenAPIV3_1.OperationObject).operationId));
    expect(new Set(ids).size).toBe(ids.length);
    for (const must of ['GET /api/memory', 'POST /api/memory', 'GET /api/memory/{id}', 'POST /mcp', 'POST /v1/chat/completions', 'GET /api/jobs/{queue}/{id}/events', 'GET /openapi.json', 'GET /docs']) {
      expect(ops).toContain(must);
    }
  });

  it('request schemas are exactly the zod schemas the routes validate with', () => {
    const post = doc.paths!['/api/memory']!.post!;
    expect((post.requestBody as OpenAPIV3_1.RequestBodyObject).content['application/json'].schema).toEqual(jsonSchemaOf(createBody, 'input'));
    const preview = doc.paths!['/api/memory/retrieve-preview']!.post!;
    expect((preview.requestBody as OpenAPIV3_1.RequestBodyObject).content['application/json'].schema).toEqual(jsonSchemaOf(previewBody, 'input'));
    const put = doc.paths!['/api/settings/memory']!.put!;
    expect((put.requestBody as OpenAPIV3_1.RequestBodyObject).content['application/json'].schema).toEqual(jsonSchemaOf(memorySettingsUpdateSchema, 'input'));
    const list = doc.paths!['/api/memory']!.get!;
    const params = (list.parameters as OpenAPIV3_1.ParameterObject[]).map((p) => `${p.in}:${p.name}`).sort();
    expect(params).toEqual(Object.keys(listQuery.shape).map((k) => `query:${k}`).sort());
    // The schema's constraints are published: limit is a digit string in the query.
    const limit = (list.parameters as OpenAPIV3_1.ParameterObject[]).find((p) => p.name === 'limit')!;
    expect(limit.schema).toMatchObject({ type: 'string', pattern: '^\\d+$' });
  });

  it('declares the security schemes per audience, the error shape and examples', () => {
    expect(Object.keys(doc.components!.securitySchemes!).sort()).toEqual(['clientKey', 'clientKeyHeader', 'managementToken']);
    expect(doc.paths!['/api/memory']!.get!.security).toEqual([{ managementToken: [] }]);
    expect(doc.paths!['/v1/chat/completions']!.post!.security).toEqual([{ clientKey: [] }, { clientKeyHeader: [] }]);
    expect(doc.paths!['/mcp']!.post!.security).toEqual([{ clientKey: [] }, { managementToken: [] }]);
    expect(doc.paths!['/healthz']!.get!.security).toEqual([]);
    // /metrics as it is served: the management token, unless METRICS_PUBLIC opens it (then the document says so too).
    expect(doc.paths!['/metrics']!.get!.security).toEqual([{ managementToken: [] }]);
    expect(doc.components!.schemas!.Error).toMatchObject({ type: 'object', required: ['error', 'requestId'] });
    expect(doc.paths!['/api/memory']!.post!.responses!['400']).toEqual({
      description: expect.any(String),
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    });
    expect(doc.paths!['/v1/chat/completions']!.post!.responses!['401']).toMatchObject({ content: { 'application/json': { schema: { $ref: '#/components/schemas/OpenAiError' } } } });
    const created = (doc.paths!['/api/memory']!.post!.requestBody as OpenAPIV3_1.RequestBodyObject).content['application/json'];
    expect(created.example).toMatchObject({ content: expect.any(String), key: expect.any(String) });
    expect(JSON.stringify(doc.paths!['/api/memory']!.post!.responses!['201'])).toContain('"example"');
  });

  it('streaming routes declare their media type (job events are text/event-stream; chat is JSON or SSE)', () => {
    expect(Object.keys((doc.paths!['/api/jobs/{queue}/{id}/events']!.get!.responses!['200'] as OpenAPIV3_1.ResponseObject).content!)).toEqual(['text/event-stream']);
    expect(Object.keys((doc.paths!['/v1/chat/completions']!.post!.responses!['200'] as OpenAPIV3_1.ResponseObject).content!).sort()).toEqual(['application/json', 'text/event-stream']);
  });

  it('a route added later with handle() is in the document without anything else to do', () => {
    const app = createApp(t.ctx, new Metrics('api'));
    const extra = Object.assign(express.Router(), { mountPath: '/api/extra' });
    extra.post('/things/:thingId', handle({ params: z.object({ thingId: z.string() }), body: z.strictObject({ name: z.string().min(2) }) }, () => ({ ok: true })));
    // Before the app's final handlers is not needed for the walk: it reads the whole stack.
    app.use('/api/extra', extra);
    const d = buildOpenApi(app, { version: 'x' }) as unknown as Doc;
    const op = d.paths!['/api/extra/things/{thingId}']!.post!;
    expect((op.requestBody as OpenAPIV3_1.RequestBodyObject).content['application/json'].schema).toMatchObject({ properties: { name: { type: 'string', minLength: 2 } }, additionalProperties: false });
    expect((op.parameters as OpenAPIV3_1.ParameterObject[])[0]).toMatchObject({ name: 'thingId', in: 'path', required: true });
  });

  it('/docs is served from local files only (no CDN) and its assets load', async () => {
    const page = await request(t.app).get('/docs');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    expect(page.text).not.toMatch(/https?:\/\//);
    const srcs = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(srcs).toEqual(expect.arrayContaining(['/docs/assets/swagger-ui.css', '/docs/assets/swagger-ui-bundle.js', '/docs/init.js']));
    for (const s of srcs) {
      const r = await request(t.app).get(s);
      expect({ s, status: r.status }).toEqual({ s, status: 200 });
    }
    expect((await request(t.app).get('/docs/init.js')).text).toContain("url: '/openapi.json'");
    expect((await request(t.app).get('/docs/assets/..%2Fpackage.json')).status).toBe(404);
    expect((await request(t.app).get('/docs/assets/index.html')).status).toBe(404);
  });

  it('with METRICS_PUBLIC=true, /metrics is described as public, as it answers', async () => {
    const open = buildTestApi(testEnv({ METRICS_PUBLIC: 'true' }));
    try {
      const d = (await request(open.app).get('/openapi.json')).body as Doc;
      expect(d.paths!['/metrics']!.get!.security).toEqual([]);
      expect((await request(open.app).get('/metrics')).status).toBe(200);
      expect(d.paths!['/api/memory']!.get!.security).toEqual([{ managementToken: [] }]);
    } finally {
      await open.close();
    }
  });
});
