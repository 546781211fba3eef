/**
 * A process of the proxy-targets bench (bench/proxy-targets.bench.ts), so the load generator's CPU is
 * never counted as the api's:
 *   node proxy-child.js upstream          a fixed-delay OpenAI-style upstream (20 ms, one canned completion)
 *   node proxy-child.js api <dist root>    the real api (`startApi` of the build under <dist root>) with its env
 *   node proxy-child.js bare <upstream port> the floor: node:http in, an undici Pool out, the bytes passed through
 *                                            both ways (no parse, no auth, no log, no metrics): what any Node proxy pays
 *   node proxy-child.js lean <upstream port> <dist root>   the memory-off floor: what a memory-off chat must do (key
 *                                            lookup, body parse and schema, headers, access log, latency metric), on
 *                                            node:http with that build's pieces; the api's env (DATA_DIR: its database)
 * It talks to the parent over IPC: {type:'ready', port} once listening; answers {cmd:'stats'} with its
 * CPU time, GC pauses and RSS (peak since the last {cmd:'stats', reset:true}; with detail:true also process.memoryUsage()), {cmd:'memory', enabled} by switching
 * memory on or off, {cmd:'profile', action:'start'|'stop', file} with a V8 CPU profile of the span between,
 * {cmd:'alloc', action:'start'|'stop', file, survivors?} with a sampled allocation profile (.heapprofile, collected objects
 * included; with survivors, not those a scavenge collected),
 * {cmd:'coverage', action:'start'|'stop', file} with V8's call count of every function run in the span between
 * (precise coverage, function granularity: the code a chat touches, not its time),
 * {cmd:'heap', file?} with the memory after two full collections (and a heap snapshot written to file),
 * {cmd:'phases', action:'start'|'stop'} with each request's phases between (PhaseTimer; one request at a time).
 */
import crypto from 'node:crypto';
import diagnostics from 'node:diagnostics_channel';
import fs from 'node:fs';
import http from 'node:http';
import inspector from 'node:inspector';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { constants as perfConstants, performance, PerformanceObserver } from 'node:perf_hooks';
import v8 from 'node:v8';
import vm from 'node:vm';
import Database from 'better-sqlite3';
import { Histogram, Registry } from 'prom-client';
import { Pool } from 'undici';

interface Msg {
  cmd: 'stats' | 'memory' | 'profile' | 'alloc' | 'coverage' | 'heap' | 'phases' | 'exit';
  reset?: boolean;
  detail?: boolean;
  enabled?: boolean;
  action?: 'start' | 'stop';
  file?: string;
  /** alloc: leave out what scavenges collected (what is left was promoted to the old space, or is still live). */
  survivors?: boolean;
}

const send = (m: unknown) => process.send?.(m);

/**
 * Resident bytes by kind of mapping (Linux /proc/self/smaps; empty elsewhere): the process's files (node, libraries),
 * malloc's main heap ([heap]) and anonymous mappings (V8's heap pages, ArrayBuffers, WebAssembly memories, malloc's
 * per-thread arenas), and the largest anonymous mappings by resident size.
 */
function residentByMapping(): { kinds: Record<string, number>; largest: string[] } {
  let text: string;
  try {
    text = fs.readFileSync('/proc/self/smaps', 'utf8');
  } catch {
    return { kinds: {}, largest: [] };
  }
  const kinds: Record<string, number> = {};
  const anon: Array<{ desc: string; rss: number }> = [];
  let kind = 'other';
  let desc = '';
  for (const line of text.split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      const name = head[4]!;
      kind = name === '[heap]' ? 'malloc main heap' : name.startsWith('/') ? 'files' : name === '' ? 'anonymous' : 'other';
      desc = `${head[1]} ${head[3]} ${((parseInt(head[2]!, 16) - parseInt(head[1]!, 16)) / 1_048_576).toFixed(1)} MB mapped`;
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) {
      kinds[kind] = (kinds[kind] ?? 0) + Number(rss[1]) * 1024;
      if (kind === 'anonymous') anon.push({ desc, rss: Number(rss[1]) * 1024 });
    }
  }
  anon.sort((x, y) => y.rss - x.rss);
  return { kinds, largest: anon.slice(0, 20).map((x) => `${(x.rss / 1_048_576).toFixed(1)} MB resident: ${x.desc}`) };
}

