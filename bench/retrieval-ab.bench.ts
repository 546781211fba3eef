/**
 * Same-process A/B of retrieval latency: this build's RetrievalService against another build's
 * (e.g. main's, compiled into a temp folder), over one database, alternating query by query, so a
 * busy shared machine slows both alike. Whole `retrieval` runs moved 2–3× between identical runs
 * on a loaded 2-core machine; this is how issue #10's "p50 at 10k/key not >20% slower" was checked.
 *
 *   git archive <rev> | tar -x -C /tmp/before && ln -s $PWD/node_modules /tmp/before/ \
 *     && (cd /tmp/before && npx tsc -p tsconfig.build.json)
 *   npm run bench -- retrieval-ab --before=/tmp/before/dist [--size=10000] [--strategy=hybrid] [--reps=3] [--text=chat] [--content-only] [--keyword-only]
 *
 * `--content-only`: retrieve as the chat's injection does (`contentOnly`: no re-read of the access counts).
 * The CPU column is process.cpuUsage() over each retrieve (its awaits included, so other work of the
 * process in between counts too; nothing else runs here).
 */
import path from 'node:path';
import { buildApiContext } from '../src/api';
import { MemoryReadCache } from '../src/memory/read-cache';
import { MemoryService } from '../src/memory/memory.service';
import { RetrievalService, type RetrievalDeps } from '../src/memory/retrieval.service';
import type { RetrievalStrategy, RetrieveOptions, Retriever } from '../src/memory/retrieval.types';
import { SqliteVecStore } from '../src/vector/sqlite-vec.store';
import { silentLog, testEnv, testPrefix } from '../test/helpers/env';
import { benchStaticModel } from './build-wink-model';
import { GENERATED_SETS, generateSet } from './quality/generator';
import { closeBenchContext, Corpus, embedPending, ms, percentile, retrievalDeps, rng, seedMemories, useStaticSource } from './retrieval.bench';

const flag = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);

