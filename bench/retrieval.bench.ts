import fs from 'node:fs';
import os from 'node:os';
import type { Env } from '../src/config/env';
import type { ApiContext } from '../src/http/api-context';
import { RetrievalRepository } from '../src/memory/retrieval.repository';
import type { EmbeddingService, EmbeddingSettings } from '../src/embedding/embedding.service';
import { buildApiContext } from '../src/api';
import { MemoryReadCache } from '../src/memory/read-cache';
import { MemoryService } from '../src/memory/memory.service';
import { buildFtsQuery } from '../src/memory/retrieval-scoring';
import { RetrievalService, type RetrievalDeps } from '../src/memory/retrieval.service';
import type { RetrievalResult, RetrievalStrategy, Retriever } from '../src/memory/retrieval.types';
import { MEMORY_TYPES } from '../src/memory/types';
import { SqliteVecStore } from '../src/vector/sqlite-vec.store';
import { silentLog, testEnv, testPrefix } from '../test/helpers/env';
import { FIXTURE_TOPICS } from '../test/helpers/model-fixtures';
import { benchStaticModel, type BenchModel } from './build-wink-model';
import { mulberry32 } from '../test/helpers/prng';

const MAIN_KEY = 'bench-main';
const SIZES = [1_000, 10_000, 100_000];
/** Other tenants' rows share the tables, so every tier has to skip them. */
const OTHER_KEYS = 10;
const OTHER_ROWS_PER_KEY = 1_000;
const QUERY_COUNT = 200;
const SEED_CHUNK = 5_000;
const EMBED_BATCH = 1_000;
/** One (size, strategy) pass stops early past this, so the bench stays bounded on a slow machine. */
const PASS_BUDGET_MS = 45_000;
const STRATEGIES: RetrievalStrategy[] = ['exact', 'semantic', 'hybrid'];
const TARGET = { size: 10_000, p50: 10, p99: 25 };

/** A deterministic PRNG (mulberry32), so every run seeds and queries the same text. */
export const rng = mulberry32;

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** Milliseconds rounded for a table. */
export const ms = (x: number): number => Number(x.toFixed(2));

const pick = <T>(xs: readonly T[], r: () => number): T => xs[Math.floor(r() * xs.length)];
const cap = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

const W = {
  name: ['alice', 'bob', 'carol', 'david', 'emma', 'frank', 'grace', 'henry', 'isabel', 'jack', 'karen', 'liam', 'maria', 'nathan', 'olivia', 'peter', 'rachel', 'samuel', 'tina', 'victor', 'wendy', 'oscar', 'julia', 'marco'],
  city: ['berlin', 'paris', 'london', 'tokyo', 'madrid', 'chicago', 'toronto', 'sydney', 'dublin', 'vienna', 'seattle', 'boston', 'lisbon', 'prague', 'oslo', 'denver', 'milan', 'seoul'],
  food: ['pasta', 'sushi', 'pizza', 'salad', 'curry', 'soup', 'tacos', 'steak', 'pancakes', 'noodles', 'sandwiches', 'burgers', 'dumplings', 'oatmeal', 'peanuts', 'shrimp', 'cheese', 'chocolate'],
  drink: ['coffee', 'tea', 'juice', 'wine', 'beer', 'water', 'lemonade', 'espresso', 'milk', 'cocoa'],
  job: ['engineer', 'teacher', 'nurse', 'lawyer', 'designer', 'accountant', 'chef', 'pilot', 'architect', 'journalist', 'pharmacist', 'electrician', 'dentist', 'librarian'],
  relative: ['sister', 'brother', 'mother', 'father', 'daughter', 'son', 'cousin', 'aunt', 'uncle', 'grandmother', 'grandfather', 'wife', 'husband', 'friend', 'neighbor'],
  hobby: ['hiking', 'painting', 'chess', 'gardening', 'cycling', 'swimming', 'photography', 'knitting', 'running', 'fishing', 'cooking', 'reading', 'climbing', 'yoga', 'piano', 'guitar'],
  tech: ['postgres', 'redis', 'kubernetes', 'docker', 'python', 'typescript', 'java', 'rust', 'react', 'nginx', 'terraform', 'kafka', 'mongodb', 'linux', 'elasticsearch', 'graphql'],
  project: ['billing', 'search', 'checkout', 'onboarding', 'analytics', 'payments', 'notifications', 'dashboard', 'inventory', 'reporting', 'authentication', 'mobile', 'shipping', 'recommendations'],
  day: ['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'],
  month: ['january', 'february', 'march', 'april', 'may', 'june', 'july', 'august', 'september', 'october', 'november', 'december'],
  adj: ['spicy', 'quiet', 'cheap', 'cozy', 'crowded', 'fancy', 'small', 'new', 'family', 'vegetarian', 'popular', 'tiny'],
  pet: ['dog', 'cat', 'parrot', 'rabbit', 'hamster', 'turtle', 'horse', 'goldfish', 'puppy', 'kitten'],
  topic: ['budget', 'roadmap', 'hiring', 'security', 'marketing', 'pricing', 'migration', 'outage', 'release', 'contract', 'design', 'quarterly', 'compliance', 'training'],
  color: ['red', 'blue', 'green', 'black', 'white', 'silver', 'yellow', 'grey'],
  vehicle: ['car', 'bicycle', 'van', 'truck', 'scooter', 'motorcycle'],
  hour: ['seven', 'eight', 'nine', 'ten', 'eleven', 'noon', 'two', 'three', 'four', 'five', 'six'],
} as const;

