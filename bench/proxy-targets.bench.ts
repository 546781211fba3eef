/**
 * Issue 14, request path: proxy overhead, api CPU per chat, proxied req/s as a share of upstream-direct
 * req/s and api RSS, each against the same run's upstream-direct baseline.
 *
 * Four processes besides this one (bench/proxy-child.ts): a fixed-delay upstream (20 ms), a bare node proxy
 * (node:http in, an undici Pool out, bytes passed through: the floor any Node proxy pays, measured beside the
 * builds as every figure's second baseline), and the real api (`startApi`) of this build — plus, with
 * `--before=<dist root>`, the api of another build (e.g. main built into a temp folder) over a copy of the same
 * database, measured in the same run, alternating.
 * Load comes from autocannon in this process (32 connections, 10 s), so its CPU never counts as the api's.
 *
 * Options: --before=<dir holding src/api.js's dist root>  --duration=<s>  --memories=<n per key>
 *          --profile=<dir> (an extra profiled run per build and mode: .cpuprofile files + top self-time table)
 *          --node-options=<flags> / --env=<K=V,...> (for this build's api only, to weigh them against --before)
 *          --sequential-profile=<dir> (V8 CPU profiles of the sequential chats per proxy and mode; their latency then includes the profiler)
 *          --phases (where a sequential chat's time goes inside each proxy: before the upstream call, the upstream, after it)
 *          --rounds=<n> (n sequential runs per mode, pooled, each one's p50 shown: the spread a change must beat)
 *          --coverage=<dir> (the functions the sequential chats run and their calls per chat, per proxy and mode: V8 precise
 *          coverage, which slows them, and the load runs after them read lower too: a run for the counts only)
 *          --heap=<dir> (after each mode: the live memory after two full GCs and a .heapsnapshot per build)
 */
import crypto from 'node:crypto';
import { fork, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { Agent, request } from 'undici';
import { buildApiContext } from '../src/api';
import { loadEnv } from '../src/config/env';
import { MemoryReadCache } from '../src/memory/read-cache';
import { MemoryService } from '../src/memory/memory.service';
import { createLogger } from '../src/logger';
import { freePort, TestRedis } from '../test/helpers/redis-server';
import { benchStaticModel } from './build-wink-model';
import { Corpus, embedPending, percentile, rng, seedMemories, useStaticSource } from './retrieval.bench';
import type { RequestPhases } from './proxy-child';
import { reportTargets, type TargetRow } from './target-table';

const UPSTREAM_DELAY_MS = 20;
const FLOOR = 'bare node proxy (floor)';
const LEAN = 'lean memory-off proxy (floor)';
const CONNECTIONS = 32;
const SEQUENTIAL = 300;
const WARMUP = 30;

interface Options {
  before: string | null;
  durationS: number;
  memories: number;
  profileDir: string | null;
  nodeOptions: string | null;
  /** Environment variables for this build's api only (`--env=API_HEAP_GROWING_PERCENT=0,...`), to weigh a setting against --before. */
  env: Record<string, string>;
  heapDir: string | null;
  /** Profiles the sequential chats (their latency figures then include the profiler's cost). */
  seqProfileDir: string | null;
  /** Times each sequential chat's phases inside each proxy (bench/proxy-child.ts PhaseTimer). */
  phases: boolean;
  /** Call counts of every function the sequential chats run, per proxy and mode (V8 precise coverage). */
  coverageDir: string | null;
  /** Sequential runs per mode (pooled for the figures; each one's p50 shown too). */
  rounds: number;
  /** Adds the lean floor (bench/proxy-child.ts `lean`) to the memory-off runs. */
  lean: boolean;
}

function parseOptions(args: string[]): Options {
  const opt = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? null;
  const before = opt('before');
  return {
    before: before ? path.resolve(before) : null,
    durationS: Number(opt('duration') ?? 10),
    memories: Number(opt('memories') ?? 10_000),
    profileDir: opt('profile') ? path.resolve(opt('profile')!) : null,
    nodeOptions: opt('node-options'),
    env: Object.fromEntries((opt('env') ?? '').split(',').filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])),
    heapDir: opt('heap') ? path.resolve(opt('heap')!) : null,
    seqProfileDir: opt('sequential-profile') ? path.resolve(opt('sequential-profile')!) : null,
    coverageDir: opt('coverage') ? path.resolve(opt('coverage')!) : null,
    rounds: Math.max(1, Number(opt('rounds') ?? 1)),
    phases: args.includes('--phases'),
    lean: args.includes('--lean'),
  };
}

/** A child of bench/proxy-child.ts, driven over IPC. */
/** Main-thread GC pauses since a proxy started (bench/proxy-child.ts): counts and ms by kind. */
interface GcCounts {
  minor: number;
  minorMs: number;
  major: number;
  majorMs: number;
  other: number;
  otherMs: number;
}

export class BenchChild {
  private waiters: Array<{ type: string; resolve: (m: Record<string, unknown>) => void }> = [];
  readonly ready: Promise<number>;

  constructor(
    readonly label: string,
    readonly proc: ChildProcess,
  ) {
    proc.on('error', () => undefined);
    proc.on('message', (m: Record<string, unknown>) => {
      const i = this.waiters.findIndex((w) => w.type === m.type || m.type === 'error');
      if (i >= 0) this.waiters.splice(i, 1)[0].resolve(m);
    });
    this.ready = this.wait('ready').then((m) => m.port as number);
    proc.once('exit', (code) => {
      for (const w of this.waiters.splice(0)) w.resolve({ type: 'error', message: `${label} exited with ${code}` });
    });
  }

  private wait(type: string): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) =>
      this.waiters.push({ type, resolve: (m) => (m.type === 'error' ? reject(new Error(`${this.label}: ${String(m.message)}`)) : resolve(m)) }),
    );
  }

  async call(cmd: Record<string, unknown>, reply: string): Promise<Record<string, unknown>> {
    const p = this.wait(reply);
    this.proc.send(cmd);
    return p;
  }

  stats(reset = false, detail = false) {
    return this.call({ cmd: 'stats', reset, detail }, 'stats') as Promise<{ cpu: NodeJS.CpuUsage; rss: number; peakRss: number; gc?: GcCounts; memory?: NodeJS.MemoryUsage; spaces?: Record<string, number> }>;
  }

  kill(): void {
    if (this.proc.exitCode === null) this.proc.kill('SIGKILL');
  }
}

