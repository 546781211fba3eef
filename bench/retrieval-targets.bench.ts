/**
 * Issue 14's retrieval targets: how each tier's cost grows with the memories of one key (1k / 10k /
 * 100k), each figure beside a plain baseline measured in the same run and alternating with it query
 * by query (the machine is shared: a busy moment slows both alike):
 *
 * - KNN: the in-memory WebAssembly scan (SqliteVecStore with MEMORY_VEC_SCAN_CACHE_MB) against exact
 *   float KNN (the same store with the scan off: vec0's brute-force scan of the tenant's partition),
 *   and the fast path's recall@20 against it;
 * - keyword: RetrievalRepository.fts (tenant token inside the MATCH, bm25, all filters) against plain
 *   BM25 over the tenant's texts (FTS5 MATCH of the same terms, joined to the key's rows, bm25 order);
 * - hybrid: RetrievalService.retrieve (preview, query embedding uncached) against the same service
 *   over the vec0-only store.
 *
 * `--scale 1m` (or `--scale=1m`) adds the tenant-independence figure: a 1k-memory key's hybrid p50 in
 * a database of 1M memories of 100 other keys (rows of all keys interleaved), against the same key's
 * 1k memories alone in a database of their own. The 1M database is built once and cached in
 * os.tmpdir()/engram-bench-1m (delete the folder to rebuild).
 *
 *   npm run bench -- retrieval-targets [--sizes=1000,10000] [--text=chat] [--scale 1m]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildApiContext } from '../src/api';
import type { Env } from '../src/config/env';
import type { ApiContext } from '../src/http/api-context';
import { MemoryReadCache } from '../src/memory/read-cache';
import { MemoryService } from '../src/memory/memory.service';
import { RetrievalRepository, type CandidateFilter } from '../src/memory/retrieval.repository';
import { ftsMatchOf, ftsQueryTerms } from '../src/memory/retrieval-scoring';
import { RetrievalService } from '../src/memory/retrieval.service';
import type { Retriever } from '../src/memory/retrieval.types';
import { SqliteVecStore } from '../src/vector/sqlite-vec.store';
import type { KnnFilter } from '../src/vector/types';
import { silentLog, testEnv, testPrefix } from '../test/helpers/env';
import { benchStaticModel } from './build-wink-model';
import { GENERATED_SETS, generateSet } from './quality/generator';
import { closeBenchContext, Corpus, embedPending, ms, percentile, retrievalDeps, rng, seedMemories, useStaticSource } from './retrieval.bench';
import { reportTargets, type TargetRow } from './target-table';

const MAIN_KEY = 'bench-main';
const OTHER_KEYS = 10;
const OTHER_ROWS = 1_000;
const QUERIES = 200;
const K = 20;
/** One tier's pass at one size stops early past this, so a slow machine still finishes. */
const PASS_BUDGET_MS = 60_000;
const SCALE_KEYS = 100;
const SCALE_ROWS_PER_KEY = 10_000;
const SCALE_SMALL_KEY = 'bench-small';
const SCALE_SMALL_ROWS = 1_000;
/** Bump when the cached 1M database's content or schema expectations change. */
const SCALE_CACHE_VERSION = 'v1';

function option(args: string[], name: string): string | undefined {
  const eq = args.find((a) => a.startsWith(`--${name}=`));
  if (eq) return eq.slice(name.length + 3);
  const at = args.indexOf(`--${name}`);
  return at >= 0 && args[at + 1] && !args[at + 1]!.startsWith('--') ? args[at + 1] : undefined;
}

type Text = { memory: (i: number) => string; queries: string[]; label: string };

function textSet(kind: string | undefined, size: number, corpus: Corpus): Text {
  if (kind === 'chat') {
    const set = generateSet({ ...GENERATED_SETS[0]!, name: 'targets-chat', chats: Math.max(1, Math.ceil(size / 330)) });
    return {
      memory: (i) => set.turns[i % set.turns.length]!.content,
      queries: [...new Set(set.questions.map((q) => q.question))].slice(0, QUERIES),
      label: 'generated chat turns and their questions',
    };
  }
  const r = rng(42 + size);
  return { memory: () => corpus.memory(r), queries: corpus.queries(QUERIES, 7), label: 'template sentences and questions' };
}