type Slots = { [K in keyof typeof W]: string } & { name2: string; food2: string; drink2: string; tech2: string; days: string };

function slots(r: () => number): Slots {
  const s = Object.fromEntries(Object.entries(W).map(([k, v]) => [k, pick(v, r)])) as { [K in keyof typeof W]: string };
  return { ...s, name2: pick(W.name, r), food2: pick(W.food, r), drink2: pick(W.drink, r), tech2: pick(W.tech, r), days: String(7 + Math.floor(r() * 80)) };
}

/** Memory sentences: facts, preferences, events and procedures of a personal/work assistant. */
const MEMORY_TEMPLATES: ((s: Slots) => string)[] = [
  (s) => `${cap(s.name)} prefers ${s.drink} over ${s.drink2} in the morning.`,
  (s) => `My ${s.relative} lives in ${cap(s.city)} and works as a ${s.job}.`,
  (s) => `The ${s.project} service runs on ${s.tech} and is deployed every ${s.day}.`,
  (s) => `${cap(s.name)} is allergic to ${s.food}, so avoid it when ordering lunch.`,
  (s) => `Remember that the ${s.topic} meeting moved to ${s.day} at ${s.hour}.`,
  (s) => `I enjoy ${s.hobby} on weekends, usually with my ${s.relative}.`,
  (s) => `Our ${s.project} team switched from ${s.tech} to ${s.tech2} in ${s.month}.`,
  (s) => `${cap(s.name)} has a ${s.pet} called ${cap(s.name2)}.`,
  (s) => `The ${s.adj} ${s.food} place near the office closes early on ${s.day}.`,
  (s) => `My favourite ${s.food} recipe needs ${s.food2} and a little ${s.drink}.`,
  (s) => `${cap(s.name)} is flying to ${cap(s.city)} in ${s.month} for a ${s.topic} conference.`,
  (s) => `The ${s.project} dashboard shows errors whenever ${s.tech} restarts.`,
  (s) => `I am learning ${s.hobby} and want to practice twice a week before ${s.month}.`,
  (s) => `${cap(s.name)} asked for a ${s.topic} review before the ${s.project} launch.`,
  (s) => `My ${s.relative} recommended a ${s.adj} ${s.food} restaurant in ${cap(s.city)}.`,
  (s) => `Backups of the ${s.tech} cluster run nightly and are kept for ${s.days} days.`,
  (s) => `The ${s.color} ${s.vehicle} parked outside belongs to my ${s.relative}.`,
  (s) => `${cap(s.name)} works as a ${s.job} at a ${s.adj} startup in ${cap(s.city)}.`,
  (s) => `Never schedule ${s.topic} calls on ${s.day} because ${cap(s.name)} is out.`,
  (s) => `The ticket about the ${s.project} bug was assigned to ${cap(s.name)} in ${s.month}.`,
  (s) => `For ${s.relative}'s birthday in ${s.month} I plan to cook ${s.food} and buy ${s.drink}.`,
  (s) => `To restart ${s.tech} on the ${s.project} hosts, drain traffic first and wait ${s.days} seconds.`,
];

