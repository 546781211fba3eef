import crypto from 'node:crypto';
/**
 * Issue 14's job-side targets, measured through real worker processes (`node <dist>/src/cli.js worker`)
 * on a redis-server of the bench's own (never 6379):
 * - reindex of 100k memories with the static model: `reindex {force}` enqueued → job completed with
 *   every row in vec0 and no row flagged; baseline: the model's own embed and a bare vec0 INSERT +
 *   flag UPDATE loop in this process, 512 rows per transaction, no queue (the machine's floor);
 * - chat → fact injectable: `extract-facts` enqueued (what the proxy does after answering) → the fact's
 *   row has its vector in vec0 (a semantic query finds it); baseline: the bare embed of one fact;
 * - the worker's peak RSS (VmHWM) during the 100k reindex; baseline: its RSS once booted and idle.
 * `--before=<dist>` measures another build's worker (e.g. main's) in the same run, on copies of the
 * same seeded database. Figures are printed and written to bench/results/job-targets.json, never asserted.
 */
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Env } from '../src/config/env';
import type { QueueName } from '../src/config/queue-names';
import { openStorage } from '../src/services';
import { EmbeddingService } from '../src/embedding/embedding.service';
import { StaticModel } from '../src/embedding/static';
import type { EmbeddingSettings } from '../src/embedding/resolve';
import { QueueLayer } from '../src/queue/queues';
import { SqliteVecStore } from '../src/vector/sqlite-vec.store';
import { silentLog, testEnv } from '../test/helpers/env';
import { TestRedis } from '../test/helpers/redis-server';
import { benchStaticModel, type BenchModel } from './build-wink-model';
import { Corpus, embedPending, rng, seedMemories } from './retrieval.bench';
import { reportTargets, type TargetRow } from './target-table';
import { spawnBenchWorker, stopBenchWorker, untilWorker, type BenchWorker } from './worker-process';

/** Bumped when the seeded data changes, so a cached template is rebuilt. */
const SEED_FORMAT = 'v1';
const REINDEX_ROWS = 100_000;
const CHAT_BACKGROUND_ROWS = 1_000;
const CHATS = 60;
const CHAT_WARMUP = 5;
const POLL_MS = 2;
/** Every wait gives up after this long, so a stuck worker never hangs the run. */
const WAIT_LIMIT_MS = 300_000;
/** After the worker's queues are served: time for anything it loads in the background at boot. */
const SETTLE_MS = 2_000;
const THIS_DIST = path.resolve(__dirname, '..');

/** Words the static model knows, combined into facts that are new every time ("I like X and Y."). */
const FACT_WORDS = (
  'apples bananas cherries grapes lemons mangoes melons oranges peaches pears plums tomatoes carrots onions potatoes ' +
  'rice bread cheese butter coffee tea chocolate honey pasta pizza soup salad fish chicken beef pork cake cookies ' +
  'hiking swimming cycling running skiing surfing climbing dancing singing painting reading writing cooking baking ' +
  'gardening fishing camping sailing rowing boxing chess poker football baseball basketball tennis golf hockey ' +
  'jazz blues opera rock piano guitar violin drums trumpet movies novels poetry history physics chemistry biology ' +
  'mathematics geography astronomy philosophy economics politics architecture sculpture photography mountains ' +
  'beaches forests deserts rivers lakes islands castles museums gardens libraries trains boats planes bicycles'
).split(' ');

type WorkerProc = BenchWorker;

interface BuildFigures {
  label: string;
  reindexS: number;
  /** The worker's CPU seconds over the reindex: less sensitive than wall time to other load on the machine. */
  reindexCpuS: number;
  reindexDone: { vectors: number; pending: number; result: unknown };
  bootToReadyMs: number;
  idleRssMb: number;
  peakRssMb: number;
  chatP50: number;
  chatP90: number;
  chatP99: number;
  chatMax: number;
  chatFound: number;
  chatRetrievable: number;
}

function arg(args: string[], name: string): string | undefined {
  const hit = args.find((a) => a.startsWith(`--${name}=`));
  return hit?.slice(name.length + 3);
}

/** A label as it may appear in queue prefixes and request ids. */
const slug = (s: string) => s.replace(/[^A-Za-z0-9_.-]/g, '_');

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
}

/** A /proc/<pid>/status field in MB (VmRSS now, VmHWM the peak so far); NaN when unreadable. */
function procMb(pid: number | undefined, field: 'VmRSS' | 'VmHWM'): number {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 102.4) / 10 : NaN;
  } catch {
    return NaN;
  }
}

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat (clock ticks of 10 ms); NaN when unreadable. */
function procCpuS(pid: number | undefined): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return NaN;
  }
}

