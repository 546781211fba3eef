import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import { loadEnv } from '../src/config/env';
import type { ApiContext } from '../src/http/api-context';
import { createApp } from '../src/http/app';
import { createLogger } from '../src/logger';
import { buildApiContext } from '../src/api';
import { Metrics } from '../src/metrics';
import { startFakeUpstream } from '../test/helpers/fake-upstream';

const REQUESTS = 300;
/** Unmeasured requests first (JIT, connection pool, SQLite page cache). */
const WARMUP = 20;
const MEMORIES = 1000;

const TOPICS = ['green tea', 'black coffee', 'hiking', 'TypeScript', 'Rust', 'jazz', 'Lisbon', 'cycling', 'sushi', 'chess', 'gardening', 'photography'];
const VERBS = ['likes', 'dislikes', 'is learning', 'talks often about', 'recently tried', 'wants to avoid'];

interface Sample {
  /** Request sent → last body byte. */
  total: number;
  /** Request sent → first body byte. */
  ttfb: number;
}

interface Case {
  label: string;
  url: string;
  stream: boolean;
  headers: Record<string, string>;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

const ms = (x: number) => Number(x.toFixed(2));

/** One request over a keep-alive connection, timed to the first and the last body byte. */
async function once(dispatcher: Agent, c: Case, body: string): Promise<Sample> {
  const started = performance.now();
  const r = await request(c.url, { method: 'POST', dispatcher, headers: { 'content-type': 'application/json', ...c.headers }, body });
  let first = 0;
  for await (const chunk of r.body) if (!first && (chunk as Buffer).length) first = performance.now();
  const done = performance.now();
  if (r.statusCode !== 200) throw new Error(`${c.label}: status ${r.statusCode} (is /v1 mounted in src/http/app.ts?)`);
  return { total: done - started, ttfb: (first || done) - started };
}

async function run(dispatcher: Agent, c: Case, beforeEach: () => void): Promise<Sample[]> {
  const body = (i: number) =>
    JSON.stringify({
      model: 'gpt-4o-mini',
      stream: c.stream,
      messages: [
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: `What do you remember about my tea and coffee habits? (${i})` },
      ],
    });
  for (let i = 0; i < WARMUP; i++) {
    beforeEach();
    await once(dispatcher, c, body(i));
  }
  const out: Sample[] = [];
  // Sequential on purpose: the figure is the latency one request pays, not throughput under load.
  for (let i = 0; i < REQUESTS; i++) {
    beforeEach();
    out.push(await once(dispatcher, c, body(i)));
  }
  return out;
}

