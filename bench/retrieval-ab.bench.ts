/**
 * Same-process A/B of retrieval latency: this build's RetrievalService against another build's
 * (e.g. main's, compiled into a temp folder), over one database, alternating query by query, so a
 * busy shared machine slows both alike. Whole `retrieval` runs moved 2–3× between identical runs
 * on a loaded 2-core machine; this is how issue #10's "p50 at 10k/key not >20% slower" was checked.
 *
 *   git archive <rev> | tar -x -C /tmp/before && ln -s $PWD/node_modules /tmp/before/ \
 *     && (cd /tmp/before && npx tsc -p tsconfig.build.json)
 *   npm run bench -- retrieval-ab --before=/tmp/before/dist [--size=10000] [--strategy=hybrid] [--reps=3]
 */
import path from 'node:path';
import { buildApiContext } from '../src/api';
import { MemoryReadCache } from '../src/memory/read-cache';
import { MemoryService } from '../src/memory/memory.service';
import { RetrievalService, type RetrievalDeps } from '../src/memory/retrieval.service';
import type { RetrievalStrategy, RetrieveOptions, Retriever } from '../src/memory/retrieval.types';
import { silentLog, testEnv, testPrefix } from '../test/helpers/env';
import { benchStaticModel } from './build-wink-model';
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
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const Old = (require(path.resolve(before, 'src/memory/retrieval.service.js')) as { RetrievalService: new (d: RetrievalDeps) => Retriever }).RetrievalService;

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
    for (let k = 0; k < 10; k++) seedMemories(writer, `bench-other-${k}`, 1_000, () => corpus.memory(r));
    seedMemories(writer, 'bench-main', size, () => corpus.memory(r));
    await embedPending(ctx.embedding, ctx.vectors, settings, signature, probe.resolution.dimensions!);
    const deps = retrievalDeps(ctx);
    const services: [string, Retriever, Partial<RetrieveOptions>][] = [
      ['before', new Old(deps), {}],
      ['this build', new RetrievalService(deps), {}],
      ['this build, rrf', new RetrievalService(deps), { fusion: { method: 'rrf' } }],
    ];
    const times = services.map(() => [] as number[]);
    const queries = corpus.queries(200, 7);
    for (let rep = 0; rep < reps; rep++) {
      for (let i = 0; i < queries.length; i++) {
        const order = (i + rep) % 2 ? [0, 1, 2] : [2, 1, 0];
        for (const s of order) {
          ctx.embedding.clearCache();
          const t0 = performance.now();
          await services[s][1].retrieve('bench-main', { query: queries[i], strategy, maxTokens: 2000, retentionDays: 30, ...services[s][2] }, { preview: true });
          times[s].push(performance.now() - t0);
        }
      }
    }
    console.log(`${strategy}, ${size} memories/key + 10 other keys × 1000, ${queries.length} queries × ${reps}, services alternating per query, query embedding uncached; before = ${before}`);
    console.table(
      services.map(([name], s) => {
        const t = times[s].sort((a, b) => a - b);
        return { service: name, queries: t.length, 'p50 ms': ms(percentile(t, 50)), 'p95 ms': ms(percentile(t, 95)), 'p99 ms': ms(percentile(t, 99)) };
      }),
    );
  } finally {
    await closeBenchContext(ctx, env);
  }
}