const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
const p = (xs: number[], q: number) => ms(percentile(sorted(xs), q));

/** Runs `fns` for each query, alternating their order query by query; returns each one's times. */
async function alternate(queries: string[], fns: ((q: string) => unknown)[]): Promise<number[][]> {
  const times = fns.map(() => [] as number[]);
  for (const q of queries.slice(0, 5)) for (const f of fns) await f(q); // warm statements and caches
  const started = performance.now();
  for (let i = 0; i < queries.length; i++) {
    const order = fns.map((_, j) => j);
    if (i % 2) order.reverse();
    for (const j of order) {
      const t0 = performance.now();
      await fns[j]!(queries[i]!);
      times[j]!.push(performance.now() - t0);
    }
    if (performance.now() - started > PASS_BUDGET_MS) break;
  }
  return times;
}

/** Plain BM25 over the key's texts: the terms' MATCH over the whole index, joined to the key's live rows, bm25 order, top 100. */
function plainBm25(ctx: ApiContext, match: string, f: CandidateFilter): unknown[] {
  return ctx.db.db
    .prepare(
      `SELECT m.memory_id, bm25(memory_fts) AS s FROM memory_fts JOIN memories m ON m.memory_id = memory_fts.rowid
       WHERE memory_fts MATCH ? AND m.api_key_id = ? AND (m.expires_at IS NULL OR m.expires_at > ?) ORDER BY s LIMIT 100`,
    )
    .all(match, f.apiKeyId, f.nowIso);
}

interface Tiers {
  knn: number[][];
  recall: number;
  keyword: number[][];
  hybrid: number[][];
}

/** Each tier at the key's current size, fast path vs baseline alternating. */
async function measureTiers(ctx: ApiContext, key: string, queries: string[], signature: string): Promise<Tiers> {
  const settings = useStaticSource(ctx);
  const exactStore = new SqliteVecStore(ctx.db.db, { vecLoaded: true, quantization: ctx.env.MEMORY_VEC_QUANTIZATION });
  const repo = new RetrievalRepository(ctx.db.db);
  const nowIso = new Date().toISOString();
  const f: CandidateFilter = { apiKeyId: key, nowIso, freshAfterIso: null, sessionId: null };
  const kf: KnnFilter = { nowIso, signature };
  const vectors = (await ctx.embedding.embedMany(queries, settings)).vectors;
  const vecOf = new Map(queries.map((q, i) => [q, vectors[i]!]));

  let found = 0;
  let total = 0;
  for (const q of queries) {
    const want = exactStore.knn(key, vecOf.get(q)!, K, kf).map((h) => h.rowId);
    const got = new Set(ctx.vectors.knn(key, vecOf.get(q)!, K, kf).map((h) => h.rowId));
    found += want.filter((id) => got.has(id)).length;
    total += want.length;
  }
  const knn = await alternate(queries, [(q) => ctx.vectors.knn(key, vecOf.get(q)!, K, kf), (q) => exactStore.knn(key, vecOf.get(q)!, K, kf)]);
  const matchOf = (q: string) => ftsMatchOf(ftsQueryTerms(q));
  const withTerms = queries.filter((q) => ftsQueryTerms(q).length > 0);
  // The keyword tier: the key's own in-memory index (keyword-index.ts) and its top rows read whole, vs FTS5's bm25.
  const kwIndex = (ctx.retrieval as RetrievalService).keywordIndex;
  const keyword = await alternate(withTerms, [(q) => repo.byRowIds(kwIndex.index(key).search(ftsQueryTerms(q), f, 100)), (q) => plainBm25(ctx, matchOf(q), f)]);
  const vec0Retrieval = new RetrievalService({ ...retrievalDeps(ctx), vectors: exactStore });
  const retrieve = (r: Retriever) => async (q: string) => {
    ctx.embedding.clearCache();
    return r.retrieve(key, { query: q, strategy: 'hybrid', maxTokens: 2000, retentionDays: 30 }, { preview: true });
  };
  const hybrid = await alternate(queries, [retrieve(ctx.retrieval), retrieve(vec0Retrieval)]);
  return { knn, recall: total ? found / total : NaN, keyword, hybrid };
}

