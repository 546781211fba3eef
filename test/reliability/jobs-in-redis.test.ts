import type { Redis } from 'ioredis';
import request from 'supertest';
import { JOBS, type JobName } from '../../src/queue/jobs';
import { QUEUE_NAMES } from '../../src/config/queue-names';
import { startWorker, type RunningWorker } from '../../workers/main';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, testEnv } from '../helpers/env';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream';
import { waitUntil } from '../helpers/wait';

/**
 * Issue #15, item 4d: what the jobs leave in Redis, read from the raw keys. Markers are planted in
 * every kind of user text (an earlier chat turn, the last user turn, the assistant's reply, a memory
 * written through the API, an imported row); the scan then says where each one appears. Only the
 * extraction job may carry chat text (the last user turn, bounded), and only until it has run.
 * Every job carries bounded retention options, so completed and failed jobs do not pile up.
 */

const OLD_TURN = 'oldturnmarkerqqz';
const USER = 'usermarkerqqz';
const ASSISTANT = 'assistantmarkerqqz';
const API_MEMORY = 'apimemorymarkerqqz';
const IMPORTED = 'importmarkerqqz';
const MARKERS = [OLD_TURN, USER, ASSISTANT, API_MEMORY, IMPORTED];

/** Every key under the prefix with everything it holds, as text. */
async function dumpRedis(redis: Redis, prefix: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      const type = await redis.type(key);
      let text = '';
      if (type === 'hash') text = JSON.stringify(await redis.hgetall(key));
      else if (type === 'string') text = (await redis.get(key)) ?? '';
      else if (type === 'list') text = JSON.stringify(await redis.lrange(key, 0, -1));
      else if (type === 'set') text = JSON.stringify(await redis.smembers(key));
      else if (type === 'zset') text = JSON.stringify(await redis.zrange(key, 0, -1));
      else if (type === 'stream') text = JSON.stringify(await redis.xrange(key, '-', '+'));
      out.set(key, text);
    }
  } while (cursor !== '0');
  return out;
}

/** The job hashes: `<prefix>:<queue>:<id>` with a `name` and a `data` field. */
async function jobHashes(redis: Redis, prefix: string): Promise<{ key: string; name: string; data: Record<string, unknown>; opts: Record<string, unknown> }[]> {
  const out = [];
  for (const [key] of await dumpRedis(redis, prefix)) {
    if ((await redis.type(key)) !== 'hash') continue;
    const h = await redis.hgetall(key);
    if (!h.name || h.data === undefined || !QUEUE_NAMES.some((q) => key.startsWith(`${prefix}:${q}:`))) continue;
    out.push({ key, name: h.name, data: JSON.parse(h.data) as Record<string, unknown>, opts: JSON.parse(h.opts ?? '{}') as Record<string, unknown> });
  }
  return out;
}

/** A retention option that keeps a bounded number of jobs for a bounded time (true = removed at once). */
function bounded(opt: unknown): boolean {
  if (opt === true) return true;
  if (typeof opt === 'number') return opt >= 0 && opt <= 10_000;
  if (opt && typeof opt === 'object') {
    const o = opt as { age?: number; count?: number };
    return typeof o.age === 'number' && o.age <= 30 * 24 * 3600 && typeof o.count === 'number' && o.count <= 10_000;
  }
  return false;
}

const where = (dump: Map<string, string>, marker: string) => [...dump].filter(([, v]) => v.includes(marker)).map(([k]) => k);

