import request from 'supertest';
import net from 'node:net';
import { BackendManager } from '../../src/backends/manager';
import { HttpBackend } from '../../src/backends/http.backend';
import { QueueLayer } from '../../src/queue/queues';
import { safeFileSegment } from '../../src/backends/safe-name';
import { OutboundPolicy, OutboundUrlError } from '../../src/net/url-policy';
import { startWorker, type RunningWorker } from '../../workers/main';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, testEnv, testRedisUrl } from '../helpers/env';
import { tempStorage } from '../helpers/storage';
import { startFakeMemoryBackend, type FakeMemoryBackend } from '../helpers/fake-memory-backend';
import { startFakeNotion, type FakeNotion } from '../helpers/fake-notion';
import { startFakeObsidian, type FakeObsidian } from '../helpers/fake-obsidian';
import { waitUntil } from '../helpers/wait';

const ctx = { source: 'api' as const };

describe('generic HTTP backend against a local service', () => {
  let fake: FakeMemoryBackend;
  const policy = new OutboundPolicy({ allowPrivate: true });
  const config = () => ({
    baseUrl: fake.baseUrl,
    apiKey: 'backend-secret-token-123456',
    headers: { 'X-Workspace': 'w-42' },
    timeoutMs: 10_000,
    maxResponseBytes: 64 * 1024,
    endpoints: {
      search: 'GET /v2/find',
      create: 'POST /v2/items',
      list: 'GET /v2/items',
      get: 'GET /v2/items/{ref}',
      update: 'PATCH /v2/items/{ref}',
      delete: 'DELETE /v2/items/{ref}',
      health: 'GET /v2/health',
    },
    pathParams: { id: 'ref' },
    queryParams: { query: 'text', q: 'text', apiKeyId: 'tenant', limit: 'max', offset: 'skip', type: 'kind', maxTokens: 'budget', strategy: 'mode' },
  });
  beforeAll(async () => {
    fake = await startFakeMemoryBackend('renamed');
  });
  afterAll(async () => {
    await policy.close();
    await fake.close();
  });
  beforeEach(() => {
    fake.requests.length = 0;
    fake.down = false;
    fake.delayMs = 0;
    fake.padBytes = 0;
  });

  it('speaks every endpoint with the templates, renamed path and query parameters, bearer and custom headers', async () => {
    const b = new HttpBackend('svc', config(), policy);
    expect(await b.health()).toMatchObject({ ok: true });
    const { memory, created } = await b.create({ apiKeyId: 't1', type: 'factual', key: 'lang', content: 'Speaks Portuguese at home' }, ctx);
    expect(created).toBe(true);
    expect(memory).toMatchObject({ apiKeyId: 't1', key: 'lang', content: 'Speaks Portuguese at home', type: 'factual' });
    const post = fake.requests.find((r) => r.method === 'POST')!;
    expect(post.path).toBe('/v2/items');
    expect(post.headers.authorization).toBe('Bearer backend-secret-token-123456');
    expect(post.headers['x-workspace']).toBe('w-42');
    expect(post.headers['content-type']).toBe('application/json');

    expect(await b.get(memory.id)).toMatchObject({ id: memory.id, content: 'Speaks Portuguese at home' });
    expect(fake.requests.at(-1)).toMatchObject({ method: 'GET', path: `/v2/items/${memory.id}` });
    expect(await b.update(memory.id, { content: 'Speaks Portuguese and Spanish' }, ctx)).toMatchObject({ content: 'Speaks Portuguese and Spanish' });
    expect(fake.requests.at(-1)).toMatchObject({ method: 'PATCH', path: `/v2/items/${memory.id}` });

    await b.create({ apiKeyId: 't2', type: 'factual', key: 'other', content: 'Another tenant speaks Spanish too' }, ctx);
    const listed = await b.list({ apiKeyId: 't1', type: 'factual' }, 10, 0);
    expect(listed).toMatchObject({ total: 1, byType: { factual: 1 } });
    expect(fake.requests.at(-1)!.query).toEqual({ tenant: 't1', kind: 'factual', max: '10', skip: '0' });

    const found = await b.search({ apiKeyId: 't1', query: 'spanish', limit: 5, maxTokens: 100, strategy: 'hybrid' });
    expect(fake.requests.at(-1)).toMatchObject({ path: '/v2/find', query: { text: 'spanish', tenant: 't1', max: '5', budget: '100', mode: 'hybrid' } });
    // The service also sent another tenant's memory: it never reaches the caller.
    expect(found.map((m) => m.apiKeyId)).toEqual(['t1']);

    expect(await b.delete(memory.id, ctx)).toBe(true);
    expect(fake.requests.at(-1)).toMatchObject({ method: 'DELETE', path: `/v2/items/${memory.id}` });
  });

  it('404 means absent: get → null, update → null, delete → false (by status code)', async () => {
    const b = new HttpBackend('svc', config(), policy);
    expect(await b.get('missing-id')).toBeNull();
    expect(await b.update('missing-id', { content: 'x' }, ctx)).toBeNull();
    expect(await b.delete('missing-id', ctx)).toBe(false);
    // Any other failure is an error, whose message names neither the URL nor the token.
    fake.down = true;
    const err = await b.get('any').catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/HTTP 500/);
    expect((err as Error).message).not.toContain('backend-secret-token');
    expect((err as Error).message).not.toContain(fake.baseUrl);
    expect(await b.health()).toMatchObject({ ok: false });
  });

  it('a slow service times out, a huge answer is cut off at the size limit', async () => {
    const b = new HttpBackend('svc', { ...config(), timeoutMs: 300 }, policy);
    fake.delayMs = 2000;
    await expect(b.get('x')).rejects.toThrow('backend svc did not answer within 300 ms');
    fake.delayMs = 0;
    fake.padBytes = 200 * 1024;
    await expect(b.list({}, 10, 0)).rejects.toThrow(/more than 65536 bytes/);
  });

  it('the outbound URL policy refuses private addresses (unless allowed) and metadata addresses always', async () => {
    const strict = new OutboundPolicy({ allowPrivate: false });
    try {
      expect(() => new HttpBackend('svc', config(), strict)).toThrow(OutboundUrlError);
      expect(() => new HttpBackend('svc', { ...config(), baseUrl: 'http://169.254.169.254/latest' }, policy)).toThrow(/metadata/);
      expect(() => new HttpBackend('svc', { ...config(), baseUrl: 'file:///etc/passwd' }, policy)).toThrow(/http or https/);
      // A public-looking name that resolves to loopback is refused at connect time (nothing reaches the service).
      const rebinding = new OutboundPolicy({ allowPrivate: false, resolver: async () => [{ address: '127.0.0.1', family: 4 }] });
      try {
        const named = new HttpBackend('svc', { ...config(), baseUrl: fake.baseUrl.replace('127.0.0.1', 'memories.example.com') }, rebinding);
        const before = fake.requests.length;
        await expect(named.get('x')).rejects.toThrow(/private, loopback or link-local/);
        expect(fake.requests.length).toBe(before);
      } finally {
        await rebinding.close();
      }
    } finally {
      await strict.close();
    }
  });
});

