import crypto from 'node:crypto';
import fs from 'node:fs';
import http, { type Server } from 'node:http';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { AddressInfo } from 'node:net';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import request from 'supertest';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, tempDir, testEnv } from '../helpers/env';
import { tempStorage } from '../helpers/storage';
import { waitUntil } from '../helpers/wait';
import { startWorker, type RunningWorker } from '../../workers/main';
import { callTool, httpMcpClient } from '../helpers/mcp-client';
import { BackendManager } from '../../src/backends/manager';
import { HttpBackend } from '../../src/backends/http.backend';
import { QueueLayer } from '../../src/queue/queues';
import { OutboundPolicy } from '../../src/net/url-policy';
import { startFakeMemoryBackend, type FakeMemoryBackend } from '../helpers/fake-memory-backend';

/**
 * Review of issues 12, 13 and 16 together: defects found where the merged branches meet.
 */
describe('MCP over a remote primary whose listing ignores the tenant filter', () => {
  jest.setTimeout(30_000);
  let t: TestApi;
  let server: Server;
  let url: string;
  let remote: FakeMemoryBackend;
  const clients: Client[] = [];

  beforeAll(async () => {
    remote = await startFakeMemoryBackend();
    t = buildTestApi(testEnv({ OMNIROUTE_ALLOW_PRIVATE_PROVIDER_URLS: 'true', SETTINGS_CACHE_TTL_MS: '0' }));
    server = await new Promise<Server>((resolve) => {
      const s = t.app.listen(0, '127.0.0.1', () => resolve(s));
    });
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  });
  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await new Promise<void>((r) => server.close(() => r()));
    await t.close();
    await remote.close();
  });

  it('a client key clears and lists only its own memories, whatever the service sends back', async () => {
    const a = t.ctx.apiKeys.create('a');
    const b = t.ctx.apiKeys.create('b');
    // A service that names the tenant parameter differently from the config: it gets no tenant and lists everyone's.
    const put = await request(t.app)
      .put('/api/settings/memory')
      .set(t.auth)
      .send({ primaryBackend: 'svc', fallbackBackends: [], backendConfigs: { svc: { type: 'http', baseUrl: remote.baseUrl, queryParams: { apiKeyId: 'owner' } } } });
    expect(put.status).toBe(200);
    const mine = await request(t.app).post('/api/memory').set(t.auth).send({ apiKeyId: a.id, key: 'mine', content: 'A owns this' });
    const theirs = await request(t.app).post('/api/memory').set(t.auth).send({ apiKeyId: b.id, key: 'theirs', content: 'B owns this' });
    expect([mine.status, theirs.status]).toEqual([201, 201]);

    const c = await httpMcpClient(url, a.key);
    clients.push(c);
    const listed = await c.listResources();
    expect(listed.resources.map((r) => r.uri)).toEqual([`memory://${mine.body.memory.id}`]);

    const cleared = await callTool(c, 'omniroute_memory_clear', {});
    expect(cleared.json).toEqual({ success: true, data: { deletedCount: 1, message: 'Cleared 1 memories' } });
    // B's memory is still there.
    expect(remote.store.has(theirs.body.memory.id)).toBe(true);
    expect(remote.store.has(mine.body.memory.id)).toBe(false);
  });
});