function spawnWorker(cli: string, env: Env, queues: QueueName[]): WorkerProc {
  return spawnBenchWorker(cli, {
    DATA_DIR: env.DATA_DIR,
    QUEUE_PREFIX: env.QUEUE_PREFIX,
    REDIS_URL: env.REDIS_URL,
    WORKER_QUEUES: queues.join(','),
    REPAIR_SWEEP_EVERY_MS: '0',
    EXPIRE_EVERY_MS: '0',
    COMPACT_EVERY_MS: '0',
    MEMORY_STATIC_MODEL: env.MEMORY_STATIC_MODEL,
  });
}

const stopWorker = stopBenchWorker;
const until = <T>(what: string, w: WorkerProc, probe: () => Promise<T | null> | T | null, pollMs = POLL_MS): Promise<T> => untilWorker(what, w, probe, pollMs, WAIT_LIMIT_MS);

/** Waits until every served queue has a worker connection, then lets the worker settle; returns boot → ready ms. */
async function waitServing(w: WorkerProc, queues: QueueLayer, served: QueueName[]): Promise<number> {
  await until(
    'the worker to serve its queues',
    w,
    async () => {
      for (const q of served) if ((await queues.queue(q).getWorkersCount()) === 0) return null;
      return true;
    },
    20,
  );
  const readyMs = performance.now() - w.startedAt;
  await new Promise((r) => setTimeout(r, SETTLE_MS));
  return readyMs;
}

/** A data dir with `rows` flagged memories, the static source selected and an empty index built for its signature (so no drift reindex starts at boot). */
async function seedTemplate(model: BenchModel, redisUrl: string, rows: number, embedAll: boolean): Promise<string> {
  // Cached across runs (never committed): seeding 100k rows takes ~15 s.
  // Keyed by the model folder too: the stored index signature names it, so another checkout's copy would not match.
  const folderTag = crypto.createHash('sha256').update(model.folder).digest('hex').slice(0, 8);
  const cached = path.join(os.tmpdir(), `engram-job-targets-${SEED_FORMAT}-${model.fixture ? 'fixture' : 'wink'}-${folderTag}-${rows}-${embedAll ? 'embedded' : 'flagged'}`);
  if (fs.existsSync(path.join(cached, 'complete'))) return cached;
  const dir = await seedFresh(model, redisUrl, rows, embedAll);
  fs.rmSync(cached, { recursive: true, force: true });
  fs.cpSync(dir, cached, { recursive: true });
  fs.rmSync(dir, { recursive: true, force: true });
  fs.writeFileSync(path.join(cached, 'complete'), new Date().toISOString());
  return cached;
}

async function seedFresh(model: BenchModel, redisUrl: string, rows: number, embedAll: boolean): Promise<string> {
  const env = testEnv({ MEMORY_STATIC_MODEL: model.folder, REDIS_URL: redisUrl });
  const storage = openStorage(env, silentLog());
  const embedding = new EmbeddingService(env);
  try {
    if (!storage.db.vecLoaded) throw new Error('sqlite-vec is not available');
    const settings = storage.settings.updateMemory({ embeddingSource: 'static', staticEnabled: true });
    const corpus = new Corpus(model);
    const r = rng(14);
    seedMemories(storage.memory, 'bench-reindex', rows, () => corpus.memory(r));
    const probe = await embedding.embedOne('engram dimension probe', settings);
    const vectors = new SqliteVecStore(storage.db.db, { vecLoaded: true, quantization: env.MEMORY_VEC_QUANTIZATION });
    const signature = vectors.signatureFor(probe.resolution)!;
    vectors.rebuild(signature, probe.resolution.dimensions!);
    if (embedAll) await embedPending(embedding, vectors, settings, signature, probe.resolution.dimensions!);
    return env.DATA_DIR;
  } finally {
    await embedding.close();
    storage.db.close();
  }
}

function copyDataDir(template: string, redisUrl: string, model: BenchModel, label: string): Env {
  const env = testEnv({ MEMORY_STATIC_MODEL: model.folder, REDIS_URL: redisUrl, QUEUE_PREFIX: `bench-jt-${slug(label)}-${process.pid}` });
  fs.cpSync(template, env.DATA_DIR, { recursive: true });
  return env;
}