describe('backends built from settings, through /api/memory and the backend-sync job', () => {
  jest.setTimeout(60_000);
  let t: TestApi;
  let w: RunningWorker | null = null;
  let main: FakeMemoryBackend;
  let mirror: FakeMemoryBackend;
  let obsidian: FakeObsidian;
  let notion: FakeNotion;
  const env = testEnv({ OMNIROUTE_ALLOW_PRIVATE_PROVIDER_URLS: 'true', SETTINGS_CACHE_TTL_MS: '0', REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0' });

  beforeAll(async () => {
    [main, mirror, obsidian, notion] = await Promise.all([startFakeMemoryBackend(), startFakeMemoryBackend(), startFakeObsidian(), startFakeNotion()]);
    t = buildTestApi(env);
  });
  afterAll(async () => {
    await w?.stop();
    await t.close();
    await Promise.all([main.close(), mirror.close(), obsidian.close(), notion.close()]);
  });
  const put = (body: object) => request(t.app).put('/api/settings/memory').set(t.auth).send(body);

  it('primary failure → fallback search; a later backend-sync (retried) brings the fallback up to date', async () => {
    const settings = await put({
      primaryBackend: 'main',
      fallbackBackends: ['mirror'],
      backendConfigs: { main: { type: 'http', baseUrl: main.baseUrl, apiKey: 'main-secret-token-abcdef' }, mirror: { type: 'http', baseUrl: mirror.baseUrl } },
    });
    expect(settings.status).toBe(200);
    // Secrets are masked in the answer.
    expect(settings.body.backendConfigs.main.apiKey).toBe('***cdef');
    expect(JSON.stringify(settings.body)).not.toContain('main-secret-token');

    const created = await request(t.app).post('/api/memory').set(t.auth).send({ apiKeyId: 'tenant-a', key: 'city', content: 'Lives in Lisbon' });
    expect(created.status).toBe(201);
    const id = created.body.memory.id as string;
    expect(main.store.get(id)).toMatchObject({ content: 'Lives in Lisbon' });
    // The local store was not written: the primary is the remote service.
    expect(t.ctx.memory.findByKey('tenant-a', 'city')).toBeNull();
    // The mirror has nothing until a worker runs the backend-sync job, which fails once (503) and is retried.
    expect(mirror.store.size).toBe(0);
    mirror.failNext = 1;
    w = await startWorker(env, silentLog());
    await waitUntil(() => mirror.store.get(id)?.content === 'Lives in Lisbon', 20_000, 'the mirror to get the memory');
    expect(mirror.store.get(id)!.id).toBe(id);
    expect(mirror.failNext).toBe(0); // the first attempt met the 503 and was retried

    // The primary goes down: search answers from the fallback; get falls back too.
    main.down = true;
    const r = await t.ctx.backends.search({ apiKeyId: 'tenant-a', query: 'Lisbon' });
    expect(r.backend).toBe('mirror');
    expect(r.memories.map((m) => m.content)).toEqual(['Lives in Lisbon']);
    expect((await request(t.app).get(`/api/memory/${id}`).set(t.auth)).body.memory.content).toBe('Lives in Lisbon');
    // Writes need the primary: a fast 503, nothing changed.
    const refused = await request(t.app).put(`/api/memory/${id}`).set(t.auth).send({ content: 'Moved to Porto' });
    expect(refused.status).toBe(503);
    expect(refused.body.error.message).toMatch(/memory backend "main" failed: backend main: HTTP 500/);
    expect(main.store.get(id)!.content).toBe('Lives in Lisbon');

    // Back up: an update goes to the primary, and backend-sync brings the mirror up to date later.
    main.down = false;
    const upd = await request(t.app).put(`/api/memory/${id}`).set(t.auth).send({ content: 'Moved to Porto' });
    expect(upd.status).toBe(200);
    await waitUntil(() => mirror.store.get(id)?.content === 'Moved to Porto', 20_000, 'the mirror to follow the update');
    main.down = true;
    const again = await t.ctx.backends.search({ apiKeyId: 'tenant-a', query: 'Porto' });
    expect(again).toMatchObject({ backend: 'mirror', memories: [{ content: 'Moved to Porto' }] });
    main.down = false;

    // A delete reaches the mirror the same way.
    expect((await request(t.app).delete(`/api/memory/${id}`).set(t.auth)).status).toBe(200);
    await waitUntil(() => !mirror.store.has(id), 20_000, 'the mirror to drop the memory');

    const health = await request(t.app).get('/api/memory/backends').set(t.auth);
    expect(health.body).toMatchObject({ primary: 'main', fallbacks: ['mirror'], health: { main: { ok: true, role: 'primary' }, mirror: { ok: true, role: 'fallback' } } });
  });

  it('SQLite as the fallback of a remote primary keeps the primary’s ids: search falls back to it, deletes reach it', async () => {
    expect((await put({ primaryBackend: 'main', fallbackBackends: ['sqlite'] })).status).toBe(200);
    const created = await request(t.app).post('/api/memory').set(t.auth).send({ apiKeyId: 'tenant-l', key: 'sport', content: 'Plays padel on Thursdays' });
    const id = created.body.memory.id as string;
    await waitUntil(() => t.ctx.memory.get(id)?.content === 'Plays padel on Thursdays', 20_000, 'the local copy');
    main.down = true;
    const r = await t.ctx.backends.search({ apiKeyId: 'tenant-l', query: 'padel' });
    expect(r).toMatchObject({ backend: 'sqlite', memories: [{ id, content: 'Plays padel on Thursdays' }] });
    main.down = false;
    expect((await request(t.app).delete(`/api/memory/${id}`).set(t.auth)).status).toBe(200);
    await waitUntil(() => t.ctx.memory.get(id) === null, 20_000, 'the local copy to go');
    expect(t.ctx.memory.history(id).map((e) => e.op)).toEqual(['create', 'delete']);
  });

  it('with SQLite primary every committed local change (API, MCP, extraction) reaches the fallback by backend-sync', async () => {
    expect((await put({ primaryBackend: 'sqlite', fallbackBackends: ['mirror'] })).status).toBe(200);
    const created = await request(t.app).post('/api/memory').set(t.auth).send({ apiKeyId: 'tenant-s', key: 'pet', content: 'Has a cat named Miso' });
    const id = created.body.memory.id as string;
    expect(t.ctx.memory.get(id)).not.toBeNull();
    await waitUntil(() => mirror.store.get(id)?.content === 'Has a cat named Miso', 20_000, 'the mirror to get the local memory');
    // A change made straight on the service (as extraction does) follows too.
    t.ctx.memory.update(id, { content: 'Has two cats' }, { source: 'extraction' });
    await waitUntil(() => mirror.store.get(id)?.content === 'Has two cats', 20_000, 'the mirror to follow a service-level change');
    t.ctx.memory.delete(id, { source: 'api' });
    await waitUntil(() => !mirror.store.has(id), 20_000, 'the mirror to drop it');
    expect((await put({ primaryBackend: 'main', fallbackBackends: ['mirror'] })).status).toBe(200);
  });

  it('settings naming an unusable backend are refused with the path, and nothing is stored', async () => {
    const bad = await put({ primaryBackend: 'obsidian', backendConfigs: { obsidian: { baseUrl: 'http://169.254.169.254/', apiKey: 'k' } } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details[0]).toMatchObject({ path: 'body.backendConfigs.obsidian' });
    expect(bad.body.error.message).toMatch(/metadata/);
    const unknown = await put({ primaryBackend: 'nowhere' });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.details[0]).toMatchObject({ path: 'body.primaryBackend', message: 'no entry for "nowhere" in backendConfigs' });
    expect((await request(t.app).get('/api/settings/memory').set(t.auth)).body.primaryBackend).toBe('main');
  });

  it('an Obsidian backend built from settings stores notes in its folder, a hostile key becomes a safe file name', async () => {
    const res = await put({ primaryBackend: 'obsidian', fallbackBackends: [], backendConfigs: { obsidian: { baseUrl: obsidian.baseUrl, apiKey: obsidian.apiKey, folder: 'Memories' } } });
    expect(res.status).toBe(200);
    // Round-tripping the masked settings keeps the real key.
    expect((await put({ backendConfigs: res.body.backendConfigs })).status).toBe(200);

    const created = await request(t.app).post('/api/memory').set(t.auth).send({ apiKeyId: 'tenant-o', key: '../../x', content: 'A note that tried to escape' });
    expect(created.status).toBe(201);
    const put1 = obsidian.requests.find((r) => r.method === 'PUT')!;
    expect(put1.authorization).toBe(`Bearer ${obsidian.apiKey}`);
    const safe = safeFileSegment('../../x');
    expect(safe).toMatch(/^x-[0-9a-f]{8}$/);
    expect(put1.path).toBe(`/vault/Memories/tenant-o/${safe}.md`);
    expect([...obsidian.files.keys()]).toEqual([`Memories/tenant-o/${safe}.md`]);
    for (const r of obsidian.requests) expect(r.path.split('/')).not.toContain('..');
    // Windows-hostile characters and reserved names are made safe too.
    expect(safeFileSegment('user:pref')).toMatch(/^user_pref-[0-9a-f]{8}$/);
    expect(safeFileSegment('CON')).toMatch(/^_CON-[0-9a-f]{8}$/);
    expect(safeFileSegment('.hidden')).toMatch(/^hidden-[0-9a-f]{8}$/);
    expect(safeFileSegment('plain_key')).toBe('plain_key');

    const id = created.body.memory.id as string;
    const got = await request(t.app).get(`/api/memory/${id}`).set(t.auth);
    expect(got.body.memory).toMatchObject({ id, key: '../../x', apiKeyId: 'tenant-o', content: 'A note that tried to escape' });
    const upd = await request(t.app).put(`/api/memory/${id}`).set(t.auth).send({ content: 'Still inside the folder' });
    expect(upd.body.memory.content).toBe('Still inside the folder');
    await request(t.app).post('/api/memory').set(t.auth).send({ apiKeyId: 'tenant-o', key: 'drink', type: 'episodic', content: 'Ordered a flat white' });
    await request(t.app).post('/api/memory').set(t.auth).send({ apiKeyId: 'tenant-p', key: 'drink', content: 'Another tenant drinks tea' });
    const list = await request(t.app).get('/api/memory?apiKeyId=tenant-o').set(t.auth);
    expect(list.body.total).toBe(2);
    expect(list.body.data.map((m: { key: string }) => m.key).sort()).toEqual(['../../x', 'drink']);
    const found = await t.ctx.backends.search({ apiKeyId: 'tenant-o', query: 'white' });
    expect(found.memories.map((m) => m.key)).toEqual(['drink']);
    expect((await t.ctx.backends.search({ apiKeyId: 'tenant-o', query: 'tea' })).memories).toEqual([]);
    expect((await request(t.app).delete(`/api/memory/${id}`).set(t.auth)).status).toBe(200);
    expect(obsidian.files.has(`Memories/tenant-o/${safe}.md`)).toBe(false);
    expect((await request(t.app).get(`/api/memory/${id}`).set(t.auth)).status).toBe(404);
  });

  it('a Notion backend built from settings speaks Notion’s own API (pages, database query, archive)', async () => {
    const res = await put({
      primaryBackend: 'notion',
      backendConfigs: { notion: { baseUrl: notion.baseUrl, apiKey: notion.token, databaseId: notion.databaseId } },
    });
    expect(res.status).toBe(200);
    const long = 'N'.repeat(4500);
    const created = await request(t.app).post('/api/memory').set(t.auth).send({ apiKeyId: 'tenant-n', key: 'essay', content: long, metadata: { a: 1 } });
    expect(created.status).toBe(201);
    const id = created.body.memory.id as string;
    expect(notion.requests.every((r) => r.version === '2022-06-28' && r.authorization === `Bearer ${notion.token}`)).toBe(true);
    expect((await request(t.app).get(`/api/memory/${id}`).set(t.auth)).body.memory).toMatchObject({ id, key: 'essay', content: long, metadata: { a: 1 } });
    // Upsert by key: the same page.
    const again = await request(t.app).post('/api/memory').set(t.auth).send({ apiKeyId: 'tenant-n', key: 'essay', content: 'short now' });
    expect(again.body).toMatchObject({ created: false, memory: { id, content: 'short now' } });
    expect(notion.pages.size).toBe(1);
    await request(t.app).post('/api/memory').set(t.auth).send({ apiKeyId: 'tenant-m', key: 'x', content: 'other tenant short note' });
    expect((await request(t.app).get('/api/memory?apiKeyId=tenant-n').set(t.auth)).body.total).toBe(1);
    expect((await t.ctx.backends.search({ apiKeyId: 'tenant-n', query: 'short' })).memories.map((m) => m.id)).toEqual([id]);
    expect((await request(t.app).put(`/api/memory/${id}`).set(t.auth).send({ type: 'procedural' })).body.memory.type).toBe('procedural');
    expect((await request(t.app).delete(`/api/memory/${id}`).set(t.auth)).status).toBe(200);
    expect([...notion.pages.values()].find((p) => p.archived)).toBeDefined();
    expect((await request(t.app).get(`/api/memory/${id}`).set(t.auth)).status).toBe(404);
    // Back to the local store.
    expect((await put({ primaryBackend: 'sqlite' })).status).toBe(200);
  });
});

describe('a change committed while Redis is down (worker side)', () => {
  it('keeps its backend-sync in the SQLite outbox, and a flush delivers it', async () => {
    const dead = await new Promise<number>((resolve) => {
      const srv = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = srv.address() as net.AddressInfo;
        srv.close(() => resolve(port));
      });
    });
    const env = testEnv({ REDIS_URL: `redis://127.0.0.1:${dead}`, OMNIROUTE_ALLOW_PRIVATE_PROVIDER_URLS: 'true', SETTINGS_CACHE_TTL_MS: '0' });
    const s = tempStorage(env);
    const down = new QueueLayer(env, silentLog(), s.db.db, 'worker');
    const policy = new OutboundPolicy({ allowPrivate: true });
    const manager = new BackendManager({ memory: s.memory, settings: s.settings, queues: down, policy, log: silentLog() });
    const up = new QueueLayer(testEnv({ QUEUE_PREFIX: env.QUEUE_PREFIX }), silentLog(), s.db.db, 'worker');
    try {
      s.settings.updateMemory({ fallbackBackends: ['mirror'], backendConfigs: { mirror: { type: 'http', baseUrl: 'http://127.0.0.1:9' } } });
      expect(manager.describe()).toMatchObject({ primary: 'sqlite', fallbacks: ['mirror'] });
      // As extraction does in a worker: a change straight on the service.
      const { memory } = s.memory.create({ apiKeyId: 'k', type: 'factual', key: 'a', content: 'made while Redis was away' }, { source: 'extraction' });
      await waitUntil(() => down.outboxCount() === 1, 10_000, 'the sync to reach the outbox');
      expect(up.env.REDIS_URL).toBe(testRedisUrl());
      const flushed = await up.flushOutbox();
      expect(flushed).toMatchObject({ moved: 1, remaining: 0 });
      const [job] = await up.queue('maintenance').getJobs(['waiting', 'prioritized', 'delayed']);
      expect(job).toMatchObject({ name: 'backend-sync', data: { backendId: 'mirror', memoryId: memory.id } });
    } finally {
      await manager.shutdown();
      await down.close();
      await up.queue('maintenance').obliterate({ force: true });
      await up.close();
      s.close();
    }
  });
});