describe('job payloads and retention in Redis (raw keys)', () => {
  let t: TestApi;
  let fake: FakeUpstream;
  let worker: RunningWorker | null = null;
  let key: { id: string; key: string };

  beforeAll(async () => {
    fake = await startFakeUpstream();
    t = buildTestApi(testEnv({ UPSTREAM_BASE_URL: `${fake.url}/v1`, UPSTREAM_API_KEY: 'upstream-secret', REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0', COMPACT_EVERY_MS: '0' }));
    await waitUntil(() => t.ctx.queues.isReady(), 10_000, 'redis');
    t.ctx.settings.updateMemory({ enabled: true });
    key = t.ctx.apiKeys.create('redis-payloads');
  });
  afterAll(async () => {
    await worker?.stop();
    await Promise.allSettled(t.ctx.queues.allQueues().map((q) => q.obliterate({ force: true })));
    await t.close();
    await fake.close();
  });

  it('queued jobs carry ids and flags; chat text only in extract-facts (the last user turn, bounded); retention bounded on every job', async () => {
    const redis = t.ctx.queues.connection;
    const prefix = t.env.QUEUE_PREFIX;
    const mgmt = { authorization: 'Bearer test-management-token-0123456789' };

    // A chat whose history holds an earlier turn, a long last turn and an assistant reply, each marked.
    fake.plan({ reply: `Sure, noted: ${ASSISTANT} is remembered.` });
    const longTail = ' and more words'.repeat(8000); // ~120k characters: over the 64k the job may carry
    const chat = await request(t.app)
      .post('/v1/chat/completions')
      .set({ authorization: `Bearer ${key.key}` })
      .send({
        model: 'gpt-4o-mini',
        messages: [
          { role: 'user', content: `Earlier I said ${OLD_TURN} matters.` },
          { role: 'assistant', content: 'Ok.' },
          { role: 'user', content: `${longTail}. I prefer ${USER} tea over coffee.` },
        ],
      });
    expect(chat.status).toBe(200);

    // A memory written through the API (an embed-memory job), its export imported back with new text (an import job).
    const created = await request(t.app).post('/api/memory').set(mgmt).send({ apiKeyId: key.id, key: 'note:1', content: `The ${API_MEMORY} project ships on Friday.` });
    expect(created.status).toBe(201);
    const exported = await request(t.app).get(`/api/memory/export?apiKeyId=${key.id}`).set(mgmt).buffer(true).parse((res, cb) => {
      let s = '';
      res.on('data', (d: Buffer) => (s += d.toString()));
      res.on('end', () => cb(null, s));
    });
    const ndjson = String(exported.body).split(API_MEMORY).join(IMPORTED);
    expect(ndjson).toContain(IMPORTED);
    expect((await request(t.app).post('/api/memory/import').set({ ...mgmt, 'content-type': 'application/x-ndjson' }).send(ndjson)).status).toBe(202);
    expect((await request(t.app).post('/api/memory/summarize').set(mgmt).send({ apiKeyId: key.id, olderThanDays: 1 })).status).toBe(202);
    expect((await request(t.app).post('/api/memory/compact').set(mgmt).send({ apiKeyId: key.id })).status).toBe(202);
    expect((await request(t.app).post('/api/memory/reindex').set(mgmt).send({ force: true })).status).toBe(202);

    const names = await waitUntil(async () => {
      const js = await jobHashes(redis, prefix);
      const n = new Set(js.map((j) => j.name));
      return ['extract-facts', 'embed-memory', 'import-memories', 'summarize-older-than', 'compact-memories', 'reindex'].every((x) => n.has(x)) ? n : null;
    }, 10_000, 'every job kind queued');
    expect(names.size).toBeGreaterThanOrEqual(6);

    const jobs = await jobHashes(redis, prefix);
    for (const j of jobs) {
      // Only the fields the job map declares (strict schemas), and retention bounded for completed and failed jobs.
      const spec = JOBS[j.name as JobName];
      expect(spec).toBeDefined();
      const declared = Object.keys((spec.schema as unknown as { shape: Record<string, unknown> }).shape);
      expect(Object.keys(j.data).filter((k) => !declared.includes(k))).toEqual([]);
      expect({ job: j.name, removeOnComplete: bounded(j.opts.removeOnComplete), removeOnFail: bounded(j.opts.removeOnFail) }).toEqual({ job: j.name, removeOnComplete: true, removeOnFail: true });
    }
    const extract = jobs.filter((j) => j.name === 'extract-facts');
    expect(extract).toHaveLength(1);
    expect(String(extract[0].data.userText).length).toBeLessThanOrEqual(65_536);
    expect(extract[0].data.assistantText).toBeUndefined(); // extractFromAssistant is off: the reply does not travel

    const dump = await dumpRedis(redis, prefix);
    expect(where(dump, USER)).toEqual([extract[0].key]);
    // The marker appears once in that job: the payload is not duplicated elsewhere in the hash.
    expect(dump.get(extract[0].key)!.split(USER).length - 1).toBe(1);
    for (const m of [OLD_TURN, ASSISTANT, API_MEMORY, IMPORTED]) expect({ marker: m, keys: where(dump, m) }).toEqual({ marker: m, keys: [] });
  });

  it('after the jobs ran, no user text is left in Redis (extract-facts is removed once done) and nothing failed', async () => {
    worker = await startWorker(t.env, silentLog());
    const redis = t.ctx.queues.connection;
    const prefix = t.env.QUEUE_PREFIX;
    await waitUntil(async () => {
      const counts = await Promise.all(t.ctx.queues.allQueues().map((q) => q.getJobCounts('waiting', 'active', 'prioritized', 'delayed', 'waiting-children')));
      return counts.every((c) => Object.values(c).every((n) => n === 0));
    }, 30_000, 'queues drained');
    // The extraction ran: its fact is in SQLite.
    expect(t.ctx.memory.list({ apiKeyId: key.id }, 100, 0).data.some((m) => m.content.includes(USER))).toBe(true);
    const failed = await Promise.all(t.ctx.queues.allQueues().map((q) => q.getFailed()));
    expect(failed.flat().map((j) => `${j.name}: ${j.failedReason}`)).toEqual([]);
    const dump = await dumpRedis(redis, prefix);
    for (const m of MARKERS) expect({ marker: m, keys: where(dump, m) }).toEqual({ marker: m, keys: [] });
  });
});