const fmt = (x: number) => `${x.toFixed(2)} ms`;
const perKey = (n: number) => (n >= 1000 ? `${n / 1000}k` : String(n));

function targetRows(size: number, t: Tiers, load: string): TargetRow[] {
  const [hFast, hBase] = t.hybrid as [number[], number[]];
  const [kFast, kBase] = t.knn as [number[], number[]];
  const [wFast, wBase] = t.keyword as [number[], number[]];
  const goal = size === 10_000 ? { p50: 2, p99: 5 } : size === 100_000 ? { p50: 10, p99: 20 } : null;
  const rows: TargetRow[] = [];
  if (goal) {
    rows.push({
      figure: `hybrid retrieval p50 / p99, ${perKey(size)} memories/key (load ${load})`,
      measured: `${fmt(p(hFast, 50))} / ${fmt(p(hFast, 99))}`,
      baseline: `hybrid over vec0 KNN ${fmt(p(hBase, 50))} / ${fmt(p(hBase, 99))}; exact KNN ${fmt(p(kBase, 50))}; plain BM25 ${fmt(p(wBase, 50))}`,
      target: `≤ ${goal.p50} / ≤ ${goal.p99} ms`,
      pass: p(hFast, 50) <= goal.p50 && p(hFast, 99) <= goal.p99,
    });
  }
  rows.push({
    figure: `KNN recall@${K} of the fast path vs exact float KNN, ${perKey(size)}/key`,
    measured: t.recall.toFixed(3),
    baseline: `fast KNN ${fmt(p(kFast, 50))} vs exact ${fmt(p(kBase, 50))} p50; keyword ${fmt(p(wFast, 50))} vs plain BM25 ${fmt(p(wBase, 50))}`,
    target: '≥ 0.95',
    pass: t.recall >= 0.95,
  });
  return rows;
}

async function scalingTable(args: string[]): Promise<{ rows: TargetRow[]; table: Record<string, string | number>[] }> {
  const sizes = (option(args, 'sizes') ?? '1000,10000,100000').split(',').map(Number);
  const model = benchStaticModel();
  const corpus = new Corpus(model);
  const env = testEnv({ MEMORY_STATIC_MODEL: model.folder, QUEUE_PREFIX: testPrefix('bench-targets'), MEMORY_EMBEDDING_CACHE_MAX: '5000' });
  const ctx = buildApiContext(env, silentLog());
  const rows: TargetRow[] = [];
  const table: Record<string, string | number>[] = [];
  try {
    const settings = useStaticSource(ctx);
    const writer = new MemoryService(ctx.db.db, new MemoryReadCache(100, 60_000));
    const probe = await ctx.embedding.embedOne('engram dimension probe', settings);
    const dim = probe.resolution.dimensions!;
    const signature = ctx.vectors.signatureFor(probe.resolution)!;
    ctx.vectors.rebuild(signature, dim);
    const otherRng = rng(7);
    for (let k = 0; k < OTHER_KEYS; k++) seedMemories(writer, `bench-other-${k}`, OTHER_ROWS, () => corpus.memory(otherRng));
    const text = textSet(option(args, 'text'), Math.max(...sizes), corpus);
    let have = 0;
    for (const size of sizes) {
      seedMemories(writer, MAIN_KEY, size - have, (i) => text.memory(have + i));
      have = size;
      await embedPending(ctx.embedding, ctx.vectors, settings, signature, dim);
      const load = os.loadavg()[0]!.toFixed(1);
      // The key's keyword index loaded whole, as at its first query after a restart (then kept current from the log).
      const kwIndex = (ctx.retrieval as RetrievalService).keywordIndex;
      kwIndex.clear();
      const loadStart = performance.now();
      const kwBytes = kwIndex.index(MAIN_KEY).bytes;
      const kwLoadMs = performance.now() - loadStart;
      const t = await measureTiers(ctx, MAIN_KEY, text.queries, signature);
      const [hFast, hBase] = t.hybrid as [number[], number[]];
      const [kFast, kBase] = t.knn as [number[], number[]];
      const [wFast, wBase] = t.keyword as [number[], number[]];
      table.push({
        'memories/key': size,
        'KNN scan p50/p99': `${p(kFast, 50)} / ${p(kFast, 99)}`,
        'exact vec0 KNN p50/p99': `${p(kBase, 50)} / ${p(kBase, 99)}`,
        [`recall@${K}`]: Number(t.recall.toFixed(3)),
        'keyword p50/p99': `${p(wFast, 50)} / ${p(wFast, 99)}`,
        'plain BM25 p50/p99': `${p(wBase, 50)} / ${p(wBase, 99)}`,
        'hybrid p50/p99': `${p(hFast, 50)} / ${p(hFast, 99)}`,
        'hybrid over vec0 p50/p99': `${p(hBase, 50)} / ${p(hBase, 99)}`,
        'keyword index load ms / MB': `${kwLoadMs.toFixed(0)} / ${(kwBytes / 1_048_576).toFixed(1)}`,
        queries: hFast.length,
        load,
      });
      rows.push(...targetRows(size, t, load));
    }
    console.log(`Scaling (${text.label}), ${OTHER_KEYS} other keys × ${OTHER_ROWS}, ms, fast path and baseline alternating per query, query embedding uncached for hybrid; load = 1-min load average on ${os.cpus().length} CPUs:`);
    console.table(table);
    console.log(`scan cache: ${ctx.vectors.scanCache.tenants} tenant(s), ${(ctx.vectors.scanCache.bytesHeld / 1_048_576).toFixed(1)} MB`);
  } finally {
    await closeBenchContext(ctx, env);
  }
  return { rows, table };
}