/** The floor: the model's own embed and bare SQL (vec0 INSERT, flag UPDATE), 512 rows per transaction, in this process: no queue, no service layer, model already loaded. */
async function reindexFloor(template: string, redisUrl: string, model: BenchModel): Promise<{ s: number; cpuS: number }> {
  const env = copyDataDir(template, redisUrl, model, 'floor');
  const storage = openStorage(env, silentLog());
  try {
    const m = StaticModel.fromFolder(model.folder);
    const db = storage.db.db;
    const read = db.prepare('SELECT memory_id AS rowId, api_key_id AS apiKeyId, content FROM memories WHERE needs_reindex = 1 AND memory_id > ? ORDER BY memory_id LIMIT ?');
    const insert = db.prepare('INSERT INTO vec_memories (memory_id, api_key_id, embedding) VALUES (?, ?, ?)');
    const clear = db.prepare('UPDATE memories SET needs_reindex = 0 WHERE memory_id = ?');
    const write = db.transaction((rows: { rowId: number; apiKeyId: string }[], vectors: Float32Array[]) => {
      rows.forEach((r, i) => {
        insert.run(BigInt(r.rowId), r.apiKeyId, Buffer.from(vectors[i]!.buffer));
        clear.run(r.rowId);
      });
    });
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    let cursor = 0;
    for (;;) {
      const rows = read.all(cursor, 512) as { rowId: number; apiKeyId: string; content: string }[];
      if (rows.length === 0) break;
      cursor = rows[rows.length - 1]!.rowId;
      write(rows, rows.map((r) => m.embed(r.content)));
    }
    const s = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const left = (db.prepare('SELECT count(*) AS n FROM memories WHERE needs_reindex = 1').get() as { n: number }).n;
    const stored = (db.prepare('SELECT count(*) AS n FROM vec_memories').get() as { n: number }).n;
    if (left !== 0 || stored !== REINDEX_ROWS) throw new Error(`floor loop stored ${stored} rows, ${left} still flagged`);
    return { s, cpuS: (cpu.user + cpu.system) / 1e6 };
  } finally {
    storage.db.close();
    fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
  }
}

async function measureReindex(cli: string, template: string, redisUrl: string, model: BenchModel, label: string) {
  const env = copyDataDir(template, redisUrl, model, `${label}-reindex`);
  const storage = openStorage(env, silentLog());
  // The worker role's connection waits instead of failing a command after 500 ms on a loaded machine.
  const queues = new QueueLayer(env, silentLog(), storage.db.db, 'worker');
  const w = spawnWorker(cli, env, ['reindex']);
  try {
    const bootToReadyMs = await waitServing(w, queues, ['reindex']);
    const idleRssMb = procMb(w.child.pid, 'VmRSS');
    const cpu0 = procCpuS(w.child.pid);
    const t0 = performance.now();
    const { jobId } = await queues.enqueue('reindex', { force: true, trigger: 'api' });
    const job = await until(
      'the reindex to complete',
      w,
      async () => {
        const j = await queues.queue('reindex').getJob(jobId);
        const state = j ? await j.getState() : null;
        if (state === 'failed') throw new Error(`reindex failed: ${j?.failedReason}`);
        return state === 'completed' ? j : null;
      },
      20,
    );
    const reindexS = (performance.now() - t0) / 1000;
    const reindexCpuS = procCpuS(w.child.pid) - cpu0;
    const peakRssMb = procMb(w.child.pid, 'VmHWM');
    const vectors = new SqliteVecStore(storage.db.db, { vecLoaded: true, quantization: env.MEMORY_VEC_QUANTIZATION });
    const done = { vectors: await vectors.count(), pending: vectors.countPending(), result: (await queues.queue('reindex').getJob(jobId!))?.returnvalue ?? job?.returnvalue };
    if (done.vectors !== REINDEX_ROWS || done.pending !== 0) throw new Error(`${label}: reindex left ${done.vectors} vectors, ${done.pending} flagged`);
    return { reindexS, reindexCpuS, bootToReadyMs, idleRssMb, peakRssMb, reindexDone: done };
  } finally {
    await stopWorker(w);
    await queues.close();
    storage.db.close();
    fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
  }
}

function factTexts(n: number, seed: number): { text: string; key: string; content: string }[] {
  const r = rng(seed);
  const seen = new Set<string>();
  const out: { text: string; key: string; content: string }[] = [];
  while (out.length < n) {
    const a = FACT_WORDS[Math.floor(r() * FACT_WORDS.length)];
    const b = FACT_WORDS[Math.floor(r() * FACT_WORDS.length)];
    if (a === b || seen.has(`${a}_${b}`)) continue;
    seen.add(`${a}_${b}`);
    out.push({ text: `I like ${a} and ${b}.`, key: `preference:${a}_and_${b}`, content: `likes ${a} and ${b}` });
  }
  return out;
}

