import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import request from 'supertest';
import { resolveManagementToken } from '../../src/auth/management-token';
import { createApp } from '../../src/http/app';
import { buildApiContext } from '../../src/api';
import { createLogger } from '../../src/logger';
import { Metrics } from '../../src/metrics';
import { buildTestApi, type TestApi } from '../helpers/api';
import { TEST_TOKEN, silentLog, testEnv } from '../helpers/env';
import { concretePath, walkRoutes } from '../helpers/routes';

/** Routes that are public on purpose (they reveal no memory data). */
const PUBLIC = new Set([
  'GET /healthz',
  'GET /readyz',
  'GET /admin/login',
  'POST /admin/login',
  'POST /admin/logout',
  // The API's description and its reference page (no data).
  'GET /openapi.json',
  'GET /docs',
  'GET /docs/init.js',
  'GET /docs/assets/:file',
  // The dashboard's static files (the data comes from /api with the session).
  'GET /dashboard',
]);

describe('auth', () => {
  let t: TestApi;
  beforeAll(() => {
    t = buildTestApi();
  });
  afterAll(() => t.close());

  it('every route except the public ones refuses without credentials (401) and with a wrong token (403; 401 on /v1, as OpenAI answers)', async () => {
    const routes = walkRoutes(t.app);
    // The walk sees the routers mounted in app.ts.
    expect(routes.map((r) => `${r.method} ${r.path}`)).toEqual(expect.arrayContaining(['GET /api/memory', 'POST /api/keys', 'GET /api/jobs']));
    const guarded = routes.filter((r) => !PUBLIC.has(`${r.method} ${r.path}`));
    expect(guarded.length).toBeGreaterThan(10);
    for (const r of guarded) {
      const url = concretePath(r.path);
      const method = r.method.toLowerCase() as 'get' | 'post' | 'put' | 'delete' | 'patch';
      const none = await request(t.app)[method](url).set('accept', 'application/json');
      expect({ route: `${r.method} ${r.path}`, status: none.status }).toEqual({ route: `${r.method} ${r.path}`, status: 401 });
      const wrong = await request(t.app)[method](url).set('authorization', 'Bearer wrong-token-wrong-token').set('accept', 'application/json');
      // /v1 answers as OpenAI does and /mcp as MCP clients expect (a Bearer challenge): 401 for a wrong credential too.
      const refused = r.path.startsWith('/v1/') || r.path === '/mcp' ? 401 : 403;
      expect({ route: `${r.method} ${r.path}`, status: wrong.status }).toEqual({ route: `${r.method} ${r.path}`, status: refused });
    }
    // Unknown /api paths do not reveal themselves without credentials either.
    expect((await request(t.app).get('/api/nope')).status).toBe(401);
    // bull-board's UI and its API are covered too.
    expect((await request(t.app).get('/admin/queues/api/queues').set('accept', 'application/json')).status).toBe(401);
  });

  it('/metrics is the operator\'s (its counts cover every key): the management token, or METRICS_PUBLIC=true for a scraper that cannot send one', async () => {
    const key = t.ctx.apiKeys.create('metrics-reader').key;
    expect((await request(t.app).get('/metrics').set('authorization', `Bearer ${key}`)).status).toBe(403);
    const ok = await request(t.app).get('/metrics').set(t.auth);
    expect(ok.status).toBe(200);
    expect(ok.text).toMatch(/^# HELP engram_/m);
    const open = buildTestApi(testEnv({ METRICS_PUBLIC: 'true' }));
    try {
      const res = await request(open.app).get('/metrics');
      expect(res.status).toBe(200);
      expect(res.text).toMatch(/^# HELP engram_/m);
    } finally {
      await open.close();
    }
  });

  it('the walk fails for a router mounted without its path (so no route can hide)', () => {
    const app = createApp(t.ctx, new Metrics('api'));
    const express = require('express');
    const rogue = express.Router();
    rogue.get('/x', (_req: unknown, res: { json: (v: unknown) => void }) => res.json({}));
    const outer = express.Router();
    outer.use(rogue);
    app.use('/rogue', outer);
    expect(() => walkRoutes(app)).toThrow(/without mountPath/);
  });

  it('API keys: secret shown once, stored as sha-256, prefix for display, revocation immediate', async () => {
    const created = await request(t.app).post('/api/keys').set(t.auth).send({ name: 'laptop' });
    expect(created.status).toBe(201);
    const { id, key, prefix } = created.body;
    expect(key).toMatch(/^egk_[A-Za-z0-9_-]{40,}$/);
    expect(key.startsWith(prefix)).toBe(true);
    const list = await request(t.app).get('/api/keys').set(t.auth);
    expect(JSON.stringify(list.body)).not.toContain(key);
    expect(list.body.keys.find((k: { id: string }) => k.id === id)).toMatchObject({ name: 'laptop', prefix, revokedAt: null });
    expect(t.ctx.apiKeys.verify(key)?.id).toBe(id);
    const row = t.ctx.db.db.prepare('SELECT secret_hash FROM api_keys WHERE id = ?').get(id) as { secret_hash: string };
    expect(row.secret_hash).toMatch(/^[0-9a-f]{64}$/);
    expect((await request(t.app).delete(`/api/keys/${id}`).set(t.auth)).body.key.revokedAt).toEqual(expect.any(String));
    expect(t.ctx.apiKeys.verify(key)).toBeNull();
    expect((await request(t.app).delete('/api/keys/does-not-exist').set(t.auth)).status).toBe(404);
    expect((await request(t.app).post('/api/keys').set(t.auth).send({ name: '' })).status).toBe(400);
    // The secret is nowhere in the database files (main file and WAL).
    t.ctx.db.db.pragma('wal_checkpoint(PASSIVE)');
    for (const f of [t.ctx.db.file, `${t.ctx.db.file}-wal`]) {
      if (fs.existsSync(f)) expect(fs.readFileSync(f).includes(Buffer.from(key))).toBe(false);
    }
  });

  it('never logs keys or the management token', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(chunk.toString());
        cb();
      },
    });
    const env = testEnv({ LOG_LEVEL: 'trace' });
    const log = createLogger('trace', 'engram-api', sink);
    const ctx = buildApiContext(env, log);
    const app = createApp(ctx, new Metrics('api'));
    const created = await request(app).post('/api/keys').set('authorization', `Bearer ${TEST_TOKEN}`).send({ name: 'x' });
    await request(app).get('/api/keys').set('authorization', `Bearer ${TEST_TOKEN}`);
    await request(app).get('/api/memory').set('authorization', 'Bearer wrong-token-wrong-token');
    await ctx.jobEvents.close();
    await ctx.queues.close();
    ctx.db.close();
    const all = lines.join('\n');
    expect(lines.length).toBeGreaterThan(0);
    expect(all).not.toContain(created.body.key);
    expect(all).not.toContain(TEST_TOKEN);
    expect(all).not.toContain('wrong-token-wrong-token');
  });

  it('generates a management token into DATA_DIR (0600) outside production and refuses production without one', () => {
    const env = testEnv({ MANAGEMENT_TOKEN: undefined });
    const token = resolveManagementToken({ ...env, MANAGEMENT_TOKEN: undefined }, silentLog());
    const file = path.join(env.DATA_DIR, 'management-token');
    expect(fs.readFileSync(file, 'utf8').trim()).toBe(token);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    // Stable across restarts.
    expect(resolveManagementToken({ ...env, MANAGEMENT_TOKEN: undefined }, silentLog())).toBe(token);
    expect(() => resolveManagementToken({ ...env, MANAGEMENT_TOKEN: undefined, NODE_ENV: 'production' }, silentLog())).toThrow(/MANAGEMENT_TOKEN must be set/);
  });
});
