import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { Job } from 'bullmq';
import request from 'supertest';
import type { Memory } from '../../src/memory/types';
import { startWorker, type RunningWorker } from '../../workers/main';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, tempDir, testEnv } from '../helpers/env';
import { waitUntil } from '../helpers/wait';

const QUIET = { REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0', COMPACT_EVERY_MS: '0' };

async function finished(t: TestApi, jobId: string): Promise<Job> {
  return waitUntil(
    async () => {
      const job = await t.ctx.queues.queue('import').getJob(jobId);
      const state = await job?.getState();
      if (state === 'failed') throw new Error(`job failed: ${job?.failedReason}`);
      return state === 'completed' ? t.ctx.queues.queue('import').getJob(jobId) : null;
    },
    30_000,
    `import job ${jobId}`,
  );
}

const all = (t: TestApi, apiKeyId: string): Memory[] =>
  t.ctx.memory.list({ apiKeyId }, 1000, 0).data.sort((a, b) => (a.id < b.id ? -1 : 1));

const importsDir = (t: TestApi) => path.join(t.env.DATA_DIR, 'imports');
const uploadsLeft = (t: TestApi) => (fs.existsSync(importsDir(t)) ? fs.readdirSync(importsDir(t)).filter((f) => !f.endsWith('.keys.tsv')) : []);

/** An Engram with a worker over its own data dir and queue prefix. */
async function engram(extra: Record<string, string> = {}): Promise<{ t: TestApi; w: RunningWorker }> {
  const env = testEnv({ ...QUIET, ...extra });
  const t = buildTestApi(env);
  const w = await startWorker(env, silentLog());
  return { t, w };
}

describe('export and import', () => {
  let src: { t: TestApi; w: RunningWorker };
  let dst: { t: TestApi; w: RunningWorker };

  beforeAll(async () => {
    src = await engram();
    dst = await engram({ IMPORT_MAX_BYTES: '65536' });
  });
  afterAll(async () => {
    for (const e of [src, dst]) {
      await e.w.stop();
      await e.t.close();
    }
  });

  function seedSource() {
    const m = src.t.ctx.memory;
    const ctx = { source: 'api' as const };
    m.create({ apiKeyId: 'exp-a', type: 'factual', key: 'lang', content: 'Prefers TypeScript over Python.', metadata: { category: 'preference', nested: { a: [1, 2] } } }, ctx);
    m.create({ apiKeyId: 'exp-a', sessionId: 'sess-1', type: 'episodic', key: 'trip', content: 'Went to Lisbon in May.\nIt rained — a lot ☔.', metadata: {} }, ctx);
    m.create({ apiKeyId: 'exp-a', type: 'procedural', key: '', content: 'Deploys with `make ship`.', expiresAt: new Date(Date.now() + 30 * 86_400_000).toISOString() }, ctx);
    const sem = m.create({ apiKeyId: 'exp-a', type: 'semantic', key: 'unicode', content: 'Nom: Zoë Ğüneş, 東京' }, ctx).memory;
    m.recordAccess([sem.id, sem.id], '2026-05-01T00:00:00.000Z');
    m.create({ apiKeyId: 'exp-b', type: 'factual', key: 'secret', content: 'Tenant B only.' }, ctx);
  }

  it('export → import into a fresh data dir reproduces the same memories; importing again changes nothing', async () => {
    seedSource();
    const exp = await request(src.t.app).get('/api/memory/export').query({ apiKeyId: 'exp-a' }).set(src.t.auth).buffer(true).parse((res, cb) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => cb(null, text));
    });
    expect(exp.status).toBe(200);
    expect(exp.headers['content-type']).toMatch(/^application\/x-ndjson/);
    expect(exp.headers['content-disposition']).toMatch(/^attachment; filename="engram-exp-a-\d{4}-\d{2}-\d{2}\.ndjson"$/);
    const text = exp.body as string;
    const lines = text.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).toHaveLength(4);
    expect(lines.every((l) => l.apiKeyId === 'exp-a')).toBe(true);
    expect(text).not.toMatch(/Tenant B/);
    expect(Object.keys(lines[0]).sort()).toEqual(
      ['accessCount', 'apiKeyId', 'content', 'createdAt', 'expiresAt', 'id', 'key', 'lastAccessedAt', 'lastAssertedAt', 'metadata', 'reassertCount', 'sessionId', 'type', 'updatedAt'].sort(),
    );

    const up = await request(dst.t.app).post('/api/memory/import').set(dst.t.auth).set('content-type', 'application/x-ndjson').send(text);
    expect(up.status).toBe(202);
    expect(up.body).toMatchObject({ jobId: `import-${up.body.uploadId}`, queue: 'import', format: 'ndjson', bytes: Buffer.byteLength(text) });
    const job = await finished(dst.t, up.body.jobId);
    expect(job.returnvalue).toMatchObject({ total: 4, processed: 4, created: 4, updated: 0, unchanged: 0, failed: 0, embedsQueued: 4 });
    expect(job.progress).toMatchObject({ phase: 'importing', done: 4, total: 4 });

    // Same ids, keys, contents, types, metadata, timestamps, sessions, access counters.
    expect(all(dst.t, 'exp-a')).toEqual(all(src.t, 'exp-a'));
    expect(all(dst.t, 'exp-b')).toEqual([]);
    const history = dst.t.ctx.memory.history(lines[0].id);
    expect(history).toHaveLength(1);
    expect(history[0]).toMatchObject({ op: 'import', source: 'import', jobId: up.body.jobId });
    expect(uploadsLeft(dst.t)).toEqual([]);

    const again = await request(dst.t.app).post('/api/memory/import').set(dst.t.auth).set('content-type', 'application/x-ndjson').send(text);
    const job2 = await finished(dst.t, again.body.jobId);
    expect(job2.returnvalue).toMatchObject({ created: 0, updated: 0, unchanged: 4, failed: 0, embedsQueued: 0 });
    expect(dst.t.ctx.memory.history(lines[0].id)).toHaveLength(1);
    expect(all(dst.t, 'exp-a')).toEqual(all(src.t, 'exp-a'));
  });

  it('a malformed NDJSON line is reported with its number and the others land', async () => {
    const body = [
      JSON.stringify({ id: '11111111-1111-4111-8111-111111111111', apiKeyId: 'nd', type: 'factual', key: 'one', content: 'Line one is fine.' }),
      '{"apiKeyId": "nd", "content": ', // broken JSON
      '',
      JSON.stringify({ apiKeyId: 'nd', type: 'factual', key: 'three', content: 'No id: one is derived.' }),
      JSON.stringify({ apiKeyId: 'nd', type: 'opinion', key: 'four', content: 'Bad type.' }),
      JSON.stringify({ apiKeyId: 'nd', type: 'factual', key: 'five', content: '' }),
      JSON.stringify({ apiKeyId: 'nd', type: 'factual', key: 'six', content: 'Mixed timestamps.', createdAt: '2025-06-01 10:20:30', updatedAt: 1751364030 }),
    ].join('\n');
    const up = await request(dst.t.app).post('/api/memory/import').set(dst.t.auth).set('content-type', 'application/x-ndjson').send(body);
    const job = await finished(dst.t, up.body.jobId);
    expect(job.returnvalue).toMatchObject({ created: 3, failed: 3 });
    expect(job.returnvalue.errors.map((e: { line: number }) => e.line)).toEqual([2, 5, 6]);
    expect(job.returnvalue.errors[0].error).toMatch(/invalid JSON/);
    expect(job.returnvalue.errors[1].error).toMatch(/^type: /);
    expect(job.returnvalue.errors[2].error).toMatch(/^content: /);
    const rows = all(dst.t, 'nd');
    expect(rows.map((r) => r.key).sort()).toEqual(['one', 'six', 'three']);
    expect(rows.find((r) => r.key === 'six')).toMatchObject({ createdAt: '2025-06-01T10:20:30.000Z', updatedAt: '2025-07-01T10:00:30.000Z' });
  });

  it('an upload over IMPORT_MAX_BYTES is a 413 and nothing is stored (declared length, and a chunked body found too large while streaming)', async () => {
    const before = dst.t.ctx.memory.count();
    const counts = async () => dst.t.ctx.queues.queue('import').getJobCounts('waiting', 'active', 'completed', 'failed', 'delayed');
    const jobsBefore = await counts();
    const line = `${JSON.stringify({ apiKeyId: 'big', type: 'factual', content: 'x'.repeat(900) })}\n`;
    const big = line.repeat(80); // ~73 KB > 64 KiB
    const res = await request(dst.t.app).post('/api/memory/import').set(dst.t.auth).set('content-type', 'application/x-ndjson').send(big);
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('payload_too_large');

    // Chunked: no content-length, so the limit is found while streaming to disk.
    const server = dst.t.app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    try {
      const status = await new Promise<number>((resolve, reject) => {
        const req = http.request(
          { host: '127.0.0.1', port: (server.address() as AddressInfo).port, path: '/api/memory/import', method: 'POST', headers: { ...dst.t.auth, 'content-type': 'application/x-ndjson', 'transfer-encoding': 'chunked' } },
          (r) => {
            r.resume();
            resolve(r.statusCode ?? 0);
          },
        );
        req.on('error', (err: NodeJS.ErrnoException) => (err.code === 'EPIPE' || err.code === 'ECONNRESET' ? undefined : reject(err)));
        let sent = 0;
        const pump = () => {
          while (sent < 80) {
            sent++;
            if (!req.write(line)) return void req.once('drain', pump);
          }
          req.end();
        };
        pump();
      });
      expect(status).toBe(413);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
    expect(uploadsLeft(dst.t)).toEqual([]);
    expect(dst.t.ctx.memory.count()).toBe(before);
    expect(await counts()).toEqual(jobsBefore);
  });

  it('refuses a JSON body (already parsed, not a file) with 415, and an empty upload with 400', async () => {
    const json = await request(dst.t.app).post('/api/memory/import').set(dst.t.auth).send({ apiKeyId: 'x' });
    expect(json.status).toBe(415);
    const empty = await request(dst.t.app).post('/api/memory/import').set(dst.t.auth).set('content-type', 'application/x-ndjson').send('');
    expect(empty.status).toBe(400);
    const badMap = await request(dst.t.app).post('/api/memory/import?map=nothing').set(dst.t.auth).set('content-type', 'application/x-ndjson').send('{}');
    expect(badMap.status).toBe(400);
    expect(badMap.body.error.details[0].path).toMatch(/^query\.map/);
    expect(uploadsLeft(dst.t)).toEqual([]);
  });

  it("imports the original product's database: NULL memory_id, bad metadata JSON, mixed timestamps, unknown type; owners mapped or given new keys; a second import changes nothing", async () => {
    const file = path.join(tempDir('orig'), 'storage.sqlite');
    const db = new Database(file);
    // The original's `memories` table as digest §1.1 describes it (015 + 023 + 083 + 111).
    db.exec(`
      CREATE TABLE memories (
        id TEXT PRIMARY KEY, api_key_id TEXT NOT NULL, session_id TEXT,
        type TEXT NOT NULL CHECK(type IN ('factual','episodic','procedural','semantic')),
        key TEXT, content TEXT NOT NULL, metadata TEXT,
        created_at TEXT NOT NULL DEFAULT (datetime('now')), updated_at TEXT NOT NULL DEFAULT (datetime('now')), expires_at TEXT,
        memory_id INTEGER, needs_reindex INTEGER NOT NULL DEFAULT 0, access_count INTEGER NOT NULL DEFAULT 0, last_accessed_at TEXT);
      CREATE INDEX idx_memories_api_key ON memories(api_key_id);
      CREATE UNIQUE INDEX idx_memories_memory_id ON memories(memory_id);
    `);
    const ins = db.prepare('INSERT INTO memories (id, api_key_id, session_id, type, key, content, metadata, created_at, updated_at, expires_at, memory_id, access_count) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)');
    ins.run('aaaaaaaa-0000-4000-8000-000000000001', 'orig-1', 's1', 'factual', 'likes_tea', 'User likes green tea.', '{"category":"preference"}', '2026-03-01T08:00:00.000Z', '2026-03-02T08:00:00.000Z', null, 1, 3);
    ins.run('aaaaaaaa-0000-4000-8000-000000000002', 'orig-1', null, 'episodic', 'visited', 'Visited Porto last spring.', null, '2025-06-01 10:20:30', '2025-06-01 10:20:30', '2099-01-01 00:00:00', null, 0);
    ins.run('aaaaaaaa-0000-4000-8000-000000000003', 'orig-2', '', 'semantic', 'bio', 'Works as a nurse.', '{broken json', '2026-01-05 00:00:00', '2026-01-05T00:00:00Z', null, null, 0);
    db.pragma('ignore_check_constraints = 1');
    ins.run('aaaaaaaa-0000-4000-8000-000000000004', 'orig-2', null, 'preference', 'color', 'Favourite colour is teal.', '{}', '2026-02-01T00:00:00.000Z', '2026-02-01T00:00:00.000Z', null, 4, 1);
    db.pragma('ignore_check_constraints = 0');
    ins.run('aaaaaaaa-0000-4000-8000-000000000005', '', null, 'semantic', '', 'Resumo de 2 memórias (>30 dias):', null, '2026-04-01 12:00:00', '2026-04-01 12:00:00', null, 5, 0);
    ins.run('aaaaaaaa-0000-4000-8000-000000000006', 'orig-1', null, 'factual', 'empty', '', null, '2026-04-01 12:00:00', '2026-04-01 12:00:00', null, 6, 0);
    db.close();

    const bytes = fs.readFileSync(file);
    const post = () => request(dst.t.app).post('/api/memory/import?map=orig-1=engram-1').set(dst.t.auth).set('content-type', 'application/octet-stream').send(bytes);
    const up = await post();
    expect(up.status).toBe(202);
    expect(up.body.format).toBe('sqlite');
    const job = await finished(dst.t, up.body.jobId);
    const r = job.returnvalue;
    expect(r).toMatchObject({ format: 'sqlite', total: 6, created: 5, failed: 1, errors: [{ line: 6, error: 'content is empty' }] });
    expect(r.ownerKeys['orig-1']).toBe('engram-1');
    expect(r.createdKeys.map((k: { owner: string }) => k.owner).sort()).toEqual(['', 'orig-2']);
    // Secrets of the new keys are in a 0600 file under DATA_DIR/imports, never in the job result.
    expect(fs.statSync(r.keysFile).mode & 0o777).toBe(0o600);
    const keysText = fs.readFileSync(r.keysFile, 'utf8');
    expect(keysText).toMatch(/^orig-2\t[0-9a-f-]{36}\tegk_/m);
    const secrets = keysText.trim().split('\n').map((l) => l.split('\t')[2]);
    expect(secrets).toHaveLength(2);
    for (const secret of secrets) {
      expect(JSON.stringify(r)).not.toContain(secret);
      // The secret works: it authenticates as the key the owner's memories went to.
      expect(dst.t.ctx.apiKeys.verify(secret)?.id).toBe(r.ownerKeys[keysText.split('\n').find((l) => l.endsWith(secret))!.split('\t')[0]]);
    }

    const one = all(dst.t, 'engram-1');
    expect(one.map((m) => m.key).sort()).toEqual(['likes_tea', 'visited']);
    expect(one.find((m) => m.key === 'likes_tea')).toMatchObject({ id: 'aaaaaaaa-0000-4000-8000-000000000001', sessionId: 's1', metadata: { category: 'preference' }, createdAt: '2026-03-01T08:00:00.000Z', accessCount: 3 });
    expect(one.find((m) => m.key === 'visited')).toMatchObject({ createdAt: '2025-06-01T10:20:30.000Z', expiresAt: '2099-01-01T00:00:00.000Z', sessionId: '' });
    const orig2Key = r.ownerKeys['orig-2'];
    expect(dst.t.ctx.apiKeys.get(orig2Key)).toMatchObject({ name: 'import:orig-2' });
    const two = all(dst.t, orig2Key);
    expect(two.find((m) => m.key === 'bio')).toMatchObject({ type: 'semantic', metadata: { legacyMetadata: '{broken json' }, createdAt: '2026-01-05T00:00:00.000Z' });
    expect(two.find((m) => m.key === 'color')).toMatchObject({ type: 'factual', metadata: { originalType: 'preference' }, accessCount: 1 });
    expect(r.warnings.map((w: { line: number }) => w.line).sort()).toEqual([3, 4]);
    // The original's owner-less row gets a key of its own; it is never merged into another tenant.
    expect(all(dst.t, r.ownerKeys[''])).toHaveLength(1);
    expect(uploadsLeft(dst.t)).toEqual([]);

    const again = await finished(dst.t, (await post()).body.jobId);
    expect(again.returnvalue).toMatchObject({ created: 0, updated: 0, unchanged: 5, failed: 1, createdKeys: [] });
    expect(again.returnvalue.ownerKeys['orig-2']).toBe(orig2Key);
  });

  it('an imported id that belongs to another tenant is refused for that line (tenants never merge)', async () => {
    const owned = dst.t.ctx.memory.create({ apiKeyId: 'owner-x', type: 'factual', key: 'mine', content: 'Belongs to X.' }, { source: 'api' }).memory;
    const body = `${JSON.stringify({ id: owned.id, apiKeyId: 'owner-y', type: 'factual', key: 'mine', content: 'Y tries to take it.' })}\n`;
    const up = await request(dst.t.app).post('/api/memory/import').set(dst.t.auth).set('content-type', 'application/x-ndjson').send(body);
    const job = await finished(dst.t, up.body.jobId);
    expect(job.returnvalue).toMatchObject({ created: 0, failed: 1, errors: [{ line: 1, error: 'the id belongs to a memory of another API key' }] });
    expect(dst.t.ctx.memory.get(owned.id)).toMatchObject({ apiKeyId: 'owner-x', content: 'Belongs to X.' });
  });

  it('GET /api/memory/export needs an apiKeyId (400 with the zod path); /export is not read as a memory id', async () => {
    const res = await request(src.t.app).get('/api/memory/export').set(src.t.auth);
    expect(res.status).toBe(400);
    expect(res.body.error.details[0].path).toBe('query.apiKeyId');
    const none = await request(src.t.app).get('/api/memory/export').query({ apiKeyId: 'nobody' }).set(src.t.auth);
    expect(none.status).toBe(200);
    expect(none.text).toBe('');
  });
});