async function measureChats(cli: string, template: string, redisUrl: string, model: BenchModel, label: string) {
  const env = copyDataDir(template, redisUrl, model, `${label}-chat`);
  const storage = openStorage(env, silentLog());
  // The worker role's connection waits instead of failing a command after 500 ms on a loaded machine.
  const queues = new QueueLayer(env, silentLog(), storage.db.db, 'worker');
  const embedding = new EmbeddingService(env);
  const w = spawnWorker(cli, env, ['extraction', 'embedding']);
  try {
    await waitServing(w, queues, ['extraction', 'embedding']);
    const apiKeyId = 'bench-chat';
    const found = storage.db.db.prepare(
      `SELECT m.id AS id FROM memories m WHERE m.api_key_id = ? AND m.key = ? AND m.needs_reindex = 0
         AND EXISTS (SELECT 1 FROM vec_memories v WHERE v.memory_id = m.memory_id)`,
    );
    const vectors = new SqliteVecStore(storage.db.db, { vecLoaded: true, quantization: env.MEMORY_VEC_QUANTIZATION });
    const settings = storage.settings.memoryFresh();
    const facts = factTexts(CHAT_WARMUP + CHATS, label === 'floor' ? 1 : 7);
    const times: number[] = [];
    let retrievable = 0;
    for (const [i, f] of facts.entries()) {
      const t0 = performance.now();
      await queues.enqueue('extract-facts', { apiKeyId, sessionId: null, userText: f.text, requestId: `bench-${slug(label)}-${i}-${process.pid}` });
      const id = await until(`fact ${i} to be injectable`, w, () => (found.get(apiKeyId, f.key) as { id: string } | undefined)?.id ?? null);
      const ms = performance.now() - t0;
      if (i < CHAT_WARMUP) continue;
      times.push(ms);
      const q = await embedding.embedOne(f.content, settings);
      const hits = vectors.knn(apiKeyId, q.vector!, 5, { nowIso: new Date().toISOString() });
      if (hits.some((h) => h.id === id)) retrievable++;
    }
    return {
      chatP50: quantile(times, 0.5),
      chatP90: quantile(times, 0.9),
      chatP99: quantile(times, 0.99),
      chatMax: Math.max(...times),
      chatFound: times.length,
      chatRetrievable: retrievable,
    };
  } finally {
    await stopWorker(w);
    await queues.close();
    await embedding.close();
    storage.db.close();
    fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
  }
}

/** The bare embed of one fact sentence (uncached, model loaded): the floor under chat → fact. */
async function embedFloor(model: BenchModel, redisUrl: string): Promise<{ p50: number; p99: number }> {
  const env = testEnv({ MEMORY_STATIC_MODEL: model.folder, REDIS_URL: redisUrl });
  const embedding = new EmbeddingService(env);
  try {
    const settings: EmbeddingSettings = { embeddingSource: 'static', staticEnabled: true, transformersEnabled: false, embeddingProviderModel: null, customBaseUrl: null, customModelId: null };
    await embedding.embedOne('engram dimension probe', settings);
    const times: number[] = [];
    for (const f of factTexts(CHATS, 3)) {
      const t0 = performance.now();
      await embedding.embedOne(f.content, settings);
      times.push(performance.now() - t0);
    }
    return { p50: quantile(times, 0.5), p99: quantile(times, 0.99) };
  } finally {
    await embedding.close();
    fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
  }
}

async function measureBuild(label: string, dist: string, templates: { reindex: string; chat: string }, redisUrl: string, model: BenchModel): Promise<BuildFigures> {
  const cli = path.join(dist, 'src', 'cli.js');
  if (!fs.existsSync(cli)) throw new Error(`${label}: built cli not found at ${cli} (run tsc for that tree first)`);
  const reindex = await measureReindex(cli, templates.reindex, redisUrl, model, label);
  console.log(`${label}: reindex ${reindex.reindexS.toFixed(2)} s (worker CPU ${reindex.reindexCpuS.toFixed(2)} s), peak RSS ${reindex.peakRssMb} MB`);
  const chats = await measureChats(cli, templates.chat, redisUrl, model, label);
  console.log(`${label}: chat → fact p50 ${chats.chatP50.toFixed(1)} ms, p99 ${chats.chatP99.toFixed(1)} ms`);
  return { label, ...reindex, ...chats };
}

const ms = (x: number) => `${x.toFixed(1)} ms`;