const CHILD = path.join(__dirname, 'proxy-child.js');

export function spawnChild(label: string, args: string[], env: NodeJS.ProcessEnv): BenchChild {
  return new BenchChild(label, fork(CHILD, args, { env, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] }));
}

/**
 * A build's api is started with the environment that build's `engram up` gives it (src/heap-growth.ts
 * `childMemoryEnv`: glibc's MALLOC_ARENA_MAX), so each build is measured as a user runs it; a build
 * without that function gets the env unchanged.
 */
export function launchEnv(root: string, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  let mod: { childMemoryEnv?: (e: NodeJS.ProcessEnv) => NodeJS.ProcessEnv } = {};
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    mod = require(path.join(root, 'src/heap-growth.js')) as typeof mod;
  } catch {
    // an older build without the module
  }
  return mod.childMemoryEnv ? mod.childMemoryEnv(env) : env;
}

/**
 * What `engram api` gets from its env in these benches (proxy-targets, api-rss; the lean floor reads the same: its
 * logger, its database): production, a database of its own, the bench's Redis and fake upstream, the static model,
 * and production's default log level (the access line is part of the cost; the child's stdout is /dev/null).
 */
export function benchApiEnv(o: { dataDir: string; port: number; redisUrl: string; upstreamPort: number; modelFolder: string; queuePrefix: string }): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    NODE_ENV: 'production',
    HOST: '127.0.0.1',
    PORT: String(o.port),
    DATA_DIR: o.dataDir,
    REDIS_URL: o.redisUrl,
    QUEUE_PREFIX: `${o.queuePrefix}-${crypto.randomBytes(4).toString('hex')}`,
    MANAGEMENT_TOKEN: crypto.randomBytes(24).toString('hex'),
    UPSTREAM_BASE_URL: `http://127.0.0.1:${o.upstreamPort}/v1`,
    UPSTREAM_API_KEY: 'bench-upstream-key',
    MEMORY_STATIC_MODEL: o.modelFolder,
    LOG_LEVEL: 'info',
  };
}

/** Builds the database once: one key with `n` memories and their static-model vectors, memory settings as in the issue's runs. */
export async function buildDatabase(dir: string, redisUrl: string, modelFolder: string, n: number, corpus: Corpus): Promise<{ secret: string; seconds: number }> {
  const t0 = performance.now();
  const env = loadEnv({ NODE_ENV: 'test', DATA_DIR: dir, QUEUE_PREFIX: `bench-pt-seed-${crypto.randomBytes(4).toString('hex')}`, MANAGEMENT_TOKEN: crypto.randomBytes(24).toString('hex'), LOG_LEVEL: 'silent', REDIS_URL: redisUrl, MEMORY_STATIC_MODEL: modelFolder });
  const ctx = buildApiContext(env, createLogger('silent', 'bench'));
  try {
    if (!ctx.db.vecLoaded) throw new Error('sqlite-vec is not available: hybrid would only measure the keyword tier');
    const settings = useStaticSource(ctx);
    const key = ctx.apiKeys.create('bench-proxy-targets');
    // Without the api's embed-on-write hook: seeding must not queue an embed job per row.
    const writer = new MemoryService(ctx.db.db, new MemoryReadCache(100, 60_000));
    const probe = await ctx.embedding.embedOne('engram dimension probe', settings);
    const dim = probe.resolution.dimensions!;
    const signature = ctx.vectors.signatureFor(probe.resolution)!;
    ctx.vectors.rebuild(signature, dim);
    const r = rng(42);
    seedMemories(writer, key.id, n, () => corpus.memory(r));
    await embedPending(ctx.embedding, ctx.vectors, settings, signature, dim);
    ctx.settings.updateMemory({ enabled: false, strategy: 'hybrid', maxTokens: 2000 });
    return { secret: key.key, seconds: (performance.now() - t0) / 1000 };
  } finally {
    await ctx.jobEvents.close();
    await ctx.queues.close();
    await ctx.embedding.close();
    ctx.db.close();
  }
}

interface Target {
  label: string;
  url: string;
  auth: string;
  api: BenchChild | null;
  /** The bare node proxy or the lean one (bench/proxy-child.ts `bare`, `lean`): a floor beside the builds, not a build. */
  floor?: boolean;
  /** Measured with memory off only (the lean floor). */
  memoryOffOnly?: boolean;
}

/** The chat body of request `i`: a new user question each time (the query is never in the embedding cache). */
export function chatBody(queries: string[], i: number): string {
  return JSON.stringify({
    model: 'gpt-4o-mini',
    messages: [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: `${queries[i % queries.length]} (${i})` },
    ],
  });
}

/** Memories and tokens injected per chat (the x-memory-* headers), per target. */
const injectedSeen = new Map<string, { chats: number; injected: number; tokens: number }>();

async function once(dispatcher: Agent, t: Target, body: string): Promise<number> {
  const started = performance.now();
  const r = await request(t.url, { method: 'POST', dispatcher, headers: { 'content-type': 'application/json', authorization: t.auth }, body });
  await r.body.arrayBuffer();
  const took = performance.now() - started;
  if (r.statusCode !== 200) throw new Error(`${t.label}: status ${r.statusCode}`);
  if (r.headers['x-memory-status'] === 'injected') {
    const seen = injectedSeen.get(t.label) ?? { chats: 0, injected: 0, tokens: 0 };
    seen.chats++;
    seen.injected += Number(r.headers['x-memory-injected']);
    seen.tokens += Number(r.headers['x-memory-tokens']);
    injectedSeen.set(t.label, seen);
  }
  return took;
}

