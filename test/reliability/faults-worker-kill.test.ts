import path from 'node:path';
import Database from 'better-sqlite3';
import { Queue } from 'bullmq';
import { redisUrl, type Env } from '../../src/config/env';
import { QUEUE_NAMES, type QueueName } from '../../src/config/queue-names';
import { recordId } from '../../src/memory/import-records';
import { JOBS, type JobName } from '../../src/queue/jobs';
import { tempDir, testEnv } from '../helpers/env';
import { startFakeQdrant, type FakeQdrant } from '../helpers/fake-qdrant';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream';
import { topicModelSpec, writeModel2VecFolder } from '../helpers/model-fixtures';
import { mulberry32 } from '../helpers/prng';
import { waitUntil } from '../helpers/wait';
import { canonicalDump, dumpDiff, type CanonicalDump } from './canonical-dump';
import { leftInQueues, startStack, type Stack } from './stack';

/**
 * Issue 15 §3, worker crashes: the same workload — import, the embedding and Qdrant sync it fans out, chats
 * (extraction), a forced reindex, a summarise — runs twice over real api + worker processes, a fake Qdrant and a
 * static embedding model: once clean, once with the worker killed (-9) at a seeded random moment while each
 * kind of job is running, and a fresh worker started in its place. Both must end in the same canonical dump
 * (test/reliability/canonical-dump.ts): same memories, all embedded, same Qdrant points, same history.
 */

const SEED = Number(process.env.FAULT_SEED ?? 1503);
const IMPORTED = 600;
const CHATS = 60;
const DAY = 86_400_000;
// Fixed for both runs (module load): half the imported rows are old enough to be summarised.
const OLD = new Date(Math.floor((Date.now() - 90 * DAY) / DAY) * DAY);
const RECENT = new Date(Math.floor((Date.now() - 2 * DAY) / DAY) * DAY);
const TOPICS = ['cat', 'pizza', 'python', 'snow', 'dog', 'bread'];

function importFile(): { text: string; ids: Set<string> } {
  const ids = new Set<string>();
  const lines: string[] = [];
  for (let i = 0; i < IMPORTED; i++) {
    const at = new Date((i % 2 === 0 ? OLD : RECENT).getTime() + i * 1000).toISOString();
    const rec = { id: `imp-${i}`, apiKeyId: 'tenant-imp', sessionId: null, type: 'factual', key: `imp${i}`, content: `the ${TOPICS[i % TOPICS.length]} fact number ${i}`, metadata: { n: i }, createdAt: at, updatedAt: at, expiresAt: null, accessCount: 0, lastAccessedAt: null };
    ids.add(recordId(rec.id, rec.apiKeyId, rec.key, rec.content).id);
    lines.push(JSON.stringify(rec));
  }
  return { text: `${lines.join('\n')}\n`, ids };
}

/** Names of the jobs active in every queue right now. */
async function activeJobs(env: Env): Promise<string[]> {
  const names: string[] = [];
  for (const name of QUEUE_NAMES) {
    const q = new Queue(name, { connection: { url: redisUrl(env), maxRetriesPerRequest: 1 }, prefix: env.QUEUE_PREFIX });
    q.on('error', () => undefined);
    try {
      for (const j of await q.getJobs(['active'])) if (j) names.push(j.name);
    } finally {
      await q.close();
    }
  }
  return names;
}

/**
 * What a run that did not converge still holds, for the failure message: every job not completed in any
 * queue (waiting, active, delayed, failed — with attempts and the failure reason), and the outbox rows not
 * done (pending, tracked by Redis, quarantined).
 */
async function leftovers(env: Env): Promise<string> {
  const out: string[] = [];
  for (const name of QUEUE_NAMES) {
    const q = new Queue(name, { connection: { url: redisUrl(env), maxRetriesPerRequest: 1 }, prefix: env.QUEUE_PREFIX });
    q.on('error', () => undefined);
    try {
      for (const state of ['waiting', 'active', 'delayed', 'prioritized', 'paused', 'failed'] as const) {
        for (const j of await q.getJobs([state])) {
          if (!j || String(j.id).startsWith('repeat:')) continue;
          out.push(`  ${state} ${name}/${j.name}#${j.id} attempts=${j.attemptsMade} progress=${JSON.stringify(j.progress)} data=${JSON.stringify(j.data).slice(0, 160)}${j.failedReason ? ` failed: ${j.failedReason}` : ''}`);
        }
      }
    } catch (err) {
      out.push(`  ${name}: ${(err as Error).message}`);
    } finally {
      await q.close();
    }
  }
  const db = new Database(path.join(env.DATA_DIR, 'engram.db'), { readonly: true, fileMustExist: true });
  try {
    const rows = db
      .prepare('SELECT outbox_id, job_name, job_id, attempts, last_error, queued_at, quarantined_at, quarantine_error FROM outbox WHERE done_at IS NULL ORDER BY outbox_id LIMIT 50')
      .all() as Record<string, unknown>[];
    for (const r of rows) out.push(`  outbox ${JSON.stringify(r)}`);
    const flagged = db.prepare('SELECT COUNT(*) AS n FROM memories WHERE needs_reindex != 0').get() as { n: number };
    out.push(`  memories still flagged needs_reindex: ${flagged.n}`);
  } finally {
    db.close();
  }
  return `jobs not completed and outbox rows not done:\n${out.join('\n') || '  (none)'}`;
}