/** Questions a user would ask, over the same slot words (some share words with memories, some only meaning). */
const QUERY_TEMPLATES: ((s: Slots) => string)[] = [
  (s) => `what does ${s.name} drink in the morning`,
  (s) => `where does my ${s.relative} live`,
  (s) => `which database does the ${s.project} service use`,
  (s) => `is ${s.name} allergic to anything`,
  (s) => `when is the ${s.topic} meeting`,
  (s) => `what do I like doing on weekends with my ${s.relative}`,
  (s) => `who owns a ${s.pet}`,
  (s) => `${s.name} trip to ${s.city}`,
  (s) => `${s.project} dashboard errors after a restart`,
  (s) => `good ${s.food} restaurant in ${s.city}`,
  (s) => `how long are ${s.tech} backups kept`,
  (s) => `what is ${s.name}'s job`,
  (s) => `who is handling the ${s.project} bug`,
  (s) => `recipe with ${s.food} and ${s.food2}`,
  (s) => `${s.relative} birthday dinner plans`,
  (s) => `how do I restart ${s.tech}`,
];

/** Generates memory and query text for a model: template sentences, plus fixture topic words when the model is the fixture (it knows no English). */
export class Corpus {
  private readonly extra: string[];

  constructor(readonly model: BenchModel) {
    this.extra = model.fixture ? [...Object.values(FIXTURE_TOPICS).flat(), ...Array.from({ length: 2000 }, (_, i) => `filler${i}`)] : [];
  }

  private withExtra(text: string, r: () => number, n: number): string {
    if (!this.extra.length) return text;
    return `${text} ${Array.from({ length: n }, () => pick(this.extra, r)).join(' ')}`;
  }

  /** One memory sentence. */
  memory(r: () => number): string {
    return this.withExtra(pick(MEMORY_TEMPLATES, r)(slots(r)), r, 3);
  }

  /** `n` distinct queries. */
  queries(n: number, seed: number): string[] {
    const r = rng(seed);
    const out = new Set<string>();
    while (out.size < n) out.add(this.withExtra(pick(QUERY_TEMPLATES, r)(slots(r)), r, 1));
    return [...out];
  }
}

/** Inserts `count` memories for a key through MemoryService.upsertMany in chunks (the real write path, without the api's embed-on-write hook). */
export function seedMemories(writer: MemoryService, apiKeyId: string, count: number, text: (i: number) => string): void {
  for (let start = 0; start < count; start += SEED_CHUNK) {
    const inputs = Array.from({ length: Math.min(SEED_CHUNK, count - start) }, (_, i) => ({
      apiKeyId,
      type: MEMORY_TYPES[(start + i) % MEMORY_TYPES.length],
      content: text(start + i),
    }));
    writer.upsertMany(inputs, { source: 'import' }, 'import');
  }
}

/** Embeds every flagged row in batches and stores the vectors, as the reindex job does; returns how many rows. */
export async function embedPending(embedding: EmbeddingService, store: SqliteVecStore, settings: EmbeddingSettings, signature: string, dim: number): Promise<number> {
  let cursor = 0;
  let done = 0;
  for (;;) {
    const rows = store.pendingReindex(EMBED_BATCH, cursor);
    if (rows.length === 0) return done;
    cursor = rows[rows.length - 1].rowId;
    const { vectors } = await embedding.embedMany(
      rows.map((r) => r.content),
      settings,
    );
    store.upsertMany(
      rows.map((r, i) => ({ rowId: r.rowId, apiKeyId: r.apiKeyId, vector: vectors[i] ?? new Float32Array(dim), contentHash: r.contentHash })),
      signature,
    );
    done += rows.length;
  }
}

/** The static source on for every key (settings are global). */
export function useStaticSource(ctx: Pick<ApiContext, 'settings'>): EmbeddingSettings {
  return ctx.settings.updateMemory({ embeddingSource: 'static', staticEnabled: true });
}

/** The dependencies a RetrievalService was built with, to build variants (other weights, another store). */
export function retrievalDeps(ctx: ApiContext): RetrievalDeps {
  return (ctx.retrieval as unknown as { d: RetrievalDeps }).d;
}

/** Closes an api context built by a bench and removes its data directory. */
export async function closeBenchContext(ctx: ApiContext, env: Env): Promise<void> {
  await ctx.jobEvents.close();
  await ctx.queues.close();
  await ctx.embedding.close();
  ctx.db.close();
  fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
}

interface Pass {
  times: number[];
  fallbacks: number;
  items: number;
}

