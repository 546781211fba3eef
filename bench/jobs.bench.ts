import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import type { Env } from '../src/config/env';
import { openStorage } from '../src/services';
import { EmbeddingService } from '../src/embedding/embedding.service';
import { QUEUE_NAMES } from '../src/config/queue-names';
import { QueueLayer } from '../src/queue/queues';
import { SqliteVecStore } from '../src/vector/sqlite-vec.store';
import { silentLog, testEnv, testPrefix } from '../test/helpers/env';
import { benchStaticModel } from './build-wink-model';
import { Corpus, rng, seedMemories } from './retrieval.bench';
import { spawnBenchWorker, stopBenchWorker, untilWorker, type BenchWorker } from './worker-process';

const TRIVIAL_JOBS = 5_000;
const CONCURRENCIES = [1, 8];
const SWEEP_ROWS = 100_000;
const ENQUEUE_CHUNK = 1_000;
const POLL_MS = 10;
/** Every wait in this bench gives up after this long, so a stuck worker never hangs the run. */
const WAIT_LIMIT_MS = 180_000;
/** The built cli beside this file's folder (dist/src/cli.js next to dist/bench/). */
const CLI = path.resolve(__dirname, '..', 'src', 'cli.js');

type Row = Record<string, string | number>;

function benchEnv(label: string, extra: Record<string, string> = {}): Env {
  return testEnv({ QUEUE_PREFIX: testPrefix(label), REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0', ...extra });
}

async function ready(queues: QueueLayer): Promise<void> {
  if (queues.isReady()) return;
  await Promise.race([
    once(queues.connection, 'ready'),
    new Promise((_, reject) => setTimeout(() => reject(new Error('redis on 127.0.0.1:6379 did not become ready within 5 s')), 5000).unref()),
  ]);
}

type Worker = BenchWorker;

/** Spawns one built worker process serving only the maintenance queue, with the bench's prefix and data dir. */
function spawnWorker(env: Env, concurrency: number | null): Worker {
  return spawnBenchWorker(CLI, {
    DATA_DIR: env.DATA_DIR,
    QUEUE_PREFIX: env.QUEUE_PREFIX,
    REDIS_URL: env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    WORKER_QUEUES: 'maintenance',
    WORKER_CONCURRENCY: concurrency === null ? '' : `maintenance=${concurrency}`,
    REPAIR_SWEEP_EVERY_MS: '0',
    EXPIRE_EVERY_MS: '0',
    MEMORY_STATIC_MODEL: env.MEMORY_STATIC_MODEL,
  });
}

const stopWorker = stopBenchWorker;
const until = <T>(what: string, w: Worker, probe: () => Promise<T | null>): Promise<T> => untilWorker(what, w, probe, POLL_MS, WAIT_LIMIT_MS);

/** Removes every key of the bench's prefix: its queues (obliterate) and the worker metrics hash. */
async function cleanRedis(queues: QueueLayer): Promise<void> {
  for (const q of QUEUE_NAMES) await queues.queue(q).obliterate({ force: true });
  // Scoped to this run's unique prefix: anything BullMQ left outside the queues (metrics, schedulers).
  let cursor = '0';
  do {
    const [next, keys] = await queues.connection.scan(cursor, 'MATCH', `${queues.prefix}:*`, 'COUNT', 1000);
    if (keys.length) await queues.connection.del(...keys);
    cursor = next;
  } while (cursor !== '0');
}

/** Enqueues N record-access jobs in bulk, then starts one worker and times the drain. */
async function trivialDrain(concurrency: number | null): Promise<Row> {
  const env = benchEnv('bench-jobs-a');
  const log = silentLog();
  const storage = openStorage(env, log);
  const queues = new QueueLayer(env, log, storage.db.db, 'api');
  let worker: Worker | null = null;
  try {
    await ready(queues);
    const { memory } = storage.memory.create({ apiKeyId: 'bench', type: 'factual', content: 'a memory whose access count the bench bumps' }, { source: 'api' });
    const t0 = performance.now();
    for (let i = 0; i < TRIVIAL_JOBS; i += ENQUEUE_CHUNK) {
      await queues.enqueueMany(
        'record-access',
        Array.from({ length: Math.min(ENQUEUE_CHUNK, TRIVIAL_JOBS - i) }, () => ({ memoryIds: [memory.id] })),
      );
    }
    const enqueueMs = performance.now() - t0;
    const q = queues.queue('maintenance');
    const counts = async () => {
      const c = await q.getJobCounts('wait', 'prioritized', 'active', 'delayed', 'failed');
      return { pending: (c.wait ?? 0) + (c.prioritized ?? 0), active: c.active ?? 0, delayed: c.delayed ?? 0, failed: c.failed ?? 0 };
    };
    const queued = (await counts()).pending;

    worker = spawnWorker(env, concurrency);
    const w = worker;
    const firstAt = await until('the first job to start', w, async () => {
      const c = await counts();
      return c.pending < queued ? performance.now() : null;
    });
    const endAt = await until('the queue to drain', w, async () => {
      const c = await counts();
      return c.pending + c.active + c.delayed === 0 ? performance.now() : null;
    });
    const failed = (await counts()).failed;
    const accessCount = (storage.db.db.prepare('SELECT access_count AS n FROM memories WHERE id = ?').get(memory.id) as { n: number }).n;
    const drainS = (endAt - firstAt) / 1000;
    return {
      job: 'record-access (1 id)',
      'worker concurrency': concurrency === null ? '1 (default)' : concurrency,
      jobs: queued,
      'bulk enqueue jobs/s (api side)': Math.round(TRIVIAL_JOBS / (enqueueMs / 1000)),
      'worker boot → first job ms': Math.round(firstAt - w.startedAt),
      'drain s': Number(drainS.toFixed(2)),
      'jobs/s': Math.round(queued / drainS),
      failed,
      'access_count after': accessCount,
    };
  } finally {
    if (worker) await stopWorker(worker);
    await cleanRedis(queues).catch(() => undefined);
    await queues.close();
    storage.db.close();
    fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
  }
}

/** Seeds flagged rows with a built index for the static model, then times one repair-sweep in one worker. */
async function sweepFlagged(): Promise<Row> {
  const model = benchStaticModel();
  const env = benchEnv('bench-jobs-b', { MEMORY_STATIC_MODEL: model.folder });
  const log = silentLog();
  const storage = openStorage(env, log);
  const queues = new QueueLayer(env, log, storage.db.db, 'api');
  const embedding = new EmbeddingService(env);
  let worker: Worker | null = null;
  try {
    await ready(queues);
    if (!storage.db.vecLoaded) throw new Error('sqlite-vec is not available: the sweep would skip every row');
    const settings = storage.settings.updateMemory({ embeddingSource: 'static', staticEnabled: true });
    const corpus = new Corpus(model);
    const r = rng(99);
    let t0 = performance.now();
    seedMemories(storage.memory, 'bench-sweep', SWEEP_ROWS, () => corpus.memory(r));
    const seedS = (performance.now() - t0) / 1000;
    // The sweep only queues embeds when an index exists for the model's signature (else it asks for a reindex).
    const probe = await embedding.embedOne('engram dimension probe', settings);
    const vectors = new SqliteVecStore(storage.db.db, { vecLoaded: true, quantization: env.MEMORY_VEC_QUANTIZATION });
    vectors.rebuild(vectors.signatureFor(probe.resolution)!, probe.resolution.dimensions!);
    const flagged = vectors.countPending();

    const { jobId } = await queues.enqueue('repair-sweep', { reason: 'manual' });
    worker = spawnWorker(env, null);
    const job = await until('the repair-sweep to finish', worker, async () => {
      const j = await queues.queue('maintenance').getJob(jobId);
      if (!j) return null;
      const state = await j.getState();
      if (state === 'failed') throw new Error(`repair-sweep failed: ${j.failedReason}`);
      // Re-read once completed: the object fetched above may predate the result.
      return state === 'completed' ? ((await queues.queue('maintenance').getJob(jobId)) ?? null) : null;
    });
    const sweepMs = (job.finishedOn ?? 0) - (job.processedOn ?? 0);
    const result = job.returnvalue as { embedQueued?: number; skipped?: string; reindexJobId?: string };
    const c = await queues.queue('embedding').getJobCounts('wait', 'prioritized', 'delayed');
    t0 = performance.now();
    await stopWorker(worker);
    worker = null;
    await cleanRedis(queues);
    const cleanS = (performance.now() - t0) / 1000;
    return {
      job: 'repair-sweep (manual)',
      'flagged rows': flagged,
      'seed s': Number(seedS.toFixed(1)),
      'sweep ms (processedOn → finishedOn)': sweepMs,
      'rows/s enqueued': Math.round((result.embedQueued ?? 0) / (sweepMs / 1000)),
      'embedQueued (job result)': result.embedQueued ?? `none (${result.skipped ?? `reindex ${result.reindexJobId}`})`,
      'embed-memory jobs in embedding queue': (c.wait ?? 0) + (c.prioritized ?? 0) + (c.delayed ?? 0),
      'stop worker + obliterate s': Number(cleanS.toFixed(1)),
    };
  } finally {
    if (worker) await stopWorker(worker);
    await cleanRedis(queues).catch(() => undefined);
    await queues.close();
    await embedding.close();
    storage.db.close();
    fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
  }
}

const shown = (p: string) => (path.relative(process.cwd(), p).startsWith('..') ? p : path.relative(process.cwd(), p));

/** Prints how many jobs per second one worker process drains (trivial jobs, concurrency 1 and 8) and how fast one repair-sweep queues 100k flagged rows; never asserts. */
export async function runJobsBench(): Promise<void> {
  if (!fs.existsSync(CLI)) {
    console.log(`built cli not found at ${CLI}: run npm run build first; skipping`);
    return;
  }
  const drains: Row[] = [];
  for (const c of CONCURRENCIES) drains.push(await trivialDrain(c === 1 ? null : c));
  console.log(`Jobs bench (a): ${TRIVIAL_JOBS} record-access jobs enqueued in bulk (api QueueLayer.enqueueMany), then ONE worker process (node ${shown(CLI)} worker, WORKER_QUEUES=maintenance); drain = first job taken → queue empty (polled every ${POLL_MS} ms)`);
  console.table(drains);
  const sweep = await sweepFlagged();
  console.log(`Jobs bench (b): one repair-sweep over ${SWEEP_ROWS} memories flagged needs_reindex=1, index built for the static model, no embedding worker running; Redis keys of the run removed afterwards`);
  console.table([sweep]);
}

if (require.main === module) {
  runJobsBench().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
