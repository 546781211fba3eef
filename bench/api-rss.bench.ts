/**
 * The api's peak RSS under the memory-on chat load of `proxy-targets` (one key, 10k memories, hybrid, the wink
 * static model), for several variants of the api at once: builds (dist roots) and V8 flags, each its own process
 * over its own copy of one database, loaded in turn (A-B-…-B-A per round) so a machine that gets busier favours none.
 * Cheaper than proxy-targets (no direct baseline, no sequential pass, memory on only) so that a memory change can be
 * weighed over several rounds; proxy-targets stays the bench of record.
 *
 *   node dist/bench/run.js api-rss --variant=main=/work/wt/base/dist --variant=this=. --variant=semi8=.:--max-semi-space-size=8
 *   options: --rounds=<n> (3)  --duration=<s per load> (10)  --memories=<n per key> (10000)
 * A variant is label=dist root[:NODE_OPTIONS][|NAME=value…]; each api gets its build's `engram up` env (MALLOC_ARENA_MAX)
 * with the variant's NAME=value pairs over it.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { freePort, TestRedis } from '../test/helpers/redis-server';
import { benchStaticModel } from './build-wink-model';
import { BenchChild, benchApiEnv, buildDatabase, chatBody, launchEnv, spawnChild } from './proxy-targets.bench';
import { Corpus } from './retrieval.bench';

interface Variant {
  label: string;
  root: string;
  nodeOptions: string | null;
  /** Extra environment of this variant's api (e.g. glibc's MALLOC_* tunables). */
  env: Record<string, string>;
}

type Stats = Awaited<ReturnType<BenchChild['stats']>>;

const mb = (x: number) => (x / 1_048_576).toFixed(1);

/** Runs the rounds and prints per variant: peak RSS per round, CPU per chat, and the memory right after its last load. */
export async function runApiRssBench(args: string[] = process.argv.slice(2)): Promise<void> {
  const opt = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? null;
  const variants: Variant[] = args
    .filter((a) => a.startsWith('--variant='))
    .map((a) => {
      const spec = a.slice('--variant='.length);
      const eq = spec.indexOf('=');
      const [where, ...envs] = spec.slice(eq + 1).split('|');
      const colon = where!.indexOf(':');
      return {
        label: spec.slice(0, eq),
        root: path.resolve(colon < 0 ? where! : where!.slice(0, colon)),
        nodeOptions: colon < 0 || colon === where!.length - 1 ? null : where!.slice(colon + 1),
        env: Object.fromEntries(envs.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])),
      };
    });
  if (!variants.length) variants.push({ label: 'this build', root: path.resolve(__dirname, '..'), nodeOptions: null, env: {} });
  const rounds = Number(opt('rounds') ?? 3);
  const durationS = Number(opt('duration') ?? 10);
  const memories = Number(opt('memories') ?? 10_000);

  const model = benchStaticModel();
  const corpus = new Corpus(model);
  const queries = corpus.queries(1000, 11);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'engram-api-rss-'));
  const redis = await TestRedis.start();
  const children: BenchChild[] = [];
  const apis: BenchChild[] = [];
  try {
    const seedDir = path.join(tmp, 'seed');
    const seeded = await buildDatabase(seedDir, redis.url, model.folder, memories, corpus);
    const upstream = spawnChild('upstream', ['upstream', '20'], { PATH: process.env.PATH });
    children.push(upstream);
    const upPort = await upstream.ready;
    try {
      for (const [k, v] of variants.entries()) {
        const dataDir = path.join(tmp, `api-${k}`);
        fs.cpSync(seedDir, dataDir, { recursive: true });
        const port = await freePort();
        const env = launchEnv(v.root, {
          ...benchApiEnv({ dataDir, port, redisUrl: redis.url, upstreamPort: upPort, modelFolder: model.folder, queuePrefix: 'bench-rss' }),
          ...(v.nodeOptions ? { NODE_OPTIONS: v.nodeOptions } : {}),
          ...v.env,
        });
        const api = spawnChild(v.label, ['api', v.root], env);
        children.push(api);
        apis.push(api);
        await api.ready;
        await api.call({ cmd: 'memory', enabled: true }, 'memory');
      }
      const ports = await Promise.all(apis.map((a) => a.ready));
      let i = 0;
      const loadOne = async (k: number) => {
        const a = apis[k]!;
        const before = await a.stats(true);
        const r = await autocannon({
          url: `http://127.0.0.1:${ports[k]}/v1/chat/completions`,
          connections: 32,
          duration: durationS,
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${seeded.secret}` },
          requests: [
            {
              setupRequest: (req) => ({
                ...req,
                body: chatBody(queries, i++),
              }),
            },
          ],
        });
        const after = await a.stats(false, true);
        const cpuMs = (after.cpu.user - before.cpu.user + after.cpu.system - before.cpu.system) / 1000;
        return { peak: after.peakRss, chats: r['2xx'], bad: r.non2xx + r.errors + r.timeouts, cpuMs, after };
      };
      const rows = variants.map(() => ({ peaks: [] as number[], chats: 0, bad: 0, cpuMs: 0, last: null as Stats | null }));
      for (let round = 0; round < rounds; round++) {
        const order = [...apis.keys()];
        for (const k of [...order, ...[...order].reverse()]) {
          const r = await loadOne(k);
          const row = rows[k]!;
          row.peaks.push(r.peak);
          row.chats += r.chats;
          row.bad += r.bad;
          row.cpuMs += r.cpuMs;
          row.last = r.after;
        }
      }
      console.table(
        variants.map((v, k) => {
          const row = rows[k]!;
          const m = row.last!.memory!;
          const sp = row.last!.spaces ?? {};
          return {
            variant: v.label,
            'peak RSS MB per load': row.peaks.map(mb).join(' / '),
            'max / median MB': `${mb(Math.max(...row.peaks))} / ${mb([...row.peaks].sort((x, y) => x - y)[row.peaks.length >> 1]!)}`,
            'CPU ms/chat': (row.cpuMs / Math.max(1, row.chats)).toFixed(2),
            'chats/s': Math.round(row.chats / (durationS * row.peaks.length)),
            'non-2xx+errors': row.bad,
            'last: rss / heap total / new / old / used / external / ab / rest MB': [m.rss, m.heapTotal, sp.new_space ?? 0, sp.old_space ?? 0, m.heapUsed, m.external, m.arrayBuffers, m.rss - m.heapTotal - m.external].map(mb).join(' / '),
          };
        }),
      );
      // The live memory after two full collections, per variant.
      for (const a of apis) {
        const h = (await a.call({ cmd: 'heap' }, 'heap')) as { memory: NodeJS.MemoryUsage; maps: { kinds: Record<string, number> } };
        const m = h.memory;
        console.log(`${a.label}: after two full GCs rss ${mb(m.rss)} heap used ${mb(m.heapUsed)} total ${mb(m.heapTotal)} external ${mb(m.external)} rest ${mb(m.rss - m.heapTotal - m.external)}; resident by mapping ${Object.entries(h.maps.kinds).map(([k, v]) => `${k} ${mb(v)}`).join(', ')}`);
      }
    } finally {
      for (const c of children) c.kill();
    }
  } finally {
    await redis.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
