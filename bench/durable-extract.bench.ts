/**
 * Cost of the durable extract-facts record (issue 15 §3) on the api, per chat: the SQLite INSERT the api
 * writes before it adds the job, measured beside the same enqueue with the record off (the same-run baseline),
 * on a migrated database (WAL, synchronous=NORMAL) and a redis-server of the bench's own (never 6379).
 * The worker's side (the claim UPDATE inside the facts transaction) is printed too.
 */
import crypto from 'node:crypto';
import { openDatabase } from '../src/db/connection';
import { migrate } from '../src/db/migrate';
import { JOBS, jobOptions, parsePayload, type JobSpec } from '../src/queue/jobs';
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

/** A fresh extract-facts payload of `userText`, as the api validates it (a new request id each). */
const payloadOf = (userText: string) => parsePayload('extract-facts', { apiKeyId: 'k1', sessionId: null, userText, requestId: crypto.randomUUID() });

/** `n` calls of `fn`, their results in order. */
const times = <T>(n: number, fn: () => T): T[] => Array.from({ length: n }, fn);

/** Jobs per measured round of the per-turn table. */
const PER_TURN_JOBS = 2000;

/**
 * The api's CPU per extract-facts enqueue when `perTurn` chats finish in one turn of the event loop (their records share
 * one commit, QueueLayer.recordTracked), beside the Redis add alone done two ways: one add per job, and the turn's adds as
 * one pipeline (Queue.addBulk). Issue 14, twentieth pass: whether pipelining the adds of a turn pays (bench/README.md).
 */
async function perTurnTable(queues: QueueLayer): Promise<Record<string, string | number>[]> {
  const text = turn(500);
  const q = queues.queue('extraction');
  // A payload and the options the api's add sends with it (attempts, backoff, retention, the deterministic id).
  const job = () => {
    const data = payloadOf(text);
    return { name: 'extract-facts' as const, data, opts: jobOptions('extract-facts', data, `extract-facts-${data.requestId}`) };
  };
  const cpuPerJob = async (perTurn: number, once: () => Promise<unknown>): Promise<number> => {
    const turns = Math.ceil(PER_TURN_JOBS / perTurn);
    const c0 = process.cpuUsage();
    for (let t = 0; t < turns; t++) await once();
    const c = process.cpuUsage(c0);
    await q.obliterate({ force: true });
    return (c.user + c.system) / (turns * perTurn);
  };
  const rows: Record<string, string | number>[] = [];
  for (const perTurn of [1, 2, 4, 8]) {
    const enqueue: number[] = [];
    const adds: number[] = [];
    const bulk: number[] = [];
    for (let r = 0; r < 3; r++) {
      enqueue.push(await cpuPerJob(perTurn, () => Promise.all(times(perTurn, () => queues.enqueue('extract-facts', payloadOf(text))))));
      adds.push(await cpuPerJob(perTurn, () => Promise.all(times(perTurn, () => { const j = job(); return q.add(j.name, j.data, j.opts); }))));
      bulk.push(await cpuPerJob(perTurn, () => q.addBulk(times(perTurn, job))));
    }
    rows.push({
      'chats per turn': perTurn,
      'enqueue as the api runs it (CPU µs/job)': Number(median(enqueue).toFixed(1)),
      'Redis add alone, one add per job': Number(median(adds).toFixed(1)),
      'Redis add alone, one pipeline per turn (addBulk)': Number(median(bulk).toFixed(1)),
    });
  }
  console.log(`\napi process CPU (process.cpuUsage) per job, median of 3 rounds × ${PER_TURN_JOBS} jobs, the jobs of a turn awaited together:`);
  return rows;
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
      const payload = () => payloadOf(text);
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
    console.table(await perTurnTable(queues));
  } finally {
    await queues.close();
    handle.close();
    await redis.remove();
  }
}