/** Seeds the key's memories and waits (bounded) for their embed-memory jobs to be handed over, so they do not compete with the measurement. */
async function seed(ctx: ApiContext, apiKeyId: string): Promise<void> {
  const inputs = Array.from({ length: MEMORIES }, (_, i) => ({
    apiKeyId,
    type: 'factual' as const,
    key: `bench:${i}`,
    content: `The user ${VERBS[i % VERBS.length]} ${TOPICS[(i * 7) % TOPICS.length]} (note ${i})`,
  }));
  ctx.memory.upsertMany(inputs, { source: 'import' }, 'import');
  const until = Date.now() + 15_000;
  while (Date.now() < until) {
    const queued = ctx.queues.isReady() ? Object.values(await ctx.queues.queue('embedding').getJobCounts()).reduce((a, b) => a + b, 0) : 0;
    if (queued + ctx.queues.outboxCount() >= MEMORIES) break;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Prints the latency the proxy adds per request (memory off / on with 1000 memories; streaming and not) against calling the fake upstream directly; never asserts. */
export async function runProxyBench(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'engram-proxy-bench-'));
  const fake = await startFakeUpstream();
  const env = loadEnv({
    NODE_ENV: 'production',
    DATA_DIR: path.join(dir, 'data'),
    LOG_LEVEL: 'silent',
    HOST: '127.0.0.1',
    MANAGEMENT_TOKEN: crypto.randomBytes(24).toString('hex'),
    QUEUE_PREFIX: `bench-proxy-${crypto.randomBytes(4).toString('hex')}`,
    UPSTREAM_BASE_URL: `${fake.url}/v1`,
    UPSTREAM_API_KEY: 'bench-upstream-key',
    REDIS_URL: process.env.REDIS_URL,
  });
  const ctx = buildApiContext(env, createLogger('silent', 'bench'));
  const server = http.createServer(createApp(ctx, new Metrics('api')));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  const dispatcher = new Agent({ keepAliveTimeout: 30_000, connections: 4 });
  try {
    const key = ctx.apiKeys.create('bench');
    await seed(ctx, key.id);
    const proxied = { authorization: `Bearer ${key.key}` };
    const direct = `${fake.url}/v1/chat/completions`;
    const viaProxy = `${base}/chat/completions`;
    const cases: Array<Case & { memory: boolean | null }> = [];
    for (const stream of [false, true]) {
      cases.push({ label: `upstream direct${stream ? ', stream' : ''}`, url: direct, stream, headers: { authorization: 'Bearer bench-upstream-key' }, memory: null });
      cases.push({ label: `proxy, memory off${stream ? ', stream' : ''}`, url: viaProxy, stream, headers: proxied, memory: false });
      cases.push({ label: `proxy, memory on${stream ? ', stream' : ''}`, url: viaProxy, stream, headers: proxied, memory: true });
    }

    const rows: Record<string, unknown>[] = [];
    const baseline = new Map<boolean, { total: number; ttfb: number }>();
    for (const c of cases) {
      if (c.memory !== null) ctx.settings.updateMemory({ enabled: c.memory, strategy: 'hybrid', maxTokens: 2000 });
      // Streams arrive as 5 content chunks 2 ms apart, so time to first byte and total differ as with a real model.
      const samples = await run(dispatcher, c, () => c.stream && fake.plan({ chunks: 5, chunkDelayMs: 2 }));
      fake.reset(); // the fake records every request; keep its memory flat
      const total = samples.map((s) => s.total).sort((a, b) => a - b);
      const ttfb = samples.map((s) => s.ttfb).sort((a, b) => a - b);
      if (c.memory === null) baseline.set(c.stream, { total: percentile(total, 50), ttfb: percentile(ttfb, 50) });
      const b = baseline.get(c.stream)!;
      rows.push({
        case: c.label,
        n: samples.length,
        'p50 ms': ms(percentile(total, 50)),
        'p95 ms': ms(percentile(total, 95)),
        'p99 ms': ms(percentile(total, 99)),
        'ttfb p50 ms': ms(percentile(ttfb, 50)),
        'ttfb p95 ms': ms(percentile(ttfb, 95)),
        'ttfb p99 ms': ms(percentile(ttfb, 99)),
        'added p50 ms': c.memory === null ? 0 : ms(percentile(total, 50) - b.total),
        'added ttfb p50 ms': c.memory === null ? 0 : ms(percentile(ttfb, 50) - b.ttfb),
      });
    }
    console.log(
      `Proxy latency: ${REQUESTS} sequential requests per case after ${WARMUP} warm-up, loopback fake upstream (no model time), ` +
        `memory on = ${MEMORIES} memories for the key, strategy hybrid (keywords: no embedding model configured), 2000-token budget, extraction enqueued`,
    );
    console.table(rows);
  } finally {
    await dispatcher.close();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await fake.close();
    // The run's jobs (embed-memory for the seed, extract-facts, record-access) live under its own prefix: remove them.
    if (ctx.queues.isReady()) await Promise.allSettled(ctx.queues.allQueues().map((q) => q.obliterate({ force: true })));
    await ctx.jobEvents.close();
    await ctx.queues.close();
    ctx.db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