/** Sequential requests, the targets alternating request by request (order reversed every round, rotated every two) so they share the machine's noise; latency per target. */
async function sequential(targets: Target[], queries: string[], offset: number): Promise<Map<string, number[]>> {
  const dispatcher = new Agent({ keepAliveTimeout: 30_000, connections: 2 });
  const out = new Map<string, number[]>(targets.map((t) => [t.label, []]));
  try {
    for (let i = 0; i < WARMUP + SEQUENTIAL; i++) {
      // direct-A-B, direct-B-A: a request right after another api's pays for that api's after-response work (access
      // log, close handlers, the extract-facts enqueue, GC) on a 2-core machine: with one fixed order the build
      // measured second was 1.2 ms slower at p50 than the one before it. Each round starts with the upstream called
      // directly, so no api ever follows itself: the earlier A-B-C, C-B-A order made the last build follow its own
      // request at every round boundary, and it read 0.24-0.31 ms slower at p50 with memory on than the same code as
      // `before` (bench/README.md, "Sixth pass", the sequential order). With three proxies (the floor and two builds)
      // that order still kept the middle one after another proxy in every round, never right after direct: two runs
      // of the same code as `before` and `this build` read 1.62 and 1.31 ms at p50, memory off (bench/README.md,
      // "Tenth pass"). So the proxies are also rotated every two rounds: each takes each place equally often.
      const apis = targets.slice(1);
      const r = Math.floor(i / 2) % apis.length;
      const rotated = [...apis.slice(r), ...apis.slice(0, r)];
      for (const t of [targets[0]!, ...(i % 2 === 0 ? rotated : rotated.reverse())]) {
        const d = await once(dispatcher, t, chatBody(queries, offset + i));
        if (i >= WARMUP) out.get(t.label)!.push(d);
      }
    }
  } finally {
    await dispatcher.close();
  }
  for (const xs of out.values()) xs.sort((a, b) => a - b);
  return out;
}

/** Chats each proxy serves (8 at a time) before a mode's sequential run. */
const WARM_CHATS = 2000;

/**
 * Serves WARM_CHATS chats through each proxy before the sequential run: the issue's figures are for a warm process,
 * and V8 optimises a function only after many calls. With the 30 sequential warm-up requests alone, the first mode
 * measured a process still running its request path in the interpreter and baseline tiers: memory off, this build
 * read 0.9 ms above the bare node proxy un-warmed and 0.4 ms above it after 5,000 chats (bench/README.md, "Eighth pass").
 */
async function warmUp(proxies: Target[], queries: string[], offset: number): Promise<void> {
  const dispatcher = new Agent({ keepAliveTimeout: 30_000, connections: 8 });
  try {
    for (const t of proxies) {
      let next = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < WARM_CHATS) {
            const i = next++;
            await once(dispatcher, t, chatBody(queries, offset + i));
          }
        }),
      );
    }
  } finally {
    await dispatcher.close();
  }
}

interface LoadResult {
  reqPerSec: number;
  completed: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
  /** api CPU ms per completed request (user + system), null for the direct baseline. */
  cpuPerReq: number | null;
  /** Of it, the api's main thread (JavaScript, SQLite, the WASM scan); the rest ran on V8's helper threads (GC, compiler) and libuv's pool. Linux only. */
  mainCpuPerReq: number | null;
  peakRssMb: number | null;
  /** Main-thread GC pauses per 1,000 requests: scavenges and mark-compacts (count, ms); null for the direct baseline. */
  gcPer1k: { minor: number; minorMs: number; major: number; majorMs: number } | null;
}

let clockTicks: number | undefined;

/** CPU ms of a process's main thread and of all its other threads, from /proc (null where there is none). */
function threadCpuMs(pid: number | undefined): { main: number; other: number } | null {
  if (pid === undefined) return null;
  try {
    if (clockTicks === undefined) clockTicks = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
    let main = 0;
    let other = 0;
    for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
      let stat: string;
      try {
        stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      } catch {
        continue; // the thread ended between the listing and the read
      }
      // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ms = ((Number(f[11]) + Number(f[12])) * 1000) / clockTicks;
      if (Number(tid) === pid) main += ms;
      else other += ms;
    }
    return { main, other };
  } catch {
    return null;
  }
}

/** p50 of each phase of the sequential chats (ms), and of the whole span inside the process. */
function phaseMedians(ps: RequestPhases[]): Record<string, string> {
  const p50 = (f: (p: RequestPhases) => number | undefined) => {
    const xs = ps.map(f).filter((x): x is number => x !== undefined && Number.isFinite(x)).sort((a, b) => a - b);
    return xs.length ? f2(percentile(xs, 50)) : '';
  };
  const d = (a: keyof RequestPhases, b: keyof RequestPhases) => (p: RequestPhases) => (p[a] === undefined || p[b] === undefined ? undefined : p[b]! - p[a]!);
  return {
    n: String(ps.length),
    'head → upstream call': p50(d('received', 'upstreamCalled')),
    'call → sent': p50(d('upstreamCalled', 'upstreamSent')),
    'sent → answered': p50(d('upstreamSent', 'upstreamAnswered')),
    'answered → body end': p50(d('upstreamAnswered', 'upstreamEnded')),
    'body end → our answer out': p50(d('upstreamEnded', 'finished')),
    'inside, minus upstream': p50((p) => (p.finished === undefined || p.upstreamSent === undefined || p.upstreamAnswered === undefined ? undefined : p.finished - p.received - (p.upstreamAnswered - p.upstreamSent))),
  };
}

/** A proxy's CPU ms so far: all threads (process.cpuUsage over IPC) and its main thread (/proc, clock ticks; null elsewhere). */
async function cpuNow(t: Target): Promise<{ cpu: number; main: number | null }> {
  const st = await t.api!.stats();
  return { cpu: (st.cpu.user + st.cpu.system) / 1000, main: threadCpuMs(t.api!.proc.pid)?.main ?? null };
}

async function load(t: Target, queries: string[], durationS: number, offset: number): Promise<LoadResult> {
  const before = t.api ? await t.api.stats(true) : null;
  const threadsBefore = threadCpuMs(t.api?.proc.pid);
  let i = offset;
  const result = await autocannon({
    url: t.url,
    connections: CONNECTIONS,
    duration: durationS,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: t.auth },
    requests: [{ setupRequest: (req) => ({ ...req, body: chatBody(queries, i++) }) }],
  });
  const threadsAfter = threadCpuMs(t.api?.proc.pid);
  const after = t.api ? await t.api.stats() : null;
  const completed = result.requests.total;
  const cpuMs = before && after ? (after.cpu.user - before.cpu.user + after.cpu.system - before.cpu.system) / 1000 : null;
  return {
    reqPerSec: completed / durationS,
    completed,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
    cpuPerReq: cpuMs === null ? null : cpuMs / Math.max(1, result['2xx']),
    mainCpuPerReq: threadsBefore && threadsAfter ? (threadsAfter.main - threadsBefore.main) / Math.max(1, result['2xx']) : null,
    peakRssMb: after ? after.peakRss / 1_048_576 : null,
    gcPer1k: before?.gc && after?.gc ? gcDelta(before.gc, after.gc, result['2xx']) : null,
  };
}