/** Builds (once) or opens the cached 1M-row database: 100 keys × 10k rows and a 1k-row key, all interleaved by memory_id. */
async function openScaleDb(): Promise<{ ctx: ApiContext; env: Env; signature: string; queries: string[]; built: boolean }> {
  const model = benchStaticModel();
  const corpus = new Corpus(model);
  const dir = path.join(os.tmpdir(), 'engram-bench-1m');
  const marker = path.join(dir, `ready-${SCALE_CACHE_VERSION}.json`);
  // The index signature names the model folder: a cache built from another checkout's folder is rebuilt, not half-used.
  const cachedFor = fs.existsSync(marker) ? (JSON.parse(fs.readFileSync(marker, 'utf8')) as { modelFolder?: string }).modelFolder : undefined;
  const built = cachedFor !== model.folder;
  if (built) fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const env = testEnv({ DATA_DIR: dir, MEMORY_STATIC_MODEL: model.folder, QUEUE_PREFIX: testPrefix('bench-targets-1m'), MEMORY_EMBEDDING_CACHE_MAX: '5000' });
  const ctx = buildApiContext(env, silentLog());
  const settings = useStaticSource(ctx);
  const probe = await ctx.embedding.embedOne('engram dimension probe', settings);
  const signature = ctx.vectors.signatureFor(probe.resolution)!;
  if (built) {
    const t0 = performance.now();
    ctx.vectors.rebuild(signature, probe.resolution.dimensions!);
    const writer = new MemoryService(ctx.db.db, new MemoryReadCache(100, 60_000));
    const r = rng(1234);
    const round = 100;
    // Interleaved: each round adds `round` rows to every key and a proportional share to the small key.
    for (let done = 0; done < SCALE_ROWS_PER_KEY; done += round) {
      for (let k = 0; k < SCALE_KEYS; k++) seedMemories(writer, `bench-tenant-${k}`, round, () => corpus.memory(r));
      seedMemories(writer, SCALE_SMALL_KEY, (SCALE_SMALL_ROWS * round) / SCALE_ROWS_PER_KEY, () => corpus.memory(r));
      if (done % 1000 === 0) console.log(`1M database: ${(done + round) * SCALE_KEYS} rows seeded, ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    }
    await embedPending(ctx.embedding, ctx.vectors, settings, signature, probe.resolution.dimensions!);
    fs.writeFileSync(marker, JSON.stringify({ signature, modelFolder: model.folder, seconds: (performance.now() - t0) / 1000 }));
    console.log(`1M database built in ${((performance.now() - t0) / 1000).toFixed(0)} s: ${dir}`);
  }
  return { ctx, env, signature, queries: corpus.queries(QUERIES, 7), built };
}

async function tenantIndependence(): Promise<TargetRow[]> {
  const big = await openScaleDb();
  let bigTiers: Tiers;
  let bigLoad: string;
  try {
    bigLoad = os.loadavg()[0]!.toFixed(1);
    bigTiers = await measureTiers(big.ctx, SCALE_SMALL_KEY, big.queries, big.signature);
  } finally {
    await big.ctx.jobEvents.close();
    await big.ctx.queues.close();
    await big.ctx.embedding.close();
    big.ctx.db.close(); // the folder stays: it is the cache
  }
  // Baseline: the same 1k memories (same seed and order of texts) alone in a database of their own.
  const model = benchStaticModel();
  const corpus = new Corpus(model);
  const env = testEnv({ MEMORY_STATIC_MODEL: model.folder, QUEUE_PREFIX: testPrefix('bench-targets-1k'), MEMORY_EMBEDDING_CACHE_MAX: '5000' });
  const ctx = buildApiContext(env, silentLog());
  let alone: Tiers;
  try {
    const settings = useStaticSource(ctx);
    const probe = await ctx.embedding.embedOne('engram dimension probe', settings);
    const signature = ctx.vectors.signatureFor(probe.resolution)!;
    ctx.vectors.rebuild(signature, probe.resolution.dimensions!);
    const r = rng(99);
    seedMemories(new MemoryService(ctx.db.db, new MemoryReadCache(100, 60_000)), SCALE_SMALL_KEY, SCALE_SMALL_ROWS, () => corpus.memory(r));
    await embedPending(ctx.embedding, ctx.vectors, settings, signature, probe.resolution.dimensions!);
    alone = await measureTiers(ctx, SCALE_SMALL_KEY, corpus.queries(QUERIES, 7), signature);
  } finally {
    await closeBenchContext(ctx, env);
  }
  const [h] = bigTiers.hybrid as [number[], number[]];
  const [, hVec0] = bigTiers.hybrid as [number[], number[]];
  const [w, wPlain] = bigTiers.keyword as [number[], number[]];
  const [hAlone] = alone.hybrid as [number[]];
  console.log(`1k-memory key among ${SCALE_KEYS} keys × ${SCALE_ROWS_PER_KEY} (1M rows${big.built ? ', built this run' : ', cached'}), ms p50/p99:`);
  console.table([
    { db: '1M rows, 100 other keys', hybrid: `${p(h, 50)} / ${p(h, 99)}`, 'hybrid over vec0': `${p(hVec0, 50)} / ${p(hVec0, 99)}`, keyword: `${p(w, 50)} / ${p(w, 99)}`, 'plain BM25 (no tenant token)': `${p(wPlain, 50)} / ${p(wPlain, 99)}`, [`recall@${K}`]: bigTiers.recall.toFixed(3) },
    { db: 'the key alone (1k rows)', hybrid: `${p(hAlone, 50)} / ${p(hAlone, 99)}`, 'hybrid over vec0': `${p(alone.hybrid[1]!, 50)} / ${p(alone.hybrid[1]!, 99)}`, keyword: `${p(alone.keyword[0]!, 50)} / ${p(alone.keyword[0]!, 99)}`, 'plain BM25 (no tenant token)': `${p(alone.keyword[1]!, 50)} / ${p(alone.keyword[1]!, 99)}`, [`recall@${K}`]: alone.recall.toFixed(3) },
  ]);
  return [
    {
      figure: `a 1k-memory key's hybrid p50, database of 1M memories of ${SCALE_KEYS} other keys (load ${bigLoad})`,
      measured: fmt(p(h, 50)),
      baseline: `the same key alone ${fmt(p(hAlone, 50))}; keyword ${fmt(p(w, 50))} vs plain BM25 ${fmt(p(wPlain, 50))} in the 1M db`,
      target: '≤ 2 ms',
      pass: p(h, 50) <= 2,
    },
  ];
}

/** The retrieval rows of issue 14's target table (the integrator merges helpers' rows into one `targets` table). */
export async function measureRetrievalTargets(args: string[]): Promise<TargetRow[]> {
  const rows = (await scalingTable(args)).rows;
  if (option(args, 'scale') === '1m') rows.push(...(await tenantIndependence()));
  return rows;
}

export async function runRetrievalTargetsBench(args: string[] = process.argv.slice(2)): Promise<void> {
  const rows = await measureRetrievalTargets(args);
  reportTargets('retrieval-targets', rows, { args });
}
