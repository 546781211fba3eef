import crypto from 'node:crypto';
import request from 'supertest';
import { buildApiContext } from '../../src/api';
import type { ApiContext } from '../../src/http/api-context';
import { createApp } from '../../src/http/app';
import { Metrics } from '../../src/metrics';
import { buildTestApi, type TestApi } from '../helpers/api';
import { TEST_TOKEN, silentLog } from '../helpers/env';
import { waitUntil } from '../helpers/wait';

/** The admin login cookie as a browser would send it back (`name=value`), plus its Set-Cookie line. */
async function login(app: Parameters<typeof request>[0], token = TEST_TOKEN): Promise<{ cookie: string; setCookie: string; value: string }> {
  const r = await request(app).post('/admin/login').type('form').send({ token });
  expect(r.status).toBe(303);
  const setCookie = (r.headers['set-cookie'] as unknown as string[]).find((c) => c.startsWith('engram_mgmt=') && !/Expires=Thu, 01 Jan 1970/.test(c))!;
  const cookie = setCookie.split(';')[0];
  return { cookie, setCookie, value: cookie.slice('engram_mgmt='.length) };
}

/** How a cookie fares on the board page (as a browser) and on the board's JSON API. */
async function access(app: Parameters<typeof request>[0], cookie: string): Promise<{ page: number | string; api: number }> {
  const page = await request(app).get('/admin/queues').set('cookie', cookie).set('accept', 'text/html');
  const api = await request(app).get('/admin/queues/api/queues').set('cookie', cookie).set('accept', 'application/json');
  return { page: page.status === 303 ? `303 ${page.headers.location}` : page.status, api: api.status };
}

const OK = { page: 200, api: 200 };
const REFUSED = { page: '303 /admin/login', api: 401 };