/** GC pauses between two stats per 1,000 requests. */
function gcDelta(a: GcCounts, b: GcCounts, requests: number): LoadResult['gcPer1k'] {
  const per = 1000 / Math.max(1, requests);
  return { minor: (b.minor - a.minor) * per, minorMs: (b.minorMs - a.minorMs) * per, major: (b.major - a.major) * per, majorMs: (b.majorMs - a.majorMs) * per };
}

/** Several runs of one target as one figure: req/s and CPU over all requests, the worse latency and RSS. */
function combine(rs: LoadResult[], durationS: number): LoadResult {
  const completed = rs.reduce((a, r) => a + r.completed, 0);
  const cpu = rs.every((r) => r.cpuPerReq !== null) ? rs.reduce((a, r) => a + r.cpuPerReq! * r.completed, 0) / Math.max(1, completed) : null;
  return {
    reqPerSec: completed / (durationS * rs.length),
    completed,
    p50: Math.max(...rs.map((r) => r.p50)),
    p99: Math.max(...rs.map((r) => r.p99)),
    errors: rs.reduce((a, r) => a + r.errors, 0),
    non2xx: rs.reduce((a, r) => a + r.non2xx, 0),
    cpuPerReq: cpu,
    mainCpuPerReq: rs.every((r) => r.mainCpuPerReq !== null) ? rs.reduce((a, r) => a + r.mainCpuPerReq! * r.completed, 0) / Math.max(1, completed) : null,
    peakRssMb: rs.every((r) => r.peakRssMb !== null) ? Math.max(...rs.map((r) => r.peakRssMb!)) : null,
    gcPer1k: rs.every((r) => r.gcPer1k !== null)
      ? {
          minor: rs.reduce((a, r) => a + r.gcPer1k!.minor * r.completed, 0) / Math.max(1, completed),
          minorMs: rs.reduce((a, r) => a + r.gcPer1k!.minorMs * r.completed, 0) / Math.max(1, completed),
          major: rs.reduce((a, r) => a + r.gcPer1k!.major * r.completed, 0) / Math.max(1, completed),
          majorMs: rs.reduce((a, r) => a + r.gcPer1k!.majorMs * r.completed, 0) / Math.max(1, completed),
        }
      : null,
  };
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

/** A script's short name (below node_modules/ or dist/) and the area it counts under: a package, a folder of ours, node core. */
function codeArea(url: string, functionName: string): { short: string; pkg: string } {
  const where = url.replace(/^file:\/\//, '');
  const short = where.includes('node_modules/') ? where.slice(where.lastIndexOf('node_modules/') + 13) : where.includes('/dist/') ? where.slice(where.indexOf('/dist/') + 6) : where || '(native)';
  const pkg = where.includes('node_modules/')
    ? short.split('/').slice(0, short.startsWith('@') ? 2 : 1).join('/')
    : where.includes('/dist/')
      ? `engram ${short.split('/').slice(0, 2).join('/')}`
      : where.startsWith('node:')
        ? 'node core'
        : functionName.startsWith('(') ? functionName : 'native/V8';
  return { short, pkg };
}

interface CoverageScript {
  url: string;
  functions: Array<{ functionName: string; ranges: Array<{ startOffset: number; count: number }> }>;
}

/**
 * What code a chat runs (V8 precise coverage, call counts per function over `chats` chats): the distinct functions
 * run and the calls per chat, by area, and the most-called functions. A lone chat's cost is mostly cold caches
 * (bench/README.md, "Seventeenth pass"), so the code it touches is the figure to shrink, beside its time.
 */
export function summariseCoverage(file: string, chats: number, top = 15): { byArea: Record<string, unknown>[]; top: Record<string, unknown>[] } {
  const scripts = JSON.parse(fs.readFileSync(file, 'utf8')) as CoverageScript[];
  const area = new Map<string, { fns: number; calls: number }>();
  const fn: Array<[string, number]> = [];
  const all = { fns: 0, calls: 0 };
  for (const sc of scripts) {
    for (const f of sc.functions) {
      const calls = f.ranges[0]?.count ?? 0;
      // The script's own top level is not a call a chat made.
      if (calls === 0 || (f.functionName === '' && f.ranges[0]?.startOffset === 0)) continue;
      const { short, pkg } = codeArea(sc.url, f.functionName || '(anonymous)');
      const a = area.get(pkg) ?? { fns: 0, calls: 0 };
      a.fns++;
      a.calls += calls;
      area.set(pkg, a);
      all.fns++;
      all.calls += calls;
      fn.push([`${f.functionName || '(anonymous)'} ${short}@${f.ranges[0]!.startOffset}`, calls]);
    }
  }
  const row = (name: string, a: { fns: number; calls: number }) => ({ area: name, 'functions run': a.fns, 'calls per chat': Number((a.calls / chats).toFixed(1)) });
  return {
    byArea: [row('all', all), ...[...area].sort((x, y) => y[1].calls - x[1].calls).slice(0, 14).map(([k, a]) => row(k, a))],
    top: fn.sort((x, y) => y[1] - x[1]).slice(0, top).map(([k, c]) => ({ function: k, 'calls per chat': Number((c / chats).toFixed(1)) })),
  };
}

/** Top self-time functions of a V8 CPU profile (`--cpu-prof` format), with the share of all samples and by package. */
export function summariseProfile(file: string, top = 15): { top: Record<string, unknown>[]; byArea: Record<string, unknown>[] } {
  const prof = JSON.parse(fs.readFileSync(file, 'utf8')) as { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] };
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  prof.samples.forEach((id, k) => self.set(id, (self.get(id) ?? 0) + (prof.timeDeltas[k] ?? 0)));
  const total = [...self.values()].reduce((a, b) => a + b, 0) || 1;
  const fn = new Map<string, number>();
  const area = new Map<string, number>();
  for (const [id, us] of self) {
    const f = byId.get(id)!.callFrame;
    const { short, pkg } = codeArea(f.url, f.functionName);
    const key = `${f.functionName || '(anonymous)'} ${short}:${f.lineNumber + 1}`;
    fn.set(key, (fn.get(key) ?? 0) + us);
    area.set(pkg, (area.get(pkg) ?? 0) + us);
  }
  const rows = (m: Map<string, number>, n: number, name: string) =>
    [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, n).map(([k, us]) => ({ [name]: k, 'self ms': Number((us / 1000).toFixed(1)), share: `${((100 * us) / total).toFixed(1)}%` }));
  return { top: rows(fn, top, 'function'), byArea: rows(area, 12, 'area') };
}

interface AllocNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: AllocNode[];
}