describe('import and restore keep every id with its tenant', () => {
  jest.setTimeout(60_000);
  let t: TestApi;
  let w: RunningWorker;

  beforeAll(async () => {
    const env = testEnv({ REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0', COMPACT_EVERY_MS: '0' });
    t = buildTestApi(env);
    w = await startWorker(env, silentLog());
  });
  afterAll(async () => {
    await w.stop();
    await t.close();
  });

  const importText = async (text: string) => {
    const up = await request(t.app).post('/api/memory/import').set(t.auth).set('content-type', 'application/x-ndjson').send(text);
    expect(up.status).toBe(202);
    return waitUntil(
      async () => {
        const job = await t.ctx.queues.queue('import').getJob(up.body.jobId as string);
        const state = await job?.getState();
        if (state === 'failed') throw new Error(`job failed: ${job?.failedReason}`);
        return state === 'completed' ? job!.returnvalue : null;
      },
      30_000,
      'the import job',
    );
  };

  it('an imported id of another tenant’s deleted memory is refused, so that memory stays restorable to its owner', async () => {
    const ctx = { source: 'api' as const };
    const gone = t.ctx.memory.create({ apiKeyId: 'owner-x', type: 'factual', key: 'diary', content: 'X wrote this and deleted it.' }, ctx).memory;
    expect(t.ctx.memory.delete(gone.id, ctx)).toBe(true);
    const result = await importText(`${JSON.stringify({ id: gone.id, apiKeyId: 'owner-y', type: 'factual', key: 'diary', content: 'Y takes the id over.' })}\n`);
    expect(result).toMatchObject({ created: 0, failed: 1, errors: [{ line: 1, error: 'the id belongs to a memory of another API key' }] });
    // The id's history is X's alone, and restore brings X's memory back to X.
    expect(t.ctx.memory.history(gone.id).every((e) => (e.before ?? e.after)!.apiKeyId === 'owner-x')).toBe(true);
    const restored = await request(t.app).post(`/api/memory/${gone.id}/restore`).set(t.auth);
    expect(restored.status).toBe(200);
    expect(restored.body.memory).toMatchObject({ id: gone.id, apiKeyId: 'owner-x', content: 'X wrote this and deleted it.' });
  });
});

describe('export stream', () => {
  jest.setTimeout(60_000);
  let t: TestApi;
  let server: Server;

  beforeAll(async () => {
    t = buildTestApi();
    server = await new Promise<Server>((resolve) => {
      const s = t.app.listen(0, '127.0.0.1', () => resolve(s));
    });
  });
  afterAll(async () => {
    await new Promise<void>((r) => server.close(() => r()));
    await t.close();
  });

  /** Whether a reader still holds a WAL snapshot: a TRUNCATE checkpoint reports busy while one does. */
  const readerHoldsSnapshot = () => {
    t.ctx.memory.create({ apiKeyId: 'probe', type: 'factual', key: `p${Math.random()}`, content: 'a write for the checkpoint' }, { source: 'api' });
    const [r] = t.ctx.db.db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[];
    return r.busy !== 0;
  };

  it('a client that leaves mid-export releases the export’s read-only connection', async () => {
    const pad = 'x'.repeat(2000);
    const items = Array.from({ length: 4000 }, (_, i) => ({ apiKeyId: 'big', type: 'factual' as const, key: `k${i}`, content: `memory ${i} ${pad}` }));
    for (let i = 0; i < items.length; i += 1000) t.ctx.memory.upsertMany(items.slice(i, i + 1000), { source: 'api' }, 'create');
    expect(readerHoldsSnapshot()).toBe(false);
    const port = (server.address() as AddressInfo).port;
    await new Promise<void>((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port, path: '/api/memory/export?apiKeyId=big', headers: t.auth }, (res) => {
        expect(res.statusCode).toBe(200);
        res.once('data', () => {
          // The export holds its own connection while it streams; the client goes away after the first chunk.
          expect(readerHoldsSnapshot()).toBe(true);
          req.destroy();
          resolve();
        });
      });
      req.on('error', () => undefined);
      req.setTimeout(10_000, () => reject(new Error('no data')));
    });
    await waitUntil(() => !readerHoldsSnapshot(), 10_000, 'the export to release its read snapshot');
  });
});

