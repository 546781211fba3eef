import fs from 'node:fs';
import path from 'node:path';
import { Queue } from 'bullmq';
import IORedis from 'ioredis';
import { testEnv } from '../helpers/env';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream';
import { TestRedis } from '../helpers/redis-server';
import { waitUntil } from '../helpers/wait';
import { jobCounts, startStack, type Stack } from './stack';

/**
 * Issue 15 §3, Redis faults under steady chat load, over a real api and a real worker process: Redis killed and
 * restarted with its data (AOF), killed and restarted EMPTY, and paused (`CLIENT PAUSE … ALL`). Through each the
 * proxy answers every chat (fail open); afterwards every stated fact exists exactly once (none lost, none doubled)
 * and the worker's job schedules exist again.
 */

/** Schedules the worker owns with this test's env (REPAIR_SWEEP_EVERY_MS=1000, COMPACT_EVERY_MS default on). */
const SCHEDULES = [
  { queue: 'maintenance', id: 'schedule-repair-sweep' },
  { queue: 'summarize', id: 'schedule-auto-compact' },
] as const;

const OUTAGE_MS = 3000;

describe('Redis faults under steady chat load (real api and worker processes)', () => {
  jest.setTimeout(240_000);
  let redis: TestRedis;
  let upstream: FakeUpstream;
  let stack: Stack | null = null;

  beforeAll(async () => {
    redis = await TestRedis.start({ persist: true });
    upstream = await startFakeUpstream();
  });
  afterAll(async () => {
    await stack?.stop();
    await upstream.close();
    await redis.remove();
  });

  async function schedulesPresent(env: { QUEUE_PREFIX: string }): Promise<string[]> {
    const found: string[] = [];
    for (const s of SCHEDULES) {
      const q = new Queue(s.queue, { connection: { url: redis.url, maxRetriesPerRequest: 1 }, prefix: env.QUEUE_PREFIX });
      q.on('error', () => undefined);
      try {
        if (await q.getJobScheduler(s.id)) found.push(s.id);
      } catch {
        // Redis not back yet: nothing found.
      } finally {
        await q.close();
      }
    }
    return found;
  }

  it('stop+restart with data, stop+restart empty, CLIENT PAUSE: every chat answered, every fact once, schedules back', async () => {
    const env = testEnv({ REDIS_URL: redis.url });
    stack = await startStack(env, { upstreamUrl: upstream.url, workers: 1 });
    const s = stack;
    expect(await schedulesPresent(env)).toEqual(SCHEDULES.map((x) => x.id));

    let n = 0;
    const facts: string[] = [];
    const failures: string[] = [];
    /** Chats at ~20/s from 2 clients until `until` resolves; returns how many were answered and the slowest. */
    const load = async (label: string, during: Promise<unknown>) => {
      let stop = false;
      void during.finally(() => (stop = true));
      let answered = 0;
      let sent = 0;
      let slowest = 0;
      const client = async () => {
        while (!stop) {
          const i = n++;
          sent++;
          const r = await s.chat(`I prefer tool${i} for task${i}.`);
          slowest = Math.max(slowest, r.ms);
          if (r.status === 200) {
            answered++;
            facts.push(`prefers tool${i} for task${i}`);
          } else failures.push(`${label}: chat ${i} → ${r.status} after ${r.ms} ms`);
          await new Promise((res) => setTimeout(res, 50));
        }
      };
      await Promise.all([client(), client(), during]);
      return { sent, answered, slowest };
    };
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const converge = async (label: string) => {
      const t0 = Date.now();
      let got = { total: -1, contents: [] as string[] };
      await waitUntil(async () => {
        got = await s.memories();
        return got.total >= facts.length;
      }, 90_000, `${label}: ${facts.length} facts`).catch((err: Error) => {
        const missing = facts.filter((f) => !got.contents.includes(f));
        throw new Error(`${err.message}; landed ${got.total}; missing ${missing.length}: ${missing.slice(0, 10).join(' | ')}\n${s.logs()}`);
      });
      // A little longer, so a doubled fact arriving late is seen too.
      await sleep(1500);
      got = await s.memories();
      return { landed: got.total, distinct: new Set(got.contents).size, ms: Date.now() - t0, contents: got.contents };
    };

    const rows: string[] = [];
    const phase = async (name: string, fault: () => Promise<void>) => {
      const before = await load(`${name} (before)`, sleep(1000));
      const during = await load(name, fault());
      const after = await load(`${name} (after)`, sleep(1000));
      const c = await converge(name);
      await waitUntil(async () => (await schedulesPresent(env)).length === SCHEDULES.length, 30_000, `${name}: schedules re-created`);
      const row = `| ${name} | ${during.answered}/${during.sent} | ${during.slowest} ms | ${c.landed}/${facts.length} (distinct ${c.distinct}) | ${c.ms} ms | ${SCHEDULES.length}/${SCHEDULES.length} |`;
      rows.push(row);
      console.log(row);
      expect(before.answered + after.answered).toBeGreaterThan(0);
      expect(during.sent).toBeGreaterThan(0);
      expect(failures).toEqual([]);
      expect(c.distinct).toBe(c.landed);
      expect(c.landed).toBe(facts.length);
      expect([...c.contents].sort()).toEqual([...facts].sort());
    };

    await phase('stop, restart with data', async () => {
      await redis.stop(true);
      await sleep(OUTAGE_MS);
      await redis.start();
    });

    await phase('stop, restart empty', async () => {
      await redis.stop(true);
      for (const f of fs.readdirSync(redis.dir)) fs.rmSync(path.join(redis.dir, f), { recursive: true, force: true });
      await sleep(OUTAGE_MS);
      await redis.start();
    });
    // The schedules found after the empty restart are ones the worker made again on reconnect.
    expect(s.workers[0].output()).toMatch(/redis reconnected: job schedules ensured/);

    await phase(`CLIENT PAUSE ${OUTAGE_MS} ALL`, async () => {
      const c = new IORedis(redis.url, { maxRetriesPerRequest: 1 });
      c.on('error', () => undefined);
      try {
        await c.call('CLIENT', 'PAUSE', String(OUTAGE_MS), 'ALL');
        await sleep(OUTAGE_MS + 200);
      } finally {
        c.disconnect();
      }
    });

    console.log(['| Redis fault | chats answered during | slowest chat | facts landed/expected | time to converge | schedules after |', '|---|---|---|---|---|---|', ...rows].join('\n'));
    expect(s.api.proc.exitCode).toBeNull();
    expect(s.workers[0].proc.exitCode).toBeNull();
  });

  it('restart empty with a backlog: worker down, 20 chats, Redis restarted without its data, worker back → 20 facts, each once', async () => {
    // A Redis of this case's own, without persistence: a restart comes back empty.
    const own = await TestRedis.start({ persist: false });
    const env = testEnv({ REDIS_URL: own.url });
    // A short grace (default 60 s) so the sweep re-adds the lost jobs within the test's time.
    const s = await startStack(env, { upstreamUrl: upstream.url, workers: 1, extra: { OUTBOX_RELAY_GRACE_MS: '2000' } });
    try {
      await s.stopWorker(0);
      const facts: string[] = [];
      for (let i = 0; i < 20; i++) {
        const r = await s.chat(`I prefer kit${i} for chore${i}.`);
        expect(r.status).toBe(200);
        facts.push(`prefers kit${i} for chore${i}`);
      }
      // Acknowledged and waiting in Redis (no worker).
      await waitUntil(async () => (await jobCounts(env, 'extraction')).waiting === 20, 10_000, '20 jobs waiting');
      await own.stop(true);
      await own.start();
      expect((await jobCounts(env, 'extraction')).waiting).toBe(0);

      await s.startWorker(0);
      let got = { total: -1, contents: [] as string[] };
      await waitUntil(async () => {
        got = await s.memories();
        return got.total >= facts.length;
      }, 60_000, '20 facts after the empty restart').catch((err: Error) => {
        throw new Error(`${err.message}; landed ${got.total}\n${s.logs()}`);
      });
      // Several more sweeps (every second): a doubled fact would show now.
      await new Promise((r) => setTimeout(r, 3000));
      got = await s.memories();
      console.log(`| restart empty with a backlog (worker down) | facts landed ${got.total}/${facts.length} (distinct ${new Set(got.contents).size}) |`);
      expect(got.total).toBe(facts.length);
      expect([...got.contents].sort()).toEqual([...facts].sort());
    } finally {
      await s.stop();
      await own.remove();
    }
  });
});