/** A canned non-streaming completion after a fixed delay: the cheapest upstream that still looks like the real wire format. */
async function runUpstream(delayMs: number): Promise<void> {
  let seq = 0;
  const server = http.createServer((req, res) => {
    req.on('error', () => undefined);
    res.on('error', () => undefined);
    req.resume();
    req.on('end', () => {
      setTimeout(() => {
        const text = JSON.stringify({
          id: `chatcmpl-bench-${++seq}`,
          object: 'chat.completion',
          created: 1_700_000_000,
          model: 'gpt-4o-mini',
          choices: [{ index: 0, message: { role: 'assistant', content: 'Hello from the bench upstream.', refusal: null }, logprobs: null, finish_reason: 'stop' }],
          usage: { prompt_tokens: 10, completion_tokens: 7, total_tokens: 17 },
        });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), 'x-request-id': `req_bench_${seq}` });
        res.end(text);
      }, delayMs);
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  send({ type: 'ready', port: (server.address() as AddressInfo).port });
}

interface RunningApiLike {
  ctx: { settings: { updateMemory(p: { enabled: boolean }): unknown } };
  port: number;
}

async function runApi(root: string): Promise<void> {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { loadEnv } = require(path.join(root, 'src/config/env.js')) as { loadEnv(): unknown };
  const logger = require(path.join(root, 'src/logger.js')) as {
    createLogger(level: string, name: string, destination?: unknown): unknown;
    processLogDestination?(flushMs: number): unknown;
  };
  const { startApi, apiProcessLogger } = require(path.join(root, 'src/api.js')) as {
    startApi(env: unknown, log: unknown): Promise<RunningApiLike>;
    apiProcessLogger?(env: unknown): unknown;
  };
  const env = loadEnv() as { LOG_LEVEL: string; LOG_FLUSH_MS?: number };
  // The logger `engram api` runs with (buffered stdout since b04845c); until this child used it, the bench measured
  // pino's default destination, one write per access line, which the api process never had. A build from before
  // apiProcessLogger gets the same logger from its parts.
  const log = apiProcessLogger
    ? apiProcessLogger(env)
    : logger.processLogDestination && env.LOG_FLUSH_MS !== undefined
      ? logger.createLogger(env.LOG_LEVEL, 'engram-api', logger.processLogDestination(env.LOG_FLUSH_MS))
      : logger.createLogger(env.LOG_LEVEL, 'engram-api');
  const api = await startApi(env, log);
  serveCommands(api.port, (enabled) => api.ctx.settings.updateMemory({ enabled }));
}

/**
 * The floor under any Node proxy, measured beside the builds: a node:http server that forwards each request's bytes
 * to the upstream over a keep-alive undici Pool (as src/proxy/upstream.ts does) and sends the upstream's status,
 * content type and bytes back. No JSON parse, no auth, no access log, no metrics, no memory: what is left is Node's
 * HTTP parsing and writing on both sides, the sockets and the event loop.
 */
async function runBare(upstreamPort: number): Promise<void> {
  const pool = new Pool(`http://127.0.0.1:${upstreamPort}`);
  const server = http.createServer((req, res) => {
    req.on('error', () => undefined);
    res.on('error', () => undefined);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      pool
        .request({ path: req.url ?? '/', method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer bench-upstream-key' }, body: Buffer.concat(chunks) })
        .then(async (up) => {
          const body = Buffer.from(await up.body.arrayBuffer());
          res.writeHead(up.statusCode, { 'content-type': String(up.headers['content-type'] ?? 'application/json'), 'content-length': String(body.length) });
          res.end(body);
        })
        .catch(() => {
          res.writeHead(502);
          res.end();
        });
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  serveCommands((server.address() as AddressInfo).port, () => undefined);
}

/**
 * A second floor, for memory off: the work Engram must do for a memory-off chat, written straight on node:http with the
 * build's own libraries and pieces, and nothing else: a request id, the bearer key hashed (the build's hashSecret) and
 * looked up in the build's database (`PRAGMA data_version` once per event-loop turn, the key table re-read when it
 * changed), the declared length checked, the body read, JSON.parse and the build's chat schema (zod), the memory
 * setting read, an undici Pool to the upstream with the raw bytes, the answer with the api's headers (x-request-id, the
 * four /v1 security headers, the four x-memory-*), then the access log line through the api's own logger and the
 * latency histogram (prom-client). Left out: the auth brake, express, the depth and duplicate-key scan, streaming,
 * the client-gone and timeout handling, error shapes. What it reads above the bare proxy is what those features cost
 * at least; what the build reads above it is the cost of how the build does them.
 */
async function runLean(upstreamPort: number, root: string): Promise<void> {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { loadEnv } = require(path.join(root, 'src/config/env.js')) as { loadEnv(): { DATA_DIR: string } };
  type Log = { info(o: object, msg: string): void; child(b: object, o: object): Log };
  const { apiProcessLogger } = require(path.join(root, 'src/api.js')) as { apiProcessLogger(env: unknown): Log };
  const { hashSecret } = require(path.join(root, 'src/auth/api-keys.service.js')) as { hashSecret(s: string): string };
  const { chatCompletionBody } = require(path.join(root, 'src/http/routes/proxy.schema.js')) as { chatCompletionBody: { safeParse(v: unknown): { success: boolean } } };
  /* eslint-enable @typescript-eslint/no-require-imports */
  const env = loadEnv();
  // The api's logger, less its redaction, as the api's access log line is written (src/http/app.ts accessLogger).
  const log = apiProcessLogger(env).child({}, { redact: [] });
  const db = new Database(path.join(env.DATA_DIR, 'engram.db'), { readonly: true });
  const version = db.prepare('PRAGMA data_version').pluck();
  const readKeys = db.prepare('SELECT secret_hash AS hash, id FROM api_keys WHERE revoked_at IS NULL');
  let keys = new Map<string, string>();
  let seenVersion = -1;
  let turnRead = false;
  const endTurn = () => (turnRead = false);
  const keyFor = (secret: string): string | undefined => {
    if (!turnRead) {
      turnRead = true;
      setImmediate(endTurn);
      const v = version.get() as number;
      if (v !== seenVersion) {
        seenVersion = v;
        keys = new Map((readKeys.all() as Array<{ hash: string; id: string }>).map((k) => [k.hash, k.id]));
      }
    }
    return keys.get(hashSecret(secret));
  };
  const latency = new Histogram({ name: 'lean_http_request_duration_seconds', help: 'latency', labelNames: ['method', 'route', 'status'], buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10], registers: [new Registry()] });
  const memory = { enabled: false, maxTokens: 2000 };
  const pool = new Pool(`http://127.0.0.1:${upstreamPort}`);
  const fail = (res: http.ServerResponse, status: number, message: string) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message } }));
  };
  const server = http.createServer((req, res) => {
    const started = process.hrtime.bigint();
    const id = crypto.randomUUID();
    req.on('error', () => undefined);
    res.on('error', () => undefined);
    res.on('close', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      latency.observe({ method: req.method, route: '/v1/chat/completions', status: String(res.statusCode) }, seconds);
      log.info({ req: { id, method: req.method, path: req.url }, res: { statusCode: res.statusCode }, responseTime: Math.round(seconds * 1000) }, 'request completed');
    });
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return fail(res, 404, 'not found');
    const auth = req.headers.authorization;
    const key = auth?.startsWith('Bearer ') ? keyFor(auth.slice(7)) : undefined;
    if (!key) return fail(res, 401, 'invalid api key');
    const length = Number(req.headers['content-length']);
    if (!(length > 0) || length > 20 * 1024 * 1024 || req.headers['content-type'] !== 'application/json') return fail(res, 400, 'not a JSON body');
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      let body: unknown;
      try {
        body = JSON.parse(bytes.toString('utf8'));
      } catch {
        return fail(res, 400, 'invalid JSON');
      }
      if (!chatCompletionBody.safeParse(body).success) return fail(res, 400, 'invalid body');
      const status = memory.enabled && memory.maxTokens > 0 ? 'empty' : 'disabled';
      pool
        .request({ path: '/v1/chat/completions', method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer bench-upstream-key' }, body: bytes })
        .then(async (up) => {
          const out = Buffer.from(await up.body.arrayBuffer());
          res.writeHead(up.statusCode, {
            'content-type': String(up.headers['content-type'] ?? 'application/json'),
            'content-length': String(out.length),
            'x-request-id': id,
            'x-content-type-options': 'nosniff',
            'x-frame-options': 'DENY',
            'content-security-policy': "frame-ancestors 'none'",
            'cache-control': 'no-store',
            'x-memory-injected': '0',
            'x-memory-tokens': '0',
            'x-memory-strategy': 'none',
            'x-memory-status': status,
          });
          res.end(out);
        })
        .catch(() => fail(res, 502, 'upstream failed'));
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  serveCommands((server.address() as AddressInfo).port, (enabled) => (memory.enabled = enabled));
}

/** The moments of one proxied request, in ms (performance.now), from Node's and undici's diagnostics channels. */
export interface RequestPhases {
  /** http.server.request.start: the client's request head parsed. */
  received: number;
  /** undici:request:create: the upstream call made. */
  upstreamCalled?: number;
  /** undici:client:sendHeaders: its head written to the socket. */
  upstreamSent?: number;
  /** undici:request:headers: the upstream's status and headers arrived. */
  upstreamAnswered?: number;
  /** undici:request:trailers: the upstream's body ended. */
  upstreamEnded?: number;
  /** http.server.response.finish: the answer handed to the kernel. */
  finished?: number;
}

/**
 * Where a lone request's time goes inside a proxy process: the phases of each request while on (sequential chats only:
 * with one request in flight, the events pair up in order). Subscribing makes undici publish, a few µs per request.
 */
class PhaseTimer {
  private current: RequestPhases | null = null;
  private done: RequestPhases[] = [];
  private readonly subs: Array<[string, (m: unknown) => void]> = [
    ['http.server.request.start', () => this.open()],
    ['undici:request:create', () => this.mark('upstreamCalled')],
    ['undici:client:sendHeaders', () => this.mark('upstreamSent')],
    ['undici:request:headers', () => this.mark('upstreamAnswered')],
    ['undici:request:trailers', () => this.mark('upstreamEnded')],
    ['http.server.response.finish', () => this.close()],
  ];

  start(): void {
    this.done = [];
    for (const [name, fn] of this.subs) diagnostics.subscribe(name, fn);
  }

  stop(): RequestPhases[] {
    for (const [name, fn] of this.subs) diagnostics.unsubscribe(name, fn);
    return this.done;
  }

  private open(): void {
    this.current = { received: performance.now() };
  }

  private mark(k: Exclude<keyof RequestPhases, 'received'>): void {
    if (this.current && this.current[k] === undefined) this.current[k] = performance.now();
  }

  private close(): void {
    if (!this.current) return;
    this.current.finished = performance.now();
    this.done.push(this.current);
    this.current = null;
  }
}

/** Answers the parent's commands (stats, memory, profile, alloc, heap, phases, exit) and reports ready on `port`. */
function serveCommands(port: number, setMemory: (enabled: boolean) => void): void {
  // Main-thread GC pauses (count and ms) by kind since start: minor = scavenge, major = mark-compact's final pause.
  const gc = { minor: 0, minorMs: 0, major: 0, majorMs: 0, other: 0, otherMs: 0 };
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = (e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
      const k = kind === perfConstants.NODE_PERFORMANCE_GC_MINOR ? 'minor' : kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR ? 'major' : 'other';
      gc[k]++;
      gc[`${k}Ms`] += e.duration;
    }
  }).observe({ entryTypes: ['gc'] });
  // memoryUsage.rss() alone: memoryUsage() walks the V8 heap spaces too, which showed up in the profile.
  let peakRss = process.memoryUsage.rss();
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, process.memoryUsage.rss());
  }, 100);
  sampler.unref();
  const session = new inspector.Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) => session.post(method, params ?? {}, (err, res) => (err ? reject(err) : resolve(res))));
  const phases = new PhaseTimer();
  process.on('message', (m: Msg) => {
    void (async () => {
      if (m.cmd === 'phases') {
        if (m.action === 'start') phases.start();
        send({ type: 'phases', phases: m.action === 'stop' ? phases.stop() : [] });
        return;
      }
      if (m.cmd === 'stats') {
        const rss = process.memoryUsage.rss();
        peakRss = Math.max(peakRss, rss);
        // The breakdown only on request: memoryUsage() walks the heap spaces.
        const spaces = m.detail ? Object.fromEntries(v8.getHeapSpaceStatistics().map((x) => [x.space_name, x.space_size])) : undefined;
        send({ type: 'stats', cpu: process.cpuUsage(), rss, peakRss, gc: { ...gc }, ...(m.detail ? { memory: process.memoryUsage(), spaces } : {}) });
        if (m.reset) peakRss = rss;
      } else if (m.cmd === 'memory') {
        setMemory(m.enabled === true);
        send({ type: 'memory' });
      } else if (m.cmd === 'profile') {
        if (m.action === 'start') {
          await post('Profiler.enable');
          await post('Profiler.setSamplingInterval', { interval: 200 });
          await post('Profiler.start');
        } else {
          const { profile } = (await post('Profiler.stop')) as { profile: unknown };
          fs.writeFileSync(m.file!, JSON.stringify(profile));
        }
        send({ type: 'profile' });
      } else if (m.cmd === 'alloc') {
        // Sampled allocations by site, the collected ones included: what a chat allocates, garbage or not.
        if (m.action === 'start') {
          await post('HeapProfiler.enable');
          await post('HeapProfiler.startSampling', { samplingInterval: 16_384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: m.survivors !== true });
        } else {
          const { profile } = (await post('HeapProfiler.stopSampling')) as { profile: unknown };
          fs.writeFileSync(m.file!, JSON.stringify(profile));
        }
        send({ type: 'alloc' });
      } else if (m.cmd === 'coverage') {
        // Call counts per function from here on: the first take only resets the counters started with.
        if (m.action === 'start') {
          await post('Profiler.enable');
          await post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
          await post('Profiler.takePreciseCoverage');
        } else {
          const { result } = (await post('Profiler.takePreciseCoverage')) as { result: unknown };
          await post('Profiler.stopPreciseCoverage');
          fs.writeFileSync(m.file!, JSON.stringify(result));
        }
        send({ type: 'coverage' });
      } else if (m.cmd === 'heap') {
        // What is live, not what is garbage not yet collected: two full collections, then the breakdown (and a snapshot when asked).
        const before = process.memoryUsage();
        v8.setFlagsFromString('--expose-gc');
        const gc = vm.runInNewContext('gc') as () => void;
        gc();
        gc();
        const memory = process.memoryUsage();
        const spaces = Object.fromEntries(v8.getHeapSpaceStatistics().map((x) => [x.space_name, { size: x.space_size, used: x.space_used_size }]));
        if (m.file) v8.writeHeapSnapshot(m.file);
        send({ type: 'heap', before, memory, spaces, maps: residentByMapping() });
      } else if (m.cmd === 'exit') {
        process.exit(0);
      }
    })().catch((err: unknown) => send({ type: 'error', message: String(err) }));
  });
  send({ type: 'ready', port });
}

const [role, arg, arg2] = process.argv.slice(2);
const started =
  role === 'upstream'
    ? runUpstream(Number(arg ?? 20))
    : role === 'bare'
      ? runBare(Number(arg))
      : role === 'lean'
        ? runLean(Number(arg), path.resolve(arg2 ?? path.join(__dirname, '..')))
        : runApi(path.resolve(arg ?? path.join(__dirname, '..')));
started.catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
// The parent going away ends the child too.
process.on('disconnect', () => process.exit(0));
