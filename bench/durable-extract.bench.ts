/**
 * Cost of the durable extract-facts record (issue 15 §3) on the api, per chat: the SQLite INSERT the api
 * writes before it adds the job, measured beside the same enqueue with the record off (the same-run baseline),
 * on a migrated database (WAL, synchronous=NORMAL) and a redis-server of the bench's own (never 6379).
 * The worker's side (the claim UPDATE inside the facts transaction) is printed too.
 */
import crypto from 'node:crypto';
import { openDatabase } from '../src/db/connection';
import { migrate } from '../src/db/migrate';
import { JOBS, parsePayload, type JobSpec } from '../src/queue/jobs';
import { OutboxRepository } from '../src/queue/outbox.repository';
import { QueueLayer } from '../src/queue/queues';
import { silentLog, tempDir, testEnv } from '../test/helpers/env';
import { TestRedis } from '../test/helpers/redis-server';

const ROUNDS = 5;
const PER_ROUND = 400;

function turn(bytes: number): string {
  const words = 'I prefer TypeScript for backend work and my cat is called Miso '.repeat(Math.ceil(bytes / 64));
  return words.slice(0, bytes);
}

const usPer = (ms: number, n: number) => Number(((ms * 1000) / n).toFixed(1));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export async function runDurableExtractBench(): Promise<void> {
  const redis = await TestRedis.start({ persist: false });
  const env = testEnv({ REDIS_URL: redis.url, DATA_DIR: tempDir('bench-durable') });
  const log = silentLog();
  const handle = openDatabase({ dataDir: env.DATA_DIR, busyTimeoutMs: 5000, disableVec: true, log });
  migrate(handle.db, log);
  const queues = new QueueLayer(env, log, handle.db, 'api');
  const outbox = new OutboxRepository(handle.db);
  // The bench toggles the record off for its baseline (same process, same enqueue path).
  const spec = JOBS['extract-facts'] as JobSpec;
  try {
    await queues.queue('extraction').waitUntilReady();
    const table: Record<string, string | number>[] = [];
    for (const size of [500, 8192, 65_536]) {
      const text = turn(size);
      const payload = () => parsePayload('extract-facts', { apiKeyId: 'k1', sessionId: null, userText: text, requestId: crypto.randomUUID() });
      const times = { redisAdd: [] as number[], record: [] as number[], enqueue: [] as number[], claim: [] as number[] };
      for (let r = 0; r < ROUNDS; r++) {
        // Baseline: the same enqueue with the record switched off (what the api ran per chat before).
        spec.durable = false;
        let t0 = performance.now();
        try {
          for (let i = 0; i < PER_ROUND; i++) await queues.enqueue('extract-facts', payload());
        } finally {
          spec.durable = true;
        }
        times.redisAdd.push(performance.now() - t0);
        // The record alone: one prepared INSERT (WAL).
        const ids: string[] = [];
        t0 = performance.now();
        for (let i = 0; i < PER_ROUND; i++) {
          const d = payload();
          const id = `extract-${d.requestId}`;
          ids.push(id);
          outbox.addTracked('extract-facts', id, d, new Date().toISOString());
        }
        times.record.push(performance.now() - t0);
        // What the api runs now per chat: record + add.
        t0 = performance.now();
        for (let i = 0; i < PER_ROUND; i++) await queues.enqueue('extract-facts', payload());
        times.enqueue.push(performance.now() - t0);
        // Worker side: the claim (its own immediate transaction here; in the handler it joins the facts').
        t0 = performance.now();
        for (const id of ids) handle.db.transaction(() => outbox.claim('extract-facts', id, new Date().toISOString())).immediate();
        times.claim.push(performance.now() - t0);
        await queues.queue('extraction').obliterate({ force: true });
      }
      const base = usPer(median(times.redisAdd), PER_ROUND);
      const now = usPer(median(times.enqueue), PER_ROUND);
      table.push({
        'user turn': `${size} B`,
        'baseline: enqueue without record (µs/chat)': base,
        'record INSERT alone (µs/chat)': usPer(median(times.record), PER_ROUND),
        'record + add, as the api runs now (µs/chat)': now,
        'added (µs/chat)': Number((now - base).toFixed(1)),
        'worker claim UPDATE (µs/job)': usPer(median(times.claim), PER_ROUND),
      });
    }
    console.log(`median of ${ROUNDS} rounds × ${PER_ROUND} chats each; SQLite WAL, synchronous=NORMAL; own redis-server`);
    console.table(table);
  } finally {
    await queues.close();
    handle.close();
    await redis.remove();
  }
}
