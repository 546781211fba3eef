import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { loadEnv } from '../src/config/env';
import { buildApiContext } from '../src/api';
import { MemoryReadCache } from '../src/memory/read-cache';
import { MemoryService } from '../src/memory/memory.service';
import { silentLog } from '../test/helpers/env';
import { TestRedis, freePort } from '../test/helpers/redis-server';
import { benchStaticModel } from './build-wink-model';
import { startFixedUpstream } from './fixed-upstream';
import { Corpus, embedPending, rng, seedMemories, useStaticSource } from './retrieval.bench';

/**
 * Load (issue #15, item 5): autocannon against a spawned api (the built CLI, production mode) in
 * front of a fake upstream that answers every chat after a fixed 20 ms. Cases: the upstream called
 * directly (the same-run baseline), the proxy with memory off, memory on with keyword retrieval
 * (strategy exact) and with hybrid (static model: the wink conversion of bench/build-wink-model.ts),
 * and POST /api/memory/retrieve-preview (keyword and hybrid); 10,000 memories for the chatting key and
 * 10,000 for another key in the same tables. Per case: requests/s, latency p50/p99, errors (connection
 * errors, timeouts and non-2xx answers) and the api's RSS (peak while the case ran). No worker runs,
 * so the extraction jobs the chats enqueue wait in Redis (as they would with busy workers).
 * Options: --seconds=N (default 10 per case), --connections=N (default 32).
 */
const UPSTREAM_DELAY_MS = 20;
const PER_KEY = 10_000;
const QUERIES = 500;

function numArg(name: string, def: number, max: number): number {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  const n = a ? Number(a.slice(name.length + 3)) : def;
  if (!Number.isInteger(n) || n < 1 || n > max) throw new Error(`--${name} must be an integer in [1, ${max}]`);
  return n;
}