async function runQueries(retriever: Retriever, strategy: RetrievalStrategy, queries: string[]): Promise<Pass> {
  const opts = (query: string) => ({ query, strategy, maxTokens: 2000, retentionDays: 30 });
  // Warm statement caches and the model; these queries are not measured.
  for (const q of queries.slice(0, 5)) await retriever.retrieve(MAIN_KEY, opts(`${q} warm`), { preview: true });
  const started = performance.now();
  const pass: Pass = { times: [], fallbacks: 0, items: 0 };
  for (const q of queries) {
    const t0 = performance.now();
    const r: RetrievalResult = await retriever.retrieve(MAIN_KEY, opts(q), { preview: true });
    pass.times.push(performance.now() - t0);
    if (r.resolution.fallbackReason) pass.fallbacks++;
    pass.items += r.items.length;
    if (performance.now() - started > PASS_BUDGET_MS) break;
  }
  pass.times.sort((a, b) => a - b);
  return pass;
}

type Row = Record<string, string | number>;

/** Times each tier alone for the same queries (vectors embedded up front), so the totals above can be read. */
async function tierBreakdown(ctx: ApiContext, settings: EmbeddingSettings, signature: string, size: number, queries: string[]): Promise<Row> {
  const repo = new RetrievalRepository(ctx.db.db);
  const nowIso = new Date().toISOString();
  const filter = { apiKeyId: MAIN_KEY, nowIso, freshAfterIso: new Date(Date.now() - 30 * 86_400_000).toISOString(), sessionId: null };
  const vectors = (await ctx.embedding.embedMany(queries, settings)).vectors;
  const knn: number[] = [];
  const fts: number[] = [];
  let matches = 0;
  queries.forEach((q, i) => {
    const v = vectors[i];
    if (v) {
      const t0 = performance.now();
      ctx.vectors.knn(MAIN_KEY, v, ctx.env.MEMORY_VEC_TOP_K, { nowIso, freshAfterIso: filter.freshAfterIso, signature });
      knn.push(performance.now() - t0);
    }
    const match = buildFtsQuery(q);
    if (match) {
      const t0 = performance.now();
      matches += repo.fts(match, filter, 100).length;
      fts.push(performance.now() - t0);
    }
  });
  knn.sort((a, b) => a - b);
  fts.sort((a, b) => a - b);
  return {
    'memories/key': size,
    [`knn k=${ctx.env.MEMORY_VEC_TOP_K} p50 ms`]: ms(percentile(knn, 50)),
    'knn p99 ms': ms(percentile(knn, 99)),
    'fts5 top-100 p50 ms': ms(percentile(fts, 50)),
    'fts5 p99 ms': ms(percentile(fts, 99)),
    'fts5 avg candidates': Number((matches / Math.max(1, fts.length)).toFixed(1)),
  };
}

function row(size: number, strategy: RetrievalStrategy, storage: string, pass: Pass): Row {
  const targeted = strategy === 'hybrid' && size === TARGET.size;
  const p50 = percentile(pass.times, 50);
  const p99 = percentile(pass.times, 99);
  return {
    'memories/key': size,
    strategy,
    vectors: strategy === 'exact' ? '-' : storage,
    queries: pass.times.length,
    'p50 ms': ms(p50),
    'p95 ms': ms(percentile(pass.times, 95)),
    'p99 ms': ms(p99),
    'mean ms': ms(pass.times.reduce((a, b) => a + b, 0) / pass.times.length),
    'target p50/p99 ms': targeted ? `≤${TARGET.p50} / ≤${TARGET.p99}` : '',
    'meets target': targeted ? (p50 <= TARGET.p50 && p99 <= TARGET.p99 ? 'yes' : 'no') : '',
    'avg items': Number((pass.items / pass.times.length).toFixed(1)),
    'keyword fallbacks': pass.fallbacks,
  };
}