/** Top allocating functions of a sampled allocation profile (.heapprofile), in KB per request, with their caller. */
export function summariseAllocations(file: string, requests: number, top = 15): Record<string, unknown>[] {
  const root = (JSON.parse(fs.readFileSync(file, 'utf8')) as { head: AllocNode }).head;
  const name = (f: AllocNode['callFrame']) => {
    const where = f.url.replace(/^file:\/\//, '');
    const short = where.includes('node_modules/') ? where.slice(where.lastIndexOf('node_modules/') + 13) : where.includes('/dist/') ? where.slice(where.indexOf('/dist/') + 6) : where || '(native)';
    return `${f.functionName || '(anonymous)'} ${short}:${f.lineNumber + 1}`;
  };
  const bytes = new Map<string, number>();
  let total = 0;
  const walk = (n: AllocNode, caller: string) => {
    const here = name(n.callFrame);
    if (n.selfSize > 0) {
      const k = `${here} ← ${caller}`;
      bytes.set(k, (bytes.get(k) ?? 0) + n.selfSize);
      total += n.selfSize;
    }
    for (const c of n.children) walk(c, here);
  };
  walk(root, '');
  const perReq = (b: number) => (b / 1024 / Math.max(1, requests)).toFixed(2);
  return [{ 'function ← caller': 'all', 'KB/request': perReq(total) }, ...[...bytes].sort((a, b) => b[1] - a[1]).slice(0, top).map(([k, b]) => ({ 'function ← caller': k, 'KB/request': perReq(b) }))];
}

const f1 = (x: number) => x.toFixed(1);
const f2 = (x: number) => x.toFixed(2);
const int = (x: number) => Math.round(x).toLocaleString('en-US');

/** Runs the measurement and returns the issue-14 request-path rows for this build (the `--before` build's figures are printed beside them). */
export async function measureProxyTargets(args: string[] = process.argv.slice(2)): Promise<TargetRow[]> {
  const o = parseOptions(args);
  const model = benchStaticModel();
  const corpus = new Corpus(model);
  const queries = corpus.queries(1000, 11);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'engram-proxy-targets-'));
  const redis = process.env.REDIS_URL ? null : await TestRedis.start();
  const redisUrl = process.env.REDIS_URL ?? redis!.url;
  const children: BenchChild[] = [];
  try {
    const seedDir = path.join(tmp, 'seed');
    const seeded = await buildDatabase(seedDir, redisUrl, model.folder, o.memories, corpus);
    console.log(`database: ${o.memories} memories for one key with ${model.label} vectors, built in ${f1(seeded.seconds)} s`);

    const upstream = spawnChild('upstream', ['upstream', String(UPSTREAM_DELAY_MS)], { PATH: process.env.PATH });
    children.push(upstream);
    const upPort = await upstream.ready;
    const builds: Array<{ label: string; root: string }> = [{ label: 'this build', root: path.resolve(__dirname, '..') }];
    if (o.before) builds.unshift({ label: 'before', root: o.before });
    const targets: Target[] = [{ label: 'upstream direct', url: `http://127.0.0.1:${upPort}/v1/chat/completions`, auth: 'Bearer bench-upstream-key', api: null }];
    // The floor: node:http in and an undici Pool out with nothing of ours between, started as this build's api is.
    const bare = spawnChild(FLOOR, ['bare', String(upPort)], launchEnv(path.resolve(__dirname, '..'), { PATH: process.env.PATH, NODE_ENV: 'production' }));
    children.push(bare);
    targets.push({ label: FLOOR, url: `http://127.0.0.1:${await bare.ready}/v1/chat/completions`, auth: 'Bearer bench-upstream-key', api: bare, floor: true });
    // Each api (and the lean floor) on its own copy of the seeded database.
    const envOn = (label: string, port: number) => {
      const dataDir = path.join(tmp, label.replace(/\W+/g, '-'));
      fs.cpSync(seedDir, dataDir, { recursive: true });
      return benchApiEnv({ dataDir, port, redisUrl, upstreamPort: upPort, modelFolder: model.folder, queuePrefix: 'bench-pt' });
    };
    if (o.lean) {
      const thisRoot = path.resolve(__dirname, '..');
      const lean = spawnChild(LEAN, ['lean', String(upPort), thisRoot], launchEnv(thisRoot, envOn(LEAN, 0)));
      children.push(lean);
      targets.push({ label: LEAN, url: `http://127.0.0.1:${await lean.ready}/v1/chat/completions`, auth: `Bearer ${seeded.secret}`, api: lean, floor: true, memoryOffOnly: true });
    }
    for (const b of builds) {
      const port = await freePort();
      const api = spawnChild(b.label, ['api', b.root], launchEnv(b.root, {
        ...envOn(b.label, port),
        // V8 flags for this build's api only (e.g. --node-options=--max-semi-space-size=8), to weigh them against --before.
        ...(o.nodeOptions && b.label === 'this build' ? { NODE_OPTIONS: o.nodeOptions } : {}),
        ...(b.label === 'this build' ? o.env : {}),
      }));
      children.push(api);
      await api.ready;
      targets.push({ label: b.label, url: `http://127.0.0.1:${port}/v1/chat/completions`, auth: `Bearer ${seeded.secret}`, api });
    }
    const proxies = targets.filter((t) => t.api);
    const apis = proxies.filter((t) => !t.floor);
    const mine = apis[apis.length - 1];

    const seq: Record<string, unknown>[] = [];
    const phaseRows: Record<string, unknown>[] = [];
    const roundRows: Record<string, unknown>[] = [];
    const thr: Record<string, unknown>[] = [];
    const memRows: Record<string, unknown>[] = [];
    const liveRows: Record<string, unknown>[] = [];
    const res = new Map<string, { seq: Map<string, number[]>; load: Map<string, LoadResult> }>();
    let offset = 0;
    for (const memory of [false, true]) {
      // The lean floor does memory-off work only: it has no place in the memory-on figures.
      const modeTargets = memory ? targets.filter((t) => !t.memoryOffOnly) : targets;
      const modeProxies = modeTargets.filter((t) => t.api);
      const mode = memory ? `memory on (hybrid, ${o.memories / 1000}k/key)` : 'memory off';
      for (const t of apis) await t.api!.call({ cmd: 'memory', enabled: memory }, 'memory');
      await warmUp(modeProxies, queries, offset);
      offset += WARM_CHATS;
      // CPU per sequential chat: whether a lone chat's extra latency over the floor is the api's own work or waiting.
      const seqBefore = new Map<string, { cpu: number; main: number | null }>();
      for (const t of modeProxies) seqBefore.set(t.label, await cpuNow(t));
      if (o.seqProfileDir) for (const t of modeProxies) await t.api!.call({ cmd: 'profile', action: 'start' }, 'profile');
      if (o.phases) for (const t of modeProxies) await t.api!.call({ cmd: 'phases', action: 'start' }, 'phases');
      if (o.coverageDir) for (const t of modeProxies) await t.api!.call({ cmd: 'coverage', action: 'start' }, 'coverage');
      // --rounds=N: N sequential runs back to back, pooled for the figures and shown one by one (how much a p50 moves
      // between runs of the same processes: a change smaller than that needs more rounds to be seen).
      const rounds: Array<Map<string, number[]>> = [];
      for (let r = 0; r < o.rounds; r++) {
        rounds.push(await sequential(modeTargets, queries, offset));
        offset += WARMUP + SEQUENTIAL;
      }
      const s = new Map(modeTargets.map((t) => [t.label, rounds.flatMap((x) => x.get(t.label)!).sort((a, b) => a - b)]));
      if (o.rounds > 1) {
        rounds.forEach((x, r) => {
          const d = percentile(x.get('upstream direct')!, 50);
          roundRows.push({ mode, round: r + 1, ...Object.fromEntries(modeProxies.map((t) => [t.label, f2(percentile(x.get(t.label)!, 50) - d)])) });
        });
      }
      if (o.phases) {
        for (const t of modeProxies) {
          const { phases } = (await t.api!.call({ cmd: 'phases', action: 'stop' }, 'phases')) as { phases: RequestPhases[] };
          phaseRows.push({ mode, target: t.label, ...phaseMedians(phases.filter((_, i) => i % (WARMUP + SEQUENTIAL) >= WARMUP)) });
        }
      }
      const seqCpu = new Map<string, { cpu: number; main: number | null }>();
      for (const t of modeProxies) {
        const a = await cpuNow(t);
        const b = seqBefore.get(t.label)!;
        const chats = o.rounds * (WARMUP + SEQUENTIAL);
        seqCpu.set(t.label, { cpu: (a.cpu - b.cpu) / chats, main: a.main === null || b.main === null ? null : (a.main - b.main) / chats });
      }
      if (o.coverageDir) {
        fs.mkdirSync(o.coverageDir, { recursive: true });
        for (const t of modeProxies) {
          const file = path.join(o.coverageDir, `${t.label.replace(/\W+/g, '-')}-${memory ? 'memory-on' : 'memory-off'}-sequential.coverage.json`);
          await t.api!.call({ cmd: 'coverage', action: 'stop', file }, 'coverage');
          const c = summariseCoverage(file, o.rounds * (WARMUP + SEQUENTIAL));
          console.log(`\nCode run per chat, ${t.label}, ${mode}, sequential chats (${file})`);
          console.table(c.byArea);
          console.table(c.top);
        }
      }
      if (o.seqProfileDir) {
        fs.mkdirSync(o.seqProfileDir, { recursive: true });
        for (const t of modeProxies) {
          const file = path.join(o.seqProfileDir, `${t.label.replace(/\W+/g, '-')}-${memory ? 'memory-on' : 'memory-off'}-sequential.cpuprofile`);
          await t.api!.call({ cmd: 'profile', action: 'stop', file }, 'profile');
          console.log(`\nCPU profile, ${t.label}, ${mode}, sequential chats (${file})`);
          console.table(summariseProfile(file).byArea);
        }
      }
      const direct = s.get('upstream direct')!;
      for (const t of modeTargets) {
        const xs = s.get(t.label)!;
        const c = seqCpu.get(t.label);
        seq.push({ mode, target: t.label, n: xs.length, 'p50 ms': f2(percentile(xs, 50)), 'p99 ms': f2(percentile(xs, 99)), 'overhead p50 ms': t.api ? f2(percentile(xs, 50) - percentile(direct, 50)) : '', 'overhead p99 ms': t.api ? f2(percentile(xs, 99) - percentile(direct, 99)) : '', 'api CPU ms/chat': c ? f2(c.cpu) : '', 'of it main thread': c?.main == null ? '' : f2(c.main) });
      }
      // A-B-B-A: direct, the builds, the builds reversed, direct; each target's figure is over both of its runs,
      // so a machine that gets busier (or quieter) during the mode favours no one.
      const runs = new Map<string, LoadResult[]>();
      for (const t of [modeTargets[0], ...modeProxies, ...[...modeProxies].reverse(), modeTargets[0]]) {
        const r = await load(t, queries, o.durationS, offset);
        offset += r.completed + 1000;
        runs.set(t.label, [...(runs.get(t.label) ?? []), r]);
      }
      const loads = new Map<string, LoadResult>();
      for (const t of modeTargets) loads.set(t.label, combine(runs.get(t.label)!, o.durationS));
      const d = loads.get('upstream direct')!;
      for (const t of modeTargets) {
        const r = loads.get(t.label)!;
        thr.push({ mode, target: t.label, 'req/s': int(r.reqPerSec), 'share of direct': t.api ? f2(r.reqPerSec / d.reqPerSec) : '', 'p50 ms': r.p50, 'p99 ms': r.p99, 'errors+non2xx': r.errors + r.non2xx, 'api CPU ms/req': r.cpuPerReq === null ? '' : f2(r.cpuPerReq), 'of it main thread': r.mainCpuPerReq === null ? '' : f2(r.mainCpuPerReq), 'GC per 1k req: scavenges (ms) / mark-compacts (ms)': r.gcPer1k ? `${f1(r.gcPer1k.minor)} (${f1(r.gcPer1k.minorMs)}) / ${f2(r.gcPer1k.major)} (${f1(r.gcPer1k.majorMs)})` : '', 'api peak RSS MB': r.peakRssMb === null ? '' : int(r.peakRssMb), runs: runs.get(t.label)!.map((x) => int(x.reqPerSec)).join(' / ') });
      }
      res.set(mode, { seq: s, load: loads });
      // Where the RSS is, right after this mode's load (V8 heap, buffers, the rest native: SQLite, code, libraries).
      for (const t of modeProxies) {
        const st = await t.api!.stats(false, true);
        const m = st.memory!;
        const sp = st.spaces ?? {};
        const mbs = (x: number) => f1(x / 1_048_576);
        memRows.push({ mode, target: t.label, 'rss MB': mbs(m.rss), 'heap total MB': mbs(m.heapTotal), 'of it new space': mbs(sp.new_space ?? 0), 'old space': mbs(sp.old_space ?? 0), 'heap used MB': mbs(m.heapUsed), 'external MB': mbs(m.external), 'array buffers MB': mbs(m.arrayBuffers), 'rest (native) MB': mbs(m.rss - m.heapTotal - m.external) });
      }
      // What of it is live: after two full collections (only at the end, or per mode with --heap, so the memory-on
      // peak starts from the same heap as in runs without it). --heap also writes a .heapsnapshot per build and mode.
      if (memory || o.heapDir) {
        if (o.heapDir) fs.mkdirSync(o.heapDir, { recursive: true });
        for (const t of modeProxies) {
          const file = o.heapDir ? path.join(o.heapDir, `${t.label.replace(/\W+/g, '-')}-${memory ? 'memory-on' : 'memory-off'}.heapsnapshot`) : undefined;
          const h = (await t.api!.call({ cmd: 'heap', file }, 'heap')) as { memory: NodeJS.MemoryUsage; spaces: Record<string, { size: number; used: number }> };
          const m = h.memory;
          const mbs = (x: number) => f1(x / 1_048_576);
          const sp = (n: string) => h.spaces[n] ?? { size: 0, used: 0 };
          liveRows.push({ mode, target: t.label, 'rss MB': mbs(m.rss), 'heap used MB': mbs(m.heapUsed), 'old space used / size': `${mbs(sp('old_space').used)} / ${mbs(sp('old_space').size)}`, 'new space size': mbs(sp('new_space').size), 'code + large object': mbs(sp('code_space').size + sp('large_object_space').size), 'external MB': mbs(m.external), 'array buffers MB': mbs(m.arrayBuffers), 'rest (native) MB': mbs(m.rss - m.heapTotal - m.external) });
        }
      }
      if (o.heapDir) {
        // What a chat allocates (sampled, collected objects included) over a 5 s run per build: .heapprofile files.
        // Then what of it outlived a scavenge (promoted to the old space, where only a mark-compact frees it, or live).
        for (const survivors of [false, true]) {
          for (const t of apis) {
            const file = path.join(o.heapDir, `${t.label.replace(/\W+/g, '-')}-${memory ? 'memory-on' : 'memory-off'}${survivors ? '-survivors' : ''}.heapprofile`);
            await t.api!.call({ cmd: 'alloc', action: 'start', survivors }, 'alloc');
            const r = await load(t, queries, Math.min(5, o.durationS), offset);
            offset += r.completed + 1000;
            await t.api!.call({ cmd: 'alloc', action: 'stop', file }, 'alloc');
            console.log(`\nallocation profile${survivors ? ', only what outlived a scavenge' : ''}, ${t.label}, ${mode}: ${r.completed} requests (${file}); KB per request by allocating function:`);
            console.table(summariseAllocations(file, r.completed));
          }
        }
      }
      if (o.profileDir) {
        fs.mkdirSync(o.profileDir, { recursive: true });
        // The floors too: where a build's time goes beside theirs.
        for (const t of modeProxies) {
          const file = path.join(o.profileDir, `${t.label.replace(/\W+/g, '-')}-${memory ? 'memory-on' : 'memory-off'}.cpuprofile`);
          await t.api!.call({ cmd: 'profile', action: 'start' }, 'profile');
          const r = await load(t, queries, Math.min(5, o.durationS), offset);
          offset += r.completed + 1000;
          await t.api!.call({ cmd: 'profile', action: 'stop', file }, 'profile');
          const p = summariseProfile(file);
          console.log(`\nCPU profile, ${t.label}, ${mode}: ${r.completed} requests under autocannon (${file})`);
          console.table(p.byArea);
          console.table(p.top);
        }
      }
    }
    for (const [label, x] of injectedSeen) console.log(`${label}: ${x.chats} chats with memory injected, on average ${f1(x.injected / x.chats)} memories and ${int(x.tokens / x.chats)} tokens each`);
    console.log(`\nSequential requests (${SEQUENTIAL} after ${WARM_CHATS} chats served 8 at a time and ${WARMUP} sequential warm-up, targets alternating request by request: direct first, then the bare node proxy and the builds, their order reversed every round and rotated every two), upstream fixed ${UPSTREAM_DELAY_MS} ms:`);
    console.table(seq);
    if (roundRows.length > 0) {
      console.log(`\nOverhead p50 over direct per sequential round (${o.rounds} rounds of ${SEQUENTIAL} per mode, the figures above pooled over them), ms:`);
      console.table(roundRows);
    }
    if (o.phases) {
      console.log('\nInside each proxy, p50 of each phase of the sequential chats, ms (Node\'s and undici\'s diagnostics channels): request head parsed → upstream call made → its head written → upstream answered → its body ended → our answer handed to the kernel:');
      console.table(phaseRows);
    }
    console.log(`\nautocannon, ${CONNECTIONS} connections, ${o.durationS} s per run, two runs per target in the order direct, proxies (the bare node proxy, the builds), proxies reversed, direct, every chat a new user question; api CPU = process.cpuUsage() delta in the api process / 2xx responses (all its threads; "of it main thread" from /proc/<pid>/task, in clock ticks: the rest is V8's GC and compiler threads and libuv's pool):`);
    console.table(thr);
    console.log('\napi memory right after each mode\'s load runs (process.memoryUsage()):');
    console.table(memRows);
    console.log('\napi memory after two full collections (what is live), at the end of the run' + (o.heapDir ? ` and after each mode (heap snapshots in ${o.heapDir})` : '') + ':');
    console.table(liveRows);

    const off = res.get('memory off')!;
    const on = res.get(`memory on (hybrid, ${o.memories / 1000}k/key)`)!;
    const ovh = (m: typeof off, p: number) => percentile(m.seq.get(mine.label)!, p) - percentile(m.seq.get('upstream direct')!, p);
    const direct = (m: typeof off) => m.seq.get('upstream direct')!;
    const lm = (m: typeof off) => m.load.get(mine.label)!;
    const ld = (m: typeof off) => m.load.get('upstream direct')!;
    const share = (m: typeof off) => lm(m).reqPerSec / ld(m).reqPerSec;
    const clean = (m: typeof off) => lm(m).errors + lm(m).non2xx === 0;
    // The same figure for the bare node proxy: what is left when nothing of ours runs.
    const fovh = (m: typeof off, p: number) => percentile(m.seq.get(FLOOR)!, p) - percentile(m.seq.get('upstream direct')!, p);
    const fl = (m: typeof off) => m.load.get(FLOOR)!;
    // With --lean, the memory-off rows also name the lean floor's figure (it runs with memory off only).
    const leanSeq = off.seq.get(LEAN);
    const leanLoad = off.load.get(LEAN);
    const leanOvh = (p: number) => (leanSeq ? `; lean proxy +${f2(percentile(leanSeq, p) - percentile(direct(off), p))} ms` : '');
    const fshare = (m: typeof off) => `bare node proxy ${f2(fl(m).reqPerSec / ld(m).reqPerSec)}${m === off && leanLoad ? `; lean proxy ${f2(leanLoad.reqPerSec / ld(m).reqPerSec)}` : ''}`;
    const fcpu = (m: typeof off) => `bare node proxy ${f2(fl(m).cpuPerReq!)} ms${m === off && leanLoad ? `; lean proxy ${f2(leanLoad.cpuPerReq!)} ms` : ''}`;
    const rows: TargetRow[] = [
      { figure: 'proxy overhead p50, memory off', measured: `${f2(ovh(off, 50))} ms`, baseline: `upstream direct p50 ${f2(percentile(direct(off), 50))} ms; bare node proxy +${f2(fovh(off, 50))} ms${leanOvh(50)}`, target: '≤ 1 ms', pass: ovh(off, 50) <= 1 },
      { figure: 'proxy overhead p99, memory off', measured: `${f2(ovh(off, 99))} ms`, baseline: `upstream direct p99 ${f2(percentile(direct(off), 99))} ms; bare node proxy +${f2(fovh(off, 99))} ms${leanOvh(99)}`, target: '≤ 3 ms', pass: ovh(off, 99) <= 3 },
      { figure: `proxy overhead p50, memory on (hybrid, ${o.memories / 1000}k/key)`, measured: `${f2(ovh(on, 50))} ms`, baseline: `upstream direct p50 ${f2(percentile(direct(on), 50))} ms; bare node proxy +${f2(fovh(on, 50))} ms`, target: '≤ 3 ms', pass: ovh(on, 50) <= 3 },
      { figure: 'api CPU per proxied chat, memory off', measured: `${f2(lm(off).cpuPerReq!)} ms`, baseline: fcpu(off), target: '≤ 0.3 ms', pass: lm(off).cpuPerReq! <= 0.3 },
      { figure: `api CPU per proxied chat, memory on (hybrid, ${o.memories / 1000}k/key)`, measured: `${f2(lm(on).cpuPerReq!)} ms`, baseline: fcpu(on), target: '≤ 1.5 ms', pass: lm(on).cpuPerReq! <= 1.5 },
      { figure: `proxied req/s share of direct, memory on (hybrid, ${o.memories / 1000}k/key)`, measured: `${f2(share(on))} (${int(lm(on).reqPerSec)} req/s${clean(on) ? '' : ', ERRORS'})`, baseline: `upstream direct ${int(ld(on).reqPerSec)} req/s; ${fshare(on)}`, target: '≥ 0.5', pass: share(on) >= 0.5 && clean(on) },
      { figure: 'proxied req/s share of direct, memory off', measured: `${f2(share(off))} (${int(lm(off).reqPerSec)} req/s${clean(off) ? '' : ', ERRORS'})`, baseline: `upstream direct ${int(ld(off).reqPerSec)} req/s; ${fshare(off)}`, target: '≥ 0.9', pass: share(off) >= 0.9 && clean(off) },
      { figure: 'api peak RSS under that load', measured: `${int(Math.max(lm(on).peakRssMb!, lm(off).peakRssMb!))} MB`, baseline: `bare node proxy ${int(Math.max(fl(on).peakRssMb!, fl(off).peakRssMb!))} MB`, target: '≤ 250 MB', pass: Math.max(lm(on).peakRssMb!, lm(off).peakRssMb!) <= 250 },
    ];
    return rows;
  } finally {
    for (const c of children) c.kill();
    if (redis) await redis.stop(true);
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** `npm run bench -- proxy-targets [--before=<dist root>] [--profile=<dir>]`: prints the tables and writes bench/results/proxy-targets.json; never asserts. */
export async function runProxyTargetsBench(): Promise<void> {
  const args = process.argv.slice(2);
  const rows = await measureProxyTargets(args);
  reportTargets('proxy-targets', rows, { options: parseOptions(args) });
}

if (require.main === module) {
  runProxyTargetsBench().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