describe('import, summarize and restore with SQLite primary and a remote fallback', () => {
  jest.setTimeout(90_000);
  let t: TestApi;
  let w: RunningWorker;
  let mirror: FakeMemoryBackend;

  beforeAll(async () => {
    mirror = await startFakeMemoryBackend();
    const env = testEnv({ OMNIROUTE_ALLOW_PRIVATE_PROVIDER_URLS: 'true', SETTINGS_CACHE_TTL_MS: '0', REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0', COMPACT_EVERY_MS: '0' });
    t = buildTestApi(env);
    w = await startWorker(env, silentLog());
  });
  afterAll(async () => {
    await w.stop();
    await t.close();
    await mirror.close();
  });

  const jobDone = (queue: 'import' | 'summarize', jobId: string) =>
    waitUntil(
      async () => {
        const job = await t.ctx.queues.queue(queue).getJob(jobId);
        const state = await job?.getState();
        if (state === 'failed') throw new Error(`job failed: ${job?.failedReason}`);
        return state === 'completed' ? job!.returnvalue : null;
      },
      30_000,
      `${queue} job`,
    );

  it('every change they make reaches the fallback through backend-sync (the service hook, in the worker too)', async () => {
    const put = await request(t.app).put('/api/settings/memory').set(t.auth).send({ primaryBackend: 'sqlite', fallbackBackends: ['mirror'], backendConfigs: { mirror: { type: 'http', baseUrl: mirror.baseUrl } } });
    expect(put.status).toBe(200);
    const old = '2025-01-15T10:00:00.000Z';
    const ids = [crypto.randomUUID(), crypto.randomUUID()];
    const text = ids.map((id, i) => JSON.stringify({ id, apiKeyId: 'hooked', type: 'factual', key: `k${i}`, content: `Imported fact ${i}.`, createdAt: old, updatedAt: old })).join('\n');
    const up = await request(t.app).post('/api/memory/import').set(t.auth).set('content-type', 'application/x-ndjson').send(text);
    expect(await jobDone('import', up.body.jobId)).toMatchObject({ created: 2 });
    await waitUntil(() => ids.every((id) => mirror.store.has(id)), 20_000, 'the imported memories on the fallback');

    const sum = await request(t.app).post('/api/memory/summarize').set(t.auth).send({ apiKeyId: 'hooked', olderThanDays: 30 });
    const result = (await jobDone('summarize', sum.body.jobId)) as { summaryIds: string[] };
    await waitUntil(() => mirror.store.has(result.summaryIds[0]) && ids.every((id) => !mirror.store.has(id)), 20_000, 'the summary on the fallback, the originals gone');

    expect((await request(t.app).post(`/api/memory/${ids[0]}/restore`).set(t.auth)).status).toBe(200);
    await waitUntil(() => mirror.store.get(ids[0])?.content === 'Imported fact 0.', 20_000, 'the restored memory on the fallback');
  });
});

describe('an uploaded database of the original product', () => {
  jest.setTimeout(60_000);
  let t: TestApi;
  let w: RunningWorker;

  beforeAll(async () => {
    const env = testEnv({ REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0', COMPACT_EVERY_MS: '0' });
    t = buildTestApi(env);
    w = await startWorker(env, silentLog());
  });
  afterAll(async () => {
    await w.stop();
    await t.close();
  });

  it('whose `memories` is a view (SQL that would run in the worker: a recursive one never ends) is refused, not read', async () => {
    const file = path.join(tempDir('orig'), 'view.sqlite');
    const db = new Database(file);
    // Bounded here; without its LIMIT the same view would block the worker's event loop for good.
    db.exec(`CREATE VIEW memories AS
      WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 50)
      SELECT 'id-' || i AS id, 'owner' AS api_key_id, NULL AS session_id, 'factual' AS type, 'k' || i AS key, 'generated ' || i AS content,
             NULL AS metadata, datetime('now') AS created_at, datetime('now') AS updated_at, NULL AS expires_at, NULL AS memory_id, 0 AS access_count, NULL AS last_accessed_at
      FROM n`);
    db.close();
    const up = await request(t.app).post('/api/memory/import?map=owner=viewer').set(t.auth).set('content-type', 'application/octet-stream').send(fs.readFileSync(file));
    expect(up.status).toBe(202);
    expect(up.body.format).toBe('sqlite');
    const reason = await waitUntil(
      async () => {
        const job = await t.ctx.queues.queue('import').getJob(up.body.jobId as string);
        const state = await job?.getState();
        if (state === 'completed') throw new Error('the view was imported');
        return state === 'failed' ? job!.failedReason : null;
      },
      30_000,
      'the import job to fail',
    );
    expect(reason).toMatch(/memories is not a table/);
    expect(t.ctx.memory.list({ apiKeyId: 'viewer' }, 10, 0).total).toBe(0);
    // A file that can never be imported is not kept either.
    expect(fs.readdirSync(path.join(t.env.DATA_DIR, 'imports'))).toEqual([]);
  });
});

describe('generic HTTP backend ids', () => {
  it('an id that is a dot segment ("." or "..", e.g. memory://.. from a client key) is absent and never becomes another path of the service', async () => {
    const fake = await startFakeMemoryBackend();
    const policy = new OutboundPolicy({ allowPrivate: true });
    try {
      const b = new HttpBackend('svc', { baseUrl: `${fake.baseUrl}/tenants/acme`, apiKey: 'svc-token-0123456789' }, policy);
      for (const id of ['..', '.']) {
        expect(await b.get(id)).toBeNull();
        expect(await b.update(id, { content: 'x' }, { source: 'api' })).toBeNull();
        expect(await b.delete(id, { source: 'api' })).toBe(false);
      }
      expect(fake.requests.map((r) => `${r.method} ${r.path}`)).toEqual([]);
    } finally {
      await policy.close();
      await fake.close();
    }
  });
});

describe('MCP clear over a remote primary that lists pages as bare arrays (no total)', () => {
  jest.setTimeout(60_000);
  let t: TestApi;
  let server: Server;
  let remote: FakeMemoryBackend;
  let client: Client | null = null;

  beforeAll(async () => {
    remote = await startFakeMemoryBackend();
    remote.listAsArray = true;
    t = buildTestApi(testEnv({ OMNIROUTE_ALLOW_PRIVATE_PROVIDER_URLS: 'true', SETTINGS_CACHE_TTL_MS: '0' }));
    server = await new Promise<Server>((resolve) => {
      const s = t.app.listen(0, '127.0.0.1', () => resolve(s));
    });
  });
  afterAll(async () => {
    await client?.close().catch(() => undefined);
    await new Promise<void>((r) => server.close(() => r()));
    await t.close();
    await remote.close();
  });

  it('removes every match, not the first page only', async () => {
    const a = t.ctx.apiKeys.create('arrays');
    expect((await request(t.app).put('/api/settings/memory').set(t.auth).send({ primaryBackend: 'svc', fallbackBackends: [], backendConfigs: { svc: { type: 'http', baseUrl: remote.baseUrl } } })).status).toBe(200);
    for (let i = 0; i < 450; i++) {
      const id = crypto.randomUUID();
      remote.store.set(id, { id, apiKeyId: a.id, type: 'factual', key: `k${i}`, content: `memory ${i}`, createdAt: new Date().toISOString() });
    }
    client = await httpMcpClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, a.key);
    const cleared = await callTool(client, 'omniroute_memory_clear', {});
    expect(cleared.json).toEqual({ success: true, data: { deletedCount: 450, message: 'Cleared 450 memories' } });
    expect(remote.store.size).toBe(0);
  });
});

describe('shutdown of the backend manager', () => {
  it('waits for the backend-sync jobs of changes already committed, so the store can close after it without losing one', async () => {
    const env = testEnv({ SETTINGS_CACHE_TTL_MS: '0', OMNIROUTE_ALLOW_PRIVATE_PROVIDER_URLS: 'true' });
    const s = tempStorage(env);
    const queues = new QueueLayer(env, silentLog(), s.db.db, 'worker');
    const manager = new BackendManager({ memory: s.memory, settings: s.settings, queues, policy: new OutboundPolicy({ allowPrivate: true }), log: silentLog() });
    s.settings.updateMemory({ fallbackBackends: ['mirror'], backendConfigs: { mirror: { type: 'http', baseUrl: 'http://127.0.0.1:9' } } });
    const n = 300;
    // As an import batch in a worker: one transaction, then the hook enqueues one backend-sync per memory.
    s.memory.upsertMany(Array.from({ length: n }, (_, i) => ({ apiKeyId: 'k', type: 'factual' as const, key: `k${i}`, content: `memory ${i}` })), { source: 'import' }, 'import');
    // The worker's shutdown order: backends, queues, sqlite.
    await manager.shutdown();
    await queues.close();
    s.close();

    const again = tempStorage(env);
    const check = new QueueLayer(env, silentLog(), again.db.db, 'worker');
    try {
      const queued = await check.queue('maintenance').getJobCountByTypes('waiting', 'prioritized', 'delayed');
      expect(queued + check.outboxCount()).toBe(n);
    } finally {
      await check.queue('maintenance').obliterate({ force: true });
      await check.close();
      again.close();
    }
  });
});