/** Prints retrieval latency (p50/p95/p99) per strategy at 1k/10k/100k memories for one key among ten others, plus query-embedding time; never asserts. */
export async function runRetrievalBench(): Promise<void> {
  const model = benchStaticModel();
  const corpus = new Corpus(model);
  const env = testEnv({ MEMORY_STATIC_MODEL: model.folder, QUEUE_PREFIX: testPrefix('bench-retrieval'), MEMORY_EMBEDDING_CACHE_MAX: '5000' });
  const ctx = buildApiContext(env, silentLog());
  try {
    if (!ctx.db.vecLoaded) {
      console.log('sqlite-vec is not available: semantic and hybrid would only measure the keyword fallback; skipping');
      return;
    }
    const settings = useStaticSource(ctx);
    // A writer without the api's embed-on-write hook: seeding must not queue 110k embed jobs.
    const writer = new MemoryService(ctx.db.db, new MemoryReadCache(100, 60_000));
    const probe = await ctx.embedding.embedOne('engram dimension probe', settings);
    const dim = probe.resolution.dimensions!;
    const signature = ctx.vectors.signatureFor(probe.resolution)!;
    ctx.vectors.rebuild(signature, dim);

    const memRng = rng(42);
    const setup: Row[] = [];
    const note = (step: string, rows: number, t0: number) => {
      const s = (performance.now() - t0) / 1000;
      setup.push({ step, rows, seconds: Number(s.toFixed(1)), 'rows/s': Math.round(rows / s) });
    };
    let t0 = performance.now();
    for (let k = 0; k < OTHER_KEYS; k++) seedMemories(writer, `bench-other-${k}`, OTHER_ROWS_PER_KEY, () => corpus.memory(memRng));
    note(`seed ${OTHER_KEYS} other keys`, OTHER_KEYS * OTHER_ROWS_PER_KEY, t0);

    const queries = corpus.queries(QUERY_COUNT, 7);
    const rows: Row[] = [];
    const tiers: Row[] = [];
    let have = 0;
    for (const size of SIZES) {
      t0 = performance.now();
      seedMemories(writer, MAIN_KEY, size - have, () => corpus.memory(memRng));
      note(`seed ${MAIN_KEY} to ${size}`, size - have, t0);
      have = size;
      t0 = performance.now();
      note('embed + store vectors (float32)', await embedPending(ctx.embedding, ctx.vectors, settings, signature, dim), t0);

      for (const strategy of STRATEGIES) {
        // Each user message is new text: measure with the query not in the embedding cache.
        ctx.embedding.clearCache();
        rows.push(row(size, strategy, 'float32', await runQueries(ctx.retrieval, strategy, queries)));
      }
      tiers.push(await tierBreakdown(ctx, settings, signature, size, queries));

      if (size === TARGET.size) {
        // int8: same rows, an index built for the int8 signature, read by a service whose store asks for int8.
        const int8 = new SqliteVecStore(ctx.db.db, { vecLoaded: true, quantization: 'int8' });
        const sig8 = int8.signatureFor(probe.resolution)!;
        int8.rebuild(sig8, dim);
        t0 = performance.now();
        note('embed + store vectors (int8)', await embedPending(ctx.embedding, int8, settings, sig8, dim), t0);
        ctx.embedding.clearCache();
        rows.push(row(size, 'hybrid', 'int8', await runQueries(new RetrievalService({ ...retrievalDeps(ctx), vectors: int8 }), 'hybrid', queries)));
        ctx.vectors.rebuild(signature, dim);
        t0 = performance.now();
        note('re-embed after switching back to float32', await embedPending(ctx.embedding, ctx.vectors, settings, signature, dim), t0);
      }
    }

    ctx.embedding.clearCache();
    const uncached: number[] = [];
    const cached: number[] = [];
    for (const q of queries) uncached.push((await ctx.embedding.embedOne(q, settings)).latencyMs);
    for (const q of queries) cached.push((await ctx.embedding.embedOne(q, settings)).latencyMs);
    const embedRows = [
      ['uncached', uncached],
      ['cached', cached],
    ].map(([label, xs]) => {
      const t = (xs as number[]).sort((a, b) => a - b);
      return { 'query embedding': label as string, queries: t.length, 'p50 ms': Number(percentile(t, 50).toFixed(3)), 'p99 ms': Number(percentile(t, 99).toFixed(3)) };
    });

    console.log(`Retrieval bench: model ${model.label}, signature ${signature}, ${os.cpus().length} CPUs, ${OTHER_KEYS} other keys × ${OTHER_ROWS_PER_KEY} rows`);
    console.table(setup);
    console.log(
      `ctx.retrieval.retrieve(key, {strategy, maxTokens: 2000, retentionDays: 30}, {preview: true}) in-process, ${queries.length} distinct template queries per row, ` +
        'query embedding uncached (cache cleared before each row); exact = keyword candidates newest first. Target: hybrid p50 ≤ 10 ms, p99 ≤ 25 ms at 10k memories/key.',
    );
    console.table(rows);
    console.log('Each tier alone (SqliteVecStore.knn; RetrievalRepository.fts with bm25 ORDER BY, all filters), same queries:');
    console.table(tiers);
    console.log('Query embedding alone (EmbeddingService.embedOne, static source), included in the semantic/hybrid figures above:');
    console.table(embedRows);
  } finally {
    await closeBenchContext(ctx, env);
  }
}

if (require.main === module) {
  runRetrievalBench().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