interface Kill {
  target: JobName;
  hit: boolean;
  /** How many `target` jobs were active just before the kill. */
  running: number;
  /** Job names active in any queue just before the kill (when the target was). */
  activeAtKill: string[];
  afterMs: number;
}

async function drained(s: Stack, env: Env, what: string): Promise<void> {
  let left: string | null = null;
  await waitUntil(
    async () => {
      left = await leftInQueues(env, QUEUE_NAMES);
      if (left) return false;
      const jobs = (await (await fetch(`${s.base}/api/jobs`, { headers: s.mgmt })).json()) as { outbox?: number };
      return (jobs.outbox ?? 0) === 0;
    },
    90_000,
    `${what}: queues and outbox drained`,
    200,
  ).catch(async (err: Error) => {
    throw new Error(`${err.message}: ${left}\n${await leftovers(env).catch((e: Error) => `leftovers: ${e.message}`)}\n${s.logs()}`);
  });
}

describe('worker kill -9 at random points of every job kind converges to the clean run', () => {
  jest.setTimeout(300_000);
  let upstream: FakeUpstream;
  const stacks: Stack[] = [];
  const qdrants: FakeQdrant[] = [];
  const folder = writeModel2VecFolder(path.join(tempDir('models'), 'm'), topicModelSpec(16));
  const file = importFile();

  beforeAll(async () => {
    upstream = await startFakeUpstream();
  });
  afterAll(async () => {
    for (const s of stacks) await s.stop();
    for (const q of qdrants) await q.close();
    await upstream.close();
  });

  /** The workload; with `rand`, the worker is crashed once while each job kind runs. */
  async function run(rand: (() => number) | null): Promise<{ dump: () => CanonicalDump; kills: Kill[]; lastKillAt: number; env: Env; s: Stack }> {
    const env = testEnv({ MEMORY_STATIC_MODEL: folder, COMPACT_EVERY_MS: '0' });
    const qdrant = await startFakeQdrant();
    qdrants.push(qdrant);
    const s = await startStack(env, { upstreamUrl: upstream.url, workers: 1, extra: { MEMORY_STATIC_MODEL: folder, COMPACT_EVERY_MS: '0', QDRANT_TIMEOUT_MS: '3000' } });
    stacks.push(s);
    const put = async (p: string, body: unknown) => {
      const r = await fetch(`${s.base}${p}`, { method: 'PUT', headers: s.mgmt, body: JSON.stringify(body) });
      if (r.status !== 200) throw new Error(`${p}: ${r.status} ${await r.text()}`);
    };
    await put('/api/settings/memory', { embeddingSource: 'static', staticEnabled: true });
    await put('/api/settings/qdrant', { enabled: true, host: qdrant.url });
    await drained(s, env, 'setup');

    const kills: Kill[] = [];
    let lastKillAt = 0;
    /**
     * Crashes the worker at a seeded random moment while a `target` job runs: waits (up to 10 s) for one to be
     * active, sleeps a seeded 0..maxDelayMs, and kills -9 at once; when none is active any more it tries again
     * with the next one (5 tries), and a kill that still finds none is recorded as a miss.
     */
    const crashDuring = async (target: JobName, maxDelayMs: number) => {
      if (!rand) return;
      const queue = JOBS[target].queue as QueueName;
      const started = Date.now();
      const q = new Queue(queue, { connection: { url: redisUrl(env), maxRetriesPerRequest: 1 }, prefix: env.QUEUE_PREFIX });
      q.on('error', () => undefined);
      const running = async () => (await q.getJobs(['active'])).filter((j) => j?.name === target).length;
      let hit = 0;
      try {
        // On a fast machine a job can end inside the delay: then wait for the next one of its kind (up to 5 tries).
        for (let attempt = 0; attempt < 5 && hit === 0; attempt++) {
          if ((await waitUntil(running, 10_000, `${target} active`, 5).catch(() => 0)) === 0) break;
          await new Promise((r) => setTimeout(r, Math.floor(rand() * maxDelayMs)));
          hit = await running();
        }
      } finally {
        await q.close();
      }
      const activeAtKill = hit ? await activeJobs(env) : [];
      await s.crashWorker();
      lastKillAt = Date.now();
      kills.push({ target, hit: hit > 0, running: hit, activeAtKill, afterMs: lastKillAt - started });
    };

    // 1. Import (the import job, then the embed-memory and qdrant-sync jobs it fans out).
    const up = await fetch(`${s.base}/api/memory/import`, { method: 'POST', headers: { ...s.mgmt, 'content-type': 'application/x-ndjson' }, body: file.text });
    if (up.status !== 202) throw new Error(`import: ${up.status} ${await up.text()}`);
    await crashDuring('import-memories', 100);
    await crashDuring('embed-memory', 100);
    await crashDuring('qdrant-sync', 30);
    await drained(s, env, 'import');

    // 2. Chats: one extraction job each.
    let n = 0;
    const chats = async () => {
      while (n < CHATS) {
        const i = n++;
        const r = await s.chat(`I prefer tool${i} for task${i}.`);
        if (r.status !== 200) throw new Error(`chat ${i}: ${r.status}`);
      }
    };
    await Promise.all([chats(), chats(), chats(), chats(), crashDuring('extract-facts', 100)]);
    await drained(s, env, 'extraction');

    // 3. A forced reindex of everything (and the Qdrant backfill that follows it).
    const ri = await fetch(`${s.base}/api/memory/reindex`, { method: 'POST', headers: s.mgmt, body: JSON.stringify({ force: true }) });
    if (ri.status !== 202) throw new Error(`reindex: ${ri.status} ${await ri.text()}`);
    await crashDuring('reindex', 20);
    await drained(s, env, 'reindex');

    // 4. Summarise the old imported rows.
    const su = await fetch(`${s.base}/api/memory/summarize`, { method: 'POST', headers: s.mgmt, body: JSON.stringify({ apiKeyId: 'tenant-imp', olderThanDays: 30 }) });
    if (su.status !== 202) throw new Error(`summarize: ${su.status} ${await su.text()}`);
    await crashDuring('summarize-older-than', 30);
    await drained(s, env, 'summarize');

    const dump = () => canonicalDump(env.DATA_DIR, { owners: { [s.key.id]: 'chat-key' }, stableIds: file.ids, qdrant });
    return { dump, kills, lastKillAt, env, s };
  }

  it(`seed ${SEED}: same memories, embeddings, Qdrant points and history as the clean run`, async () => {
    const t0 = Date.now();
    const clean = await run(null);
    const cleanDump = clean.dump();
    const cleanMs = Date.now() - t0;
    // The clean run is itself what a correct Engram holds: every memory embedded and in Qdrant, no stale point.
    expect(cleanDump.notEmbedded).toEqual([]);
    expect(cleanDump.qdrant.filter((p) => p.endsWith('(STALE)'))).toEqual([]);
    expect(cleanDump.vectors.length).toBeGreaterThan(IMPORTED / 4);
    expect(cleanDump.qdrant).toEqual(cleanDump.vectors);
    expect(cleanDump.memories.length).toBe(IMPORTED / 2 + CHATS + cleanDump.memories.filter((m) => m.includes('/summary:*')).length);
    await clean.s.stop();

    const t1 = Date.now();
    const faulty = await run(mulberry32(SEED));
    let last: CanonicalDump = faulty.dump();
    await waitUntil(() => JSON.stringify((last = faulty.dump())) === JSON.stringify(cleanDump), 60_000, 'the faulty run to converge', 250).catch(async (err: Error) => {
      // What differs first (the logs are long): the dump diff, the kills, what Redis and the outbox still hold.
      const kills = faulty.kills.map((k) => `  ${k.target}: ${k.hit ? `${k.running} active` : 'missed'}, also active [${k.activeAtKill.join(', ')}], ${k.afterMs} ms into the phase`);
      const msg = `${err.message} (seed ${SEED})\ndump diff (clean-only vs faulty-only):\n${dumpDiff(cleanDump, last, 30) || '(none)'}\nkills:\n${kills.join('\n')}\n${await leftovers(faulty.env).catch((e: Error) => `leftovers: ${e.message}`)}`;
      console.error(msg);
      throw new Error(`${msg}\n${faulty.s.logs(6000)}`);
    });
    const convergedMs = Date.now() - faulty.lastKillAt;
    const faultyMs = Date.now() - t1;

    const table = [
      `| kill -9 during | target jobs active at the kill | other jobs active after | killed at (ms into the phase) |`,
      `|---|---|---|---|`,
      ...faulty.kills.map((k) => `| ${k.target} | ${k.hit ? k.running : '0 (finished first)'} | ${[...new Set(k.activeAtKill.filter((x) => x !== k.target))].join(', ') || '-'} | ${k.afterMs} |`),
    ].join('\n');
    console.log(
      `worker kill -9 (seed ${SEED}): ${faulty.kills.length} crashes; clean run ${cleanMs} ms, faulty run ${faultyMs} ms; ` +
        `converged ${convergedMs} ms after the last kill; dump: ${cleanDump.memories.length} memories, ${cleanDump.vectors.length} vectors, ${cleanDump.qdrant.length} Qdrant points, ${cleanDump.history.length} history events — identical\n${table}`,
    );
    expect(last).toEqual(cleanDump);
    // The crashes really landed inside jobs: most targets were running when the worker died.
    expect(faulty.kills.filter((k) => k.hit).length).toBeGreaterThanOrEqual(5);
  });
});