export async function runRetrievalAbBench(): Promise<void> {
  const before = flag('before');
  if (!before) {
    console.log('skipped: pass --before=<another build\'s dist folder> (see bench/retrieval-ab.bench.ts)');
    return;
  }
  const size = Number(flag('size') ?? 10_000);
  const strategy = (flag('strategy') ?? 'hybrid') as RetrievalStrategy;
  const reps = Number(flag('reps') ?? 3);
  const contentOnly = process.argv.includes('--content-only');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const Old = (require(path.resolve(before, 'src/memory/retrieval.service.js')) as { RetrievalService: new (d: RetrievalDeps) => Retriever }).RetrievalService;
  // The vector tier of that build too (its KNN strategy is part of what is compared), over the same database, configured
  // as the api builds its own (services.ts): without the scan cache it ranked by vec0, with other scores than this build.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const OldStore = (require(path.resolve(before, 'src/vector/sqlite-vec.store.js')) as { SqliteVecStore: typeof SqliteVecStore }).SqliteVecStore;

  const model = benchStaticModel();
  const corpus = new Corpus(model);
  const env = testEnv({ MEMORY_STATIC_MODEL: model.folder, QUEUE_PREFIX: testPrefix('bench-retrieval-ab'), MEMORY_EMBEDDING_CACHE_MAX: '5000' });
  const ctx = buildApiContext(env, silentLog());
  try {
    const settings = useStaticSource(ctx);
    const writer = new MemoryService(ctx.db.db, new MemoryReadCache(100, 60_000));
    const probe = await ctx.embedding.embedOne('engram dimension probe', settings);
    const signature = ctx.vectors.signatureFor(probe.resolution)!;
    ctx.vectors.rebuild(signature, probe.resolution.dimensions!);
    const r = rng(42);
    // --text=chat: the key's memories are generated chat turns (`Speaker: text`, the quality bench's
    // generator with as many chats as it takes) and the queries are that set's questions; the
    // template sentences flatter the keyword tier (few words, no small talk, no shared names).
    const chat = flag('text') === 'chat' ? generateSet({ ...GENERATED_SETS[0]!, name: 'ab-chat', chats: Math.ceil(size / 330) }) : null;
    for (let k = 0; k < 10; k++) seedMemories(writer, `bench-other-${k}`, 1_000, () => corpus.memory(r));
    seedMemories(writer, 'bench-main', size, chat ? (i) => chat.turns[i % chat.turns.length]!.content : () => corpus.memory(r));
    await embedPending(ctx.embedding, ctx.vectors, settings, signature, probe.resolution.dimensions!);
    // --keyword-only: no query embedding (the static model turned off after the index is built), so hybrid
    // falls back to the keyword tier as the embedded default (no model) serves every chat.
    if (process.argv.includes('--keyword-only')) ctx.settings.updateMemory({ staticEnabled: false });
    const deps = retrievalDeps(ctx);
    const services: [string, Retriever, Partial<RetrieveOptions>][] = [
      // With the same in-memory scan budget as this build's store (without it, that build's KNN was vec0's).
      ['before', new Old({ ...deps, vectors: new OldStore(ctx.db.db, { vecLoaded: ctx.db.vecLoaded, quantization: ctx.env.MEMORY_VEC_QUANTIZATION, scanCacheBytes: ctx.env.MEMORY_VEC_SCAN_CACHE_MB * 1_048_576 }) }), {}],
      ['this build', new RetrievalService(deps), {}],
      ...(flag('rrf') ? [['this build, rrf', new RetrievalService(deps), { fusion: { method: 'rrf' } }] as [string, Retriever, Partial<RetrieveOptions>]] : []),
    ];
    const times = services.map(() => [] as number[]);
    const cpu = services.map(() => 0);
    const itemCount = services.map(() => 0);
    const fallback = services.map(() => new Map<string, number>());
    const queries = chat ? [...new Set(chat.questions.map((q) => q.question))].slice(0, 200) : corpus.queries(200, 7);
    let same = 0;
    let sameScores = 0;
    let sameTokens = 0;
    for (let rep = 0; rep < reps; rep++) {
      for (let i = 0; i < queries.length; i++) {
        const order = services.map((_, s) => s);
        if ((i + rep) % 2) order.reverse();
        const ids: string[][] = [];
        const scores: string[] = [];
        const tokens: string[] = [];
        for (const s of order) {
          ctx.embedding.clearCache();
          const c0 = process.cpuUsage();
          const t0 = performance.now();
          const res = await services[s][1].retrieve('bench-main', { query: queries[i], strategy, maxTokens: 2000, retentionDays: 30, ...services[s][2] }, { preview: true, contentOnly });
          times[s].push(performance.now() - t0);
          const c = process.cpuUsage(c0);
          cpu[s] += c.user + c.system;
          ids[s] = res.items.map((it) => it.memory.id);
          itemCount[s] += res.items.length;
          const why = res.resolution.fallbackReason ?? 'none';
          fallback[s].set(why, (fallback[s].get(why) ?? 0) + 1);
          scores[s] = res.items.map((it) => it.score).join();
          tokens[s] = res.items.map((it) => `${it.tokens}${it.truncated ? 't' : ''}`).join();
        }
        if (ids[0]!.join() === ids[1]!.join()) same++;
        if (scores[0] === scores[1]) sameScores++;
        if (tokens[0] === tokens[1]) sameTokens++;
      }
    }
    console.log(
      `${strategy}, ${size} memories/key (${chat ? 'generated chat turns, their questions' : 'template sentences and questions'}) + 10 other keys × 1000, ` +
        `${queries.length} queries × ${reps}, services alternating per query, query embedding uncached${contentOnly ? ', contentOnly (as the chat path)' : ''}` +
        `${process.argv.includes('--keyword-only') ? ', keyword tier only (no query embedding)' : ''}; before = ${before}; ` +
        `identical item lists (ids, order) before vs this build: ${same} of ${queries.length * reps}; ` +
        `identical score lists (differing only where equal scores swap rows): ${sameScores}; identical token lists: ${sameTokens}`,
    );
    console.table(
      services.map(([name], s) => {
        const t = times[s].sort((a, b) => a - b);
        return {
          service: name,
          queries: t.length,
          'p50 ms': ms(percentile(t, 50)),
          'p95 ms': ms(percentile(t, 95)),
          'p99 ms': ms(percentile(t, 99)),
          'CPU µs/query': Math.round(cpu[s] / t.length),
          'items/query': Math.round((itemCount[s] / t.length) * 10) / 10,
          'fallback reasons': [...fallback[s]].map(([k, n]) => `${k} ×${n}`).join('; '),
        };
      }),
    );
  } finally {
    await closeBenchContext(ctx, env);
  }
}
