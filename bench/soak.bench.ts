import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Agent, request } from 'undici';
import { TestRedis, freePort } from '../test/helpers/redis-server';
import { spawn } from 'node:child_process';
import type { Child } from '../test/helpers/processes';
import { topicModelSpec, writeModel2VecFolder } from '../test/helpers/model-fixtures';
import { startFixedUpstream } from './fixed-upstream';

/**
 * Soak (issue #15, item 5): a spawned api and a spawned worker (the built CLI, as in production)
 * under mixed traffic — chat through the proxy with memory on (retrieval + an extraction job per
 * answer), memory CRUD, export → re-import, summarise, compact and reindex — for `--minutes=N`
 * (default 10). Every 10 s it samples the RSS of each process (/proc), the event-loop delay p99 of
 * each (prom-client's default metrics on /metrics, per role), the queue depth and failed jobs
 * (/api/jobs), the outbox size and the SQLite WAL file size. It prints the table and, per series,
 * the mean of the first and the last third of the run: a series "grows" when the last third is
 * above the first by more than both a ratio and an absolute slack. Every request must answer 2xx
 * and no job may fail: the verdict lists any error. Targets 127.0.0.1 only.
 */
/** The built CLI beside this compiled file (dist/bench → dist/src/cli.js). */
const CLI = path.resolve(__dirname, '../src/cli.js');

function spawnEngram(role: 'api' | 'worker', env: NodeJS.ProcessEnv): Child {
  const proc = spawn(process.execPath, [CLI, role], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  // Only the tail is kept: a 10-minute run must not grow this process' memory.
  const keep = (d: Buffer) => (out = (out + d.toString()).slice(-8000));
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
  return { proc, output: () => out, exited };
}

const SAMPLE_EVERY_MS = 10_000;
const UPSTREAM_DELAY_MS = 20;
const CHAT_LOOPS = 3;
/** Pause between operations of one loop, so the load is steady, not a flood (the load bench floods). */
const CHAT_PAUSE_MS = 100;
const CRUD_PAUSE_MS = 100;
const TRANSFER_EVERY_MS = 30_000;
const SUMMARISE_EVERY_MS = 20_000;
const REINDEX_EVERY_MS = 45_000;

interface Sample {
  t: number;
  apiRssMb: number;
  workerRssMb: number;
  apiLagP99Ms: number;
  workerLagP99Ms: number;
  /** Waiting + active + prioritized jobs over every queue. */
  queueDepth: number;
  /** Delayed jobs: the schedulers' next runs and retries in backoff. */
  delayed: number;
  failedJobs: number;
  outbox: number;
  walMb: number;
  dbMb: number;
  requests: number;
  errors: number;
  /** The machine's 1-minute load average: the event-loop delay follows it on a shared machine. */
  load1: number;
}

/** Growth limits per series: the last third's mean may exceed the first third's by at most ratio× AND slack. */
const GROWTH: Partial<Record<keyof Sample, { ratio: number; slack: number }>> = {
  apiRssMb: { ratio: 1.25, slack: 25 },
  workerRssMb: { ratio: 1.25, slack: 25 },
  apiLagP99Ms: { ratio: 2, slack: 20 },
  workerLagP99Ms: { ratio: 2, slack: 50 },
  queueDepth: { ratio: 2, slack: 50 },
  delayed: { ratio: 2, slack: 20 },
  outbox: { ratio: 2, slack: 10 },
  walMb: { ratio: 1.5, slack: 8 },
};

function rssMb(pid: number | undefined): number {
  if (!pid) return NaN;
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 102.4) / 10 : NaN;
  } catch {
    return NaN;
  }
}

const fileMb = (f: string) => {
  try {
    return Math.round(fs.statSync(f).size / 104_857.6) / 10;
  } catch {
    return 0;
  }
};

/** engram_nodejs_eventloop_lag_p99_seconds of one role from the api's /metrics (workers push theirs every 10 s). */
function lagP99Ms(metrics: string, role: 'api' | 'worker'): number {
  const re = new RegExp(`^engram_nodejs_eventloop_lag_p99_seconds\\{[^}]*role="${role}"[^}]*\\}\\s+([0-9.eE+-]+)`, 'm');
  const m = re.exec(metrics);
  return m ? Math.round(Number(m[1]) * 10_000) / 10 : NaN;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function minutesArg(): number {
  const a = process.argv.find((x) => x.startsWith('--minutes='));
  const n = a ? Number(a.slice('--minutes='.length)) : 10;
  if (!Number.isFinite(n) || n <= 0 || n > 120) throw new Error('--minutes must be a number in (0, 120]');
  return n;
}

async function waitReady(base: string, child: Child, ms = 30_000): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (child.proc.exitCode !== null) throw new Error(`api exited: ${child.output().slice(-2000)}`);
    try {
      const r = await request(`${base}/readyz`);
      await r.body.dump();
      if (r.statusCode === 200) return;
    } catch {
      // not listening yet
    }
    await sleep(200);
  }
  throw new Error(`api not ready in ${ms} ms: ${child.output().slice(-2000)}`);
}