function targetRows(f: BuildFigures, floor: { s: number; cpuS: number }, embed: { p50: number; p99: number }): TargetRow[] {
  return [
    {
      figure: `reindex of ${REINDEX_ROWS / 1000}k memories, static model, enqueue → all in vec0 (${f.label})`,
      measured: `${f.reindexS.toFixed(2)} s (worker CPU ${f.reindexCpuS.toFixed(2)} s)`,
      baseline: `bare model embed + vec0 INSERT loop, no queue ${floor.s.toFixed(2)} s (CPU ${floor.cpuS.toFixed(2)} s)`,
      target: '≤ 15 s',
      pass: f.reindexS <= 15,
    },
    {
      figure: `chat → fact injectable (extract-facts enqueued → vector in vec0), p50 / p99 (${f.label})`,
      measured: `${ms(f.chatP50)} / ${ms(f.chatP99)}`,
      baseline: `bare embed of one fact p50 ${embed.p50.toFixed(2)} ms`,
      target: '≤ 200 ms (p50)',
      pass: f.chatP50 <= 200,
    },
    {
      figure: `worker peak RSS (VmHWM) during the ${REINDEX_ROWS / 1000}k reindex (${f.label})`,
      measured: `${f.peakRssMb} MB`,
      baseline: `same worker booted and idle ${f.idleRssMb} MB`,
      target: '≤ 400 MB',
      pass: f.peakRssMb <= 400,
    },
  ];
}

/** Measures the job-side targets of issue 14 for this build (and `--before=<dist>`'s); returns this build's rows. */
export async function measureJobTargets(args: string[] = []): Promise<TargetRow[]> {
  const before = arg(args, 'before');
  const model = benchStaticModel();
  const redis = await TestRedis.start({ persist: false });
  try {
    let t0 = performance.now();
    const reindexTemplate = await seedTemplate(model, redis.url, REINDEX_ROWS, false);
    const chatTemplate = await seedTemplate(model, redis.url, CHAT_BACKGROUND_ROWS, true);
    console.log(`seeded (or reused from the temp dir) ${REINDEX_ROWS} flagged memories (+ ${CHAT_BACKGROUND_ROWS} embedded for the chat runs) in ${((performance.now() - t0) / 1000).toFixed(1)} s; model: ${model.label}`);
    t0 = performance.now();
    const floor = await reindexFloor(reindexTemplate, redis.url, model);
    const embed = await embedFloor(model, redis.url);
    console.log(`floor: bare embed + INSERT loop ${floor.s.toFixed(2)} s (${floor.cpuS.toFixed(2)} CPU s); bare embed of one fact p50 ${embed.p50.toFixed(2)} ms`);
    const templates = { reindex: reindexTemplate, chat: chatTemplate };
    const builds: BuildFigures[] = [];
    if (before) builds.push(await measureBuild('before', path.resolve(before), templates, redis.url, model));
    const after = await measureBuild('this build', THIS_DIST, templates, redis.url, model);
    builds.push(after);
    console.log(`Per build (worker spawned from <dist>/src/cli.js; chats sequential, ${CHATS} measured after ${CHAT_WARMUP} warm-up, polled every ${POLL_MS} ms; ${CHAT_BACKGROUND_ROWS} other memories embedded)`);
    console.table(
      builds.map((b) => ({
        build: b.label,
        'reindex s': Number(b.reindexS.toFixed(2)),
        'reindex worker CPU s': Number(b.reindexCpuS.toFixed(2)),
        'floor s (same run)': Number(floor.s.toFixed(2)),
        'floor CPU s': Number(floor.cpuS.toFixed(2)),
        'chat→fact p50 ms': Number(b.chatP50.toFixed(1)),
        'p90 ms': Number(b.chatP90.toFixed(1)),
        'p99 ms': Number(b.chatP99.toFixed(1)),
        'max ms': Number(b.chatMax.toFixed(1)),
        'bare embed p50 ms': Number(embed.p50.toFixed(2)),
        'retrievable (knn top 5)': `${b.chatRetrievable}/${b.chatFound}`,
        'boot → serving ms': Math.round(b.bootToReadyMs),
        'idle RSS MB': b.idleRssMb,
        'peak RSS MB': b.peakRssMb,
      })),
    );
    const rows = targetRows(after, floor, embed);
    reportTargets('job-targets', rows, {
      builds,
      floor: { reindexS: floor.s, reindexCpuS: floor.cpuS, embedOneP50Ms: embed.p50, embedOneP99Ms: embed.p99 },
      before: before ? targetRows(builds[0], floor, embed) : undefined,
    });
    return rows;
  } finally {
    await redis.remove();
  }
}

/** `npm run bench -- job-targets [--before=<dist>]`. */
export async function runJobTargetsBench(args: string[] = process.argv.slice(2)): Promise<void> {
  await measureJobTargets(args);
}

if (require.main === module) {
  runJobTargetsBench().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