describe('admin sessions (D10)', () => {
  let t: TestApi;
  beforeAll(async () => {
    t = buildTestApi();
    // The queue dashboard's API reads Redis; the api's connection fails fast, so a request before it connects is a 503.
    await waitUntil(() => t.ctx.queues.isReady(), 10_000, 'api connected to its Redis');
  });
  afterAll(() => t.close());

  it('login sets a random session id (HttpOnly, SameSite=Strict, Path=/, 12 h) stored only as its sha-256', async () => {
    const a = await login(t.app);
    const b = await login(t.app);
    expect(a.setCookie).toMatch(/^engram_mgmt=[A-Za-z0-9_-]{43}; Max-Age=43200; Path=\/; Expires=[^;]+; HttpOnly; SameSite=Strict$/);
    // Random per login, never derived from the token.
    expect(a.value).not.toBe(b.value);
    expect(a.setCookie).not.toContain(TEST_TOKEN);
    const rows = t.ctx.db.db.prepare('SELECT * FROM admin_sessions').all() as Record<string, unknown>[];
    expect(JSON.stringify(rows)).not.toContain(a.value);
    const hash = crypto.createHash('sha256').update(a.value).digest('hex');
    expect(rows.map((r) => r.id_hash)).toContain(hash);
    expect(await access(t.app, a.cookie)).toEqual(OK);
    // The cookie alone never opens the JSON management API (the CSRF header is required too: dashboard-auth.test.ts).
    expect((await request(t.app).get('/api/memory').set('cookie', a.cookie)).status).toBe(403);
  });

  it('a wrong token creates no session', async () => {
    const before = (t.ctx.db.db.prepare('SELECT COUNT(*) AS n FROM admin_sessions').get() as { n: number }).n;
    const r = await request(t.app).post('/admin/login').type('form').send({ token: 'not-the-token' });
    expect(r.status).toBe(403);
    expect(r.headers['set-cookie']).toBeUndefined();
    expect((t.ctx.db.db.prepare('SELECT COUNT(*) AS n FROM admin_sessions').get() as { n: number }).n).toBe(before);
  });

  it('logout revokes the session server-side: the same cookie replayed is refused; other sessions stay', async () => {
    const mine = await login(t.app);
    const other = await login(t.app);
    expect(await access(t.app, mine.cookie)).toEqual(OK);
    const out = await request(t.app).post('/admin/logout').set('cookie', mine.cookie);
    expect(out.status).toBe(303);
    expect(out.headers.location).toBe('/admin/login');
    expect((out.headers['set-cookie'] as unknown as string[]).join('\n')).toMatch(/engram_mgmt=; Path=\/; Expires=Thu, 01 Jan 1970/);
    // A replay of the old cookie (a copy kept by someone else) no longer works.
    expect(await access(t.app, mine.cookie)).toEqual(REFUSED);
    expect(await access(t.app, other.cookie)).toEqual(OK);
  });

  it('an expired session is refused', async () => {
    const s = await login(t.app);
    expect(await access(t.app, s.cookie)).toEqual(OK);
    const hash = crypto.createHash('sha256').update(s.value).digest('hex');
    const row = t.ctx.db.db.prepare('SELECT created_at, expires_at FROM admin_sessions WHERE id_hash = ?').get(hash) as { created_at: string; expires_at: string };
    expect(Date.parse(row.expires_at) - Date.parse(row.created_at)).toBe(12 * 3600 * 1000);
    t.ctx.db.db.prepare('UPDATE admin_sessions SET expires_at = ? WHERE id_hash = ?').run(new Date(Date.now() - 1000).toISOString(), hash);
    expect(await access(t.app, s.cookie)).toEqual(REFUSED);
  });

  it('sessions that ended more than a week ago are deleted at the next login', async () => {
    const long = new Date(Date.now() - 8 * 24 * 3600 * 1000).toISOString();
    const recent = new Date(Date.now() - 3600 * 1000).toISOString();
    const insert = t.ctx.db.db.prepare('INSERT INTO admin_sessions (id_hash, token_fingerprint, created_at, expires_at, revoked_at) VALUES (?, ?, ?, ?, ?)');
    insert.run('old-expired', 'fp', long, long, null);
    insert.run('old-revoked', 'fp', long, new Date(Date.now() + 3600 * 1000).toISOString(), long);
    insert.run('recently-expired', 'fp', recent, recent, null);
    await login(t.app);
    const left = (t.ctx.db.db.prepare('SELECT id_hash FROM admin_sessions').all() as { id_hash: string }[]).map((r) => r.id_hash);
    expect(left).not.toContain('old-expired');
    expect(left).not.toContain('old-revoked');
    expect(left).toContain('recently-expired');
  });

  it('a forged or malformed cookie is refused like no cookie', async () => {
    for (const value of [crypto.randomBytes(32).toString('base64url'), 'x', 'a'.repeat(5000)]) {
      expect(await access(t.app, `engram_mgmt=${value}`)).toEqual(REFUSED);
    }
  });

  it('a session created under another management token is refused, and a token change revokes every older session', async () => {
    const old = await login(t.app);
    expect(await access(t.app, old.cookie)).toEqual(OK);
    // The same database, restarted with a new token.
    const other = 'another-management-token-0123456789';
    let ctx2: ApiContext | null = null;
    try {
      ctx2 = buildApiContext({ ...t.env, MANAGEMENT_TOKEN: other }, silentLog());
      const app2 = createApp(ctx2, new Metrics('api'));
      expect(await access(app2, old.cookie)).toEqual(REFUSED);
      const hash = crypto.createHash('sha256').update(old.value).digest('hex');
      expect((t.ctx.db.db.prepare('SELECT revoked_at FROM admin_sessions WHERE id_hash = ?').get(hash) as { revoked_at: string | null }).revoked_at).toEqual(expect.any(String));
      // A session of the new token works there and not under the old one.
      const fresh = await login(app2, other);
      await waitUntil(() => ctx2!.queues.isReady(), 10_000, 'second api connected to its Redis');
      expect(await access(app2, fresh.cookie)).toEqual(OK);
      expect(await access(t.app, fresh.cookie)).toEqual(REFUSED);
      // Nor does the old one come back on the old app.
      expect(await access(t.app, old.cookie)).toEqual(REFUSED);
    } finally {
      if (ctx2) {
        await ctx2.jobEvents.close();
        await ctx2.queues.close();
        ctx2.db.close();
      }
    }
  });
});