export async function runSoakBench(): Promise<void> {
  if (!fs.existsSync(CLI)) throw new Error(`${CLI} is missing: npm run bench builds it (tsc -p tsconfig.build.json)`);
  const minutes = minutesArg();
  const durationMs = minutes * 60_000;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'engram-soak-'));
  const dataDir = path.join(dir, 'data');
  const modelDir = writeModel2VecFolder(path.join(dir, 'model'), topicModelSpec(64, 2000));
  const redis = await TestRedis.start({ persist: false });
  const upstream = await startFixedUpstream(UPSTREAM_DELAY_MS);
  const port = await freePort();
  const token = crypto.randomBytes(24).toString('hex');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    HOST: '127.0.0.1',
    PORT: String(port),
    DATA_DIR: dataDir,
    REDIS_URL: redis.url,
    QUEUE_PREFIX: `soak-${crypto.randomBytes(4).toString('hex')}`,
    MANAGEMENT_TOKEN: token,
    UPSTREAM_BASE_URL: `${upstream.url}/v1`,
    UPSTREAM_API_KEY: 'soak-upstream-key',
    MEMORY_STATIC_MODEL: modelDir,
    HF_HUB_ENDPOINT: 'http://127.0.0.1:9',
    // The schedulers at short periods, so the soak also runs the repair sweep, expiry and auto-compaction many times.
    REPAIR_SWEEP_EVERY_MS: '30000',
    EXPIRE_EVERY_MS: '30000',
    COMPACT_EVERY_MS: '60000',
  };
  const base = `http://127.0.0.1:${port}`;
  const api = spawnEngram('api', env);
  api.proc.on('error', () => undefined);
  let worker: Child | null = null;
  const dispatcher = new Agent({ connections: 16, keepAliveTimeout: 30_000 });
  const errors: string[] = [];
  let requests = 0;
  /** Latency of every request by kind, with when it started (ms since the start), for the per-kind table. */
  const timings: { kind: string; at: number; ms: number }[] = [];
  let startedAt = Date.now();
  const mgmt = { authorization: `Bearer ${token}` };

  async function call(kind: string, method: string, url: string, opts: { headers?: Record<string, string>; body?: string | Buffer; expect?: number[] } = {}): Promise<string> {
    requests++;
    const t0 = performance.now();
    try {
      const r = await request(`${base}${url}`, { method: method as 'GET', dispatcher, headers: { ...(opts.body !== undefined && typeof opts.body === 'string' ? { 'content-type': 'application/json' } : {}), ...opts.headers }, body: opts.body, headersTimeout: 30_000, bodyTimeout: 30_000 });
      const text = await r.body.text();
      timings.push({ kind, at: Date.now() - startedAt, ms: performance.now() - t0 });
      if (!(opts.expect ?? [200, 201, 202, 204]).includes(r.statusCode)) errors.push(`${kind}: ${r.statusCode} ${text.slice(0, 200)}`);
      return text;
    } catch (err) {
      errors.push(`${kind}: ${(err as Error).message}`);
      return '';
    }
  }

  const samples: Sample[] = [];
  try {
    await waitReady(base, api);
    worker = spawnEngram('worker', env);
    worker.proc.on('error', () => undefined);

    const keys = await Promise.all([0, 1].map(async (i) => JSON.parse(await call('setup', 'POST', '/api/keys', { headers: mgmt, body: JSON.stringify({ name: `soak-${i}` }) })) as { id: string; key: string }));
    await call('setup', 'PUT', '/api/settings/memory', { headers: mgmt, body: JSON.stringify({ enabled: true, embeddingSource: 'static', staticEnabled: true, strategy: 'hybrid' }) });

    const started = Date.now();
    startedAt = started;
    const running = () => Date.now() - started < durationMs;
    const loops: Promise<void>[] = [];

    // Chat through the proxy: retrieval on the request path, an extraction job per answer.
    for (let l = 0; l < CHAT_LOOPS; l++) {
      loops.push(
        (async () => {
          for (let i = 0; running(); i++) {
            const key = keys[(l + i) % keys.length];
            const body = JSON.stringify({
              model: 'gpt-4o-mini',
              stream: i % 2 === 0,
              messages: [{ role: 'user', content: `Remember that my colleague number ${l}-${i} likes ${['green tea', 'espresso', 'hiking', 'jazz'][i % 4]} and lives in city ${i % 50}.` }],
            });
            await call('chat', 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key.key}` }, body });
            await sleep(CHAT_PAUSE_MS);
          }
        })(),
      );
    }
    // Memory CRUD: create, read, update, list, delete.
    loops.push(
      (async () => {
        for (let i = 0; running(); i++) {
          const key = keys[i % keys.length];
          const created = await call('crud-create', 'POST', '/api/memory', { headers: mgmt, body: JSON.stringify({ apiKeyId: key.id, key: `soak:${i}`, content: `Soak fact ${i}: the project ${i % 31} ships on day ${i % 7}.`, type: 'factual' }) });
          const id = (JSON.parse(created || '{}') as { id?: string; memory?: { id?: string } }).id ?? (JSON.parse(created || '{}') as { memory?: { id?: string } }).memory?.id;
          if (id) {
            await call('crud-get', 'GET', `/api/memory/${id}`, { headers: mgmt });
            await call('crud-update', 'PUT', `/api/memory/${id}`, { headers: mgmt, body: JSON.stringify({ content: `Soak fact ${i}, revised: project ${i % 31} ships on day ${(i + 1) % 7}.` }) });
            // Keep two in three: the table grows like a real one, and deletes are exercised.
            if (i % 3 === 0) await call('crud-delete', 'DELETE', `/api/memory/${id}`, { headers: mgmt });
          }
          await call('crud-list', 'GET', `/api/memory?apiKeyId=${encodeURIComponent(key.id)}&limit=20`, { headers: mgmt });
          await call('preview', 'POST', '/api/memory/retrieve-preview', { headers: mgmt, body: JSON.stringify({ apiKeyId: key.id, query: `project ${i % 31} colleague tea`, strategy: 'hybrid' }) });
          await sleep(CRUD_PAUSE_MS);
        }
      })(),
    );
    // Export one key's memories and import them again (an upsert of every row), then summarise and compact, and reindex.
    const every = (periodMs: number, fn: (i: number) => Promise<void>) =>
      loops.push(
        (async () => {
          for (let i = 0; running(); i++) {
            await fn(i);
            const until = Date.now() + periodMs;
            while (running() && Date.now() < until) await sleep(250);
          }
        })(),
      );
    every(TRANSFER_EVERY_MS, async (i) => {
      const key = keys[i % keys.length];
      const ndjson = await call('export', 'GET', `/api/memory/export?apiKeyId=${encodeURIComponent(key.id)}`, { headers: mgmt });
      if (ndjson) await call('import', 'POST', '/api/memory/import', { headers: { ...mgmt, 'content-type': 'application/x-ndjson' }, body: ndjson });
    });
    every(SUMMARISE_EVERY_MS, async (i) => {
      const key = keys[i % keys.length];
      await call('summarise', 'POST', '/api/memory/summarize', { headers: mgmt, body: JSON.stringify({ apiKeyId: key.id, olderThanDays: 1 }) });
      await call('compact', 'POST', '/api/memory/compact', { headers: mgmt, body: JSON.stringify({ apiKeyId: key.id }) });
    });
    // A reindex already running answers 409 (one at a time): that is the contract, not an error.
    every(REINDEX_EVERY_MS, async (i) => void (await call('reindex', 'POST', '/api/memory/reindex', { headers: mgmt, body: JSON.stringify({ force: i % 2 === 1 }), expect: [200, 201, 202, 409] })));

    // The sampler.
    const wal = path.join(dataDir, 'engram.db-wal');
    const db = path.join(dataDir, 'engram.db');
    const sample = async () => {
      const metrics = await call('metrics', 'GET', '/metrics', { headers: mgmt });
      const jobs = JSON.parse((await call('jobs', 'GET', '/api/jobs', { headers: mgmt })) || '{}') as { queues?: Record<string, Record<string, number>>; outbox?: number };
      const qs = Object.values(jobs.queues ?? {});
      samples.push({
        t: Math.round((Date.now() - started) / 1000),
        apiRssMb: rssMb(api.proc.pid),
        workerRssMb: rssMb(worker?.proc.pid),
        apiLagP99Ms: lagP99Ms(metrics, 'api'),
        workerLagP99Ms: lagP99Ms(metrics, 'worker'),
        queueDepth: qs.reduce((a, c) => a + (c.waiting ?? 0) + (c.active ?? 0) + (c.prioritized ?? 0), 0),
        delayed: qs.reduce((a, c) => a + (c.delayed ?? 0), 0),
        failedJobs: qs.reduce((a, c) => a + (c.failed ?? 0), 0),
        outbox: jobs.outbox ?? NaN,
        walMb: fileMb(wal),
        dbMb: fileMb(db),
        requests,
        errors: errors.length,
        load1: Number(os.loadavg()[0].toFixed(1)),
      });
      const s = samples[samples.length - 1];
      process.stdout.write(`  t=${s.t}s api ${s.apiRssMb} MB, worker ${s.workerRssMb} MB, queue ${s.queueDepth}, outbox ${s.outbox}, wal ${s.walMb} MB, requests ${s.requests}, errors ${s.errors}\n`);
    };
    while (running()) {
      await sleep(Math.min(SAMPLE_EVERY_MS, Math.max(0, durationMs - (Date.now() - started))));
      if (api.proc.exitCode !== null) throw new Error(`api died: ${api.output().slice(-2000)}`);
      if (worker.proc.exitCode !== null) throw new Error(`worker died: ${worker.output().slice(-2000)}`);
      await sample();
    }
    await Promise.all(loops);
    // Let the queues drain (bounded), then one last sample: depth must come back down.
    const drainUntil = Date.now() + 60_000;
    for (;;) {
      await sample();
      if (samples[samples.length - 1].queueDepth === 0 || Date.now() > drainUntil) break;
      await sleep(2000);
    }

    console.log(`Soak: ${minutes} min of mixed traffic against a spawned api + worker (built CLI), fake upstream with a fixed ${UPSTREAM_DELAY_MS} ms delay, memory on (hybrid, static fixture model 64 dims), ` + `${CHAT_LOOPS} chat loops (${CHAT_PAUSE_MS} ms pause, half streaming), 1 CRUD+preview loop, export→import every ${TRANSFER_EVERY_MS / 1000} s, summarise+compact every ${SUMMARISE_EVERY_MS / 1000} s, reindex every ${REINDEX_EVERY_MS / 1000} s; schedulers at 30/30/60 s; sampled every ${SAMPLE_EVERY_MS / 1000} s (last row: after draining)`);
    console.table(samples);

    const third = Math.max(1, Math.floor((samples.length - 1) / 3));
    const run = samples.slice(0, -1).length >= 3 ? samples.slice(0, -1) : samples;
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const verdict = Object.entries(GROWTH).map(([k, g]) => {
      const series = run.map((s) => s[k as keyof Sample]).filter((v) => Number.isFinite(v));
      const first = mean(series.slice(0, third));
      const last = mean(series.slice(-third));
      const grows = last > first * g!.ratio && last - first > g!.slack;
      return { series: k, 'first third mean': Number(first.toFixed(1)), 'last third mean': Number(last.toFixed(1)), max: Math.max(...series), limit: `×${g!.ratio} and +${g!.slack}`, verdict: grows ? 'GROWS' : 'bounded' };
    });
    console.table(verdict);
    // Request latency per kind, first third of the run against the last: what got slower as the data grew.
    const pct = (xs: number[], p: number) => (xs.length ? Number(xs.sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)].toFixed(1)) : NaN);
    const kinds = [...new Set(timings.map((x) => x.kind))].filter((k) => !['setup', 'metrics', 'jobs'].includes(k));
    console.table(
      kinds.map((k) => {
        const early = timings.filter((x) => x.kind === k && x.at < durationMs / 3).map((x) => x.ms);
        const late = timings.filter((x) => x.kind === k && x.at >= (2 * durationMs) / 3 && x.at <= durationMs).map((x) => x.ms);
        return { kind: k, 'n first third': early.length, 'p50 ms first': pct(early, 50), 'p99 ms first': pct(early, 99), 'n last third': late.length, 'p50 ms last': pct(late, 50), 'p99 ms last': pct(late, 99) };
      }),
    );
    const last = samples[samples.length - 1];
    const byKind = new Map<string, number>();
    for (const e of errors) byKind.set(e.split(':')[0], (byKind.get(e.split(':')[0]) ?? 0) + 1);
    console.log(`requests: ${requests}, request errors: ${errors.length}${errors.length ? ` (${[...byKind].map(([k, n]) => `${k} ${n}`).join(', ')}; first: ${errors[0]})` : ''}, failed jobs: ${last.failedJobs}, queue depth after drain: ${last.queueDepth}, outbox: ${last.outbox}, upstream answers: ${upstream.served()}`);
    const ok = errors.length === 0 && last.failedJobs === 0 && verdict.every((v) => v.verdict === 'bounded');
    console.log(`VERDICT: ${ok ? 'nothing grows without bound, zero errors' : 'FAILED (see above)'}`);
  } finally {
    await dispatcher.close().catch(() => undefined);
    for (const c of [worker, api]) {
      if (!c || c.proc.exitCode !== null) continue;
      c.proc.kill('SIGTERM');
      await Promise.race([c.exited, sleep(15_000)]);
      if (c.proc.exitCode === null) c.proc.kill('SIGKILL');
    }
    await upstream.close();
    await redis.remove();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