function rssMb(pid: number | undefined): number {
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 102.4) / 10 : NaN;
  } catch {
    return NaN;
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function runLoadBench(): Promise<void> {
  const seconds = numArg('seconds', 10, 600);
  const connections = numArg('connections', 32, 1024);
  const cli = path.resolve(__dirname, '../src/cli.js');
  if (!fs.existsSync(cli)) throw new Error(`${cli} is missing: npm run bench builds it`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'engram-load-'));
  const model = benchStaticModel();
  const redis = await TestRedis.start({ persist: false });
  const upstream = await startFixedUpstream(UPSTREAM_DELAY_MS);
  const token = crypto.randomBytes(24).toString('hex');
  const raw: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    HOST: '127.0.0.1',
    DATA_DIR: path.join(dir, 'data'),
    REDIS_URL: redis.url,
    QUEUE_PREFIX: `load-${crypto.randomBytes(4).toString('hex')}`,
    MANAGEMENT_TOKEN: token,
    UPSTREAM_BASE_URL: `${upstream.url}/v1`,
    UPSTREAM_API_KEY: 'load-upstream-key',
    MEMORY_STATIC_MODEL: model.folder,
    HF_HUB_ENDPOINT: 'http://127.0.0.1:9',
    REPAIR_SWEEP_EVERY_MS: '0',
    EXPIRE_EVERY_MS: '0',
    COMPACT_EVERY_MS: '0',
  };
  let api: ReturnType<typeof spawn> | null = null;
  try {
    // Seed before the api starts: 10k memories for each of two keys, embedded with the static model.
    const corpus = new Corpus(model);
    const seedCtx = buildApiContext(loadEnv(raw), silentLog());
    let chatKey: { id: string; key: string };
    const t0 = performance.now();
    try {
      const settings = useStaticSource(seedCtx);
      chatKey = seedCtx.apiKeys.create('load');
      const writer = new MemoryService(seedCtx.db.db, new MemoryReadCache(100, 60_000));
      const r = rng(7);
      seedMemories(writer, chatKey.id, PER_KEY, () => corpus.memory(r));
      seedMemories(writer, 'load-other', PER_KEY, () => corpus.memory(r));
      if (seedCtx.db.vecLoaded) {
        const probe = await seedCtx.embedding.embedOne('engram dimension probe', settings);
        const dim = probe.resolution.dimensions!;
        const signature = seedCtx.vectors.signatureFor(probe.resolution)!;
        seedCtx.vectors.rebuild(signature, dim);
        await embedPending(seedCtx.embedding, seedCtx.vectors, settings, signature, dim);
      } else console.log('NOTE: sqlite-vec is not available: hybrid measures the keyword fallback');
    } finally {
      await seedCtx.jobEvents.close();
      await seedCtx.queues.close();
      await seedCtx.embedding.close();
      seedCtx.db.close();
    }
    const seedS = (performance.now() - t0) / 1000;

    const port = await freePort();
    api = spawn(process.execPath, [cli, 'api'], { env: { ...raw, PORT: String(port) }, stdio: ['ignore', 'ignore', 'pipe'] });
    let apiErr = '';
    api.stderr!.on('data', (d: Buffer) => (apiErr = (apiErr + d.toString()).slice(-4000)));
    api.on('error', () => undefined);
    const base = `http://127.0.0.1:${port}`;
    const until = Date.now() + 30_000;
    for (;;) {
      if (api.exitCode !== null) throw new Error(`api exited: ${apiErr}`);
      if (Date.now() > until) throw new Error(`api not ready: ${apiErr}`);
      const ok = await fetch(`${base}/readyz`).then((r) => r.ok, () => false);
      if (ok) break;
      await sleep(200);
    }
    const mgmt = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const setMemory = async (body: Record<string, unknown>) => {
      // A 503 is retried: on a loaded machine a Redis command can pass the api's 500 ms timeout.
      let r = await fetch(`${base}/api/settings/memory`, { method: 'PUT', headers: mgmt, body: JSON.stringify(body) });
      for (let i = 0; i < 3 && r.status === 503; i++) {
        await sleep(1000);
        r = await fetch(`${base}/api/settings/memory`, { method: 'PUT', headers: mgmt, body: JSON.stringify(body) });
      }
      if (!r.ok) throw new Error(`settings: ${r.status} ${await r.text()}\n${apiErr}`);
      await sleep(2500); // the api's settings cache (SETTINGS_CACHE_TTL_MS, 2 s)
    };

    const queries = corpus.queries(QUERIES, 11);
    let n = 0;
    const chatBody = () => JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: `${queries[n++ % queries.length]}?` }] });
    const previewBody = (strategy: string) => () => JSON.stringify({ apiKeyId: chatKey.id, query: queries[n++ % queries.length], strategy });

    interface Case {
      label: string;
      url: string;
      headers: Record<string, string>;
      body: () => string;
      before?: () => Promise<void>;
    }
    const client = { authorization: `Bearer ${chatKey.key}`, 'content-type': 'application/json' };
    const cases: Case[] = [
      { label: 'upstream direct (baseline)', url: `${upstream.url}/v1/chat/completions`, headers: { authorization: 'Bearer load-upstream-key', 'content-type': 'application/json' }, body: chatBody },
      { label: 'proxy, memory off', url: `${base}/v1/chat/completions`, headers: client, body: chatBody, before: () => setMemory({ enabled: false }) },
      // Keyword: hybrid with no embedding source that can answer (remote, none configured), so only the FTS tier ranks.
      { label: 'proxy, memory on, keyword', url: `${base}/v1/chat/completions`, headers: client, body: chatBody, before: () => setMemory({ enabled: true, strategy: 'hybrid', maxTokens: 2000, embeddingSource: 'remote', staticEnabled: false }) },
      { label: 'proxy, memory on, hybrid', url: `${base}/v1/chat/completions`, headers: client, body: chatBody, before: () => setMemory({ enabled: true, strategy: 'hybrid', maxTokens: 2000, embeddingSource: 'static', staticEnabled: true }) },
      { label: 'retrieve-preview, keyword (exact)', url: `${base}/api/memory/retrieve-preview`, headers: mgmt, body: previewBody('exact') },
      { label: 'retrieve-preview, hybrid', url: `${base}/api/memory/retrieve-preview`, headers: mgmt, body: previewBody('hybrid') },
    ];

    const loadBefore = os.loadavg()[0];
    const rows: Record<string, string | number>[] = [];
    let baselineRps = NaN;
    for (const c of cases) {
      await c.before?.();
      // One request first: what the proxy says it did (x-memory-* headers), so the row's label is checked, not assumed.
      const probe = await fetch(c.url, { method: 'POST', headers: c.headers, body: c.body() });
      await probe.text();
      const memory = probe.headers.get('x-memory-strategy') ? `${probe.headers.get('x-memory-status')}/${probe.headers.get('x-memory-strategy')}, ${probe.headers.get('x-memory-injected')} injected` : '-';
      let peak = rssMb(api.pid);
      const sampler = setInterval(() => (peak = Math.max(peak, rssMb(api?.pid))), 250);
      const result = await autocannon({
        url: c.url,
        method: 'POST',
        connections,
        duration: seconds,
        headers: c.headers,
        requests: [{ method: 'POST', setupRequest: (req) => ({ ...req, body: c.body() }) }],
      });
      clearInterval(sampler);
      if (c.label.startsWith('upstream direct')) baselineRps = result.requests.average;
      rows.push({
        case: c.label,
        'req/s': Math.round(result.requests.average),
        'vs upstream direct': c.label.startsWith('upstream') ? '1.00' : (result.requests.average / baselineRps).toFixed(2),
        'p50 ms': result.latency.p50,
        'p99 ms': result.latency.p99,
        requests: result.requests.total,
        // autocannon counts a request that got no answer within its 10 s timeout as a timeout (and an error).
        'non-2xx': result.non2xx,
        timeouts: result.timeouts,
        'other errors': result.errors - result.timeouts,
        'memory (x-memory-*)': memory,
        'api RSS MB (peak)': c.label.startsWith('upstream') ? rssMb(api.pid) : peak,
      });
    }
    console.log(
      `Load: autocannon, ${connections} connections, ${seconds} s per case, against a spawned api (NODE_ENV=production, LOG_LEVEL=warn); fake upstream with a fixed ${UPSTREAM_DELAY_MS} ms delay in the bench process; ` +
        `${PER_KEY} memories for the chatting key + ${PER_KEY} for another key (seeded and embedded in ${seedS.toFixed(1)} s), model ${model.label}; ${os.cpus().length} CPUs, 1-min load average ${loadBefore.toFixed(1)} before and ${os.loadavg()[0].toFixed(1)} after (other work on the machine shares the CPUs)`,
    );
    console.table(rows);
    const failed = rows.filter((r) => Number(r['non-2xx']) + Number(r.timeouts) + Number(r['other errors']) > 0);
    if (failed.length) console.log(`ERRORS in: ${failed.map((r) => r.case).join(', ')}`);
  } finally {
    if (api && api.exitCode === null) {
      const exited = new Promise((r) => api!.once('exit', r));
      api.kill('SIGTERM');
      await Promise.race([exited, sleep(15_000)]);
      if (api.exitCode === null) api.kill('SIGKILL');
    }
    await upstream.close();
    await redis.remove();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
