import { runApiRssBench } from './api-rss.bench';
import { runWinkModelCheck } from './build-wink-model';
import { runDurableExtractBench } from './durable-extract.bench';
import { runEmbeddingBench } from './embedding.bench';
import { runJobsBench } from './jobs.bench';
import { runJobTargetsBench } from './job-targets.bench';
import { runProxyBench } from './proxy.bench';
import { runProxyTargetsBench } from './proxy-targets.bench';
import { runQdrantBench } from './qdrant.bench';
import { runQualityBench } from './quality.bench';
import { runRetrievalBench } from './retrieval.bench';
import { runRetrievalAbBench } from './retrieval-ab.bench';
import { runTargetsBench } from './targets.bench';
import { runRetrievalTargetsBench } from './retrieval-targets.bench';
import { runRrfWeightBench } from './rrf-weights.bench';
import { runVectorBench } from './vector.bench';
import { runTransferBench } from './transfer.bench';
import { runLoadBench } from './load.bench';
import { runSoakBench } from './soak.bench';

interface Bench {
  name: string;
  title: string;
  run: () => Promise<unknown>;
}

/** Every bench, in the order `npm run bench` runs them. */
export const BENCHES: Bench[] = [
  { name: 'embedding', title: 'Embedding throughput per source', run: runEmbeddingBench },
  { name: 'vector', title: 'sqlite-vec KNN latency', run: runVectorBench },
  { name: 'wink-model', title: 'Static model of the retrieval benches (wink word vectors → model2vec)', run: runWinkModelCheck },
  { name: 'retrieval', title: 'Retrieval latency per strategy (1k / 10k / 100k memories per key)', run: runRetrievalBench },
  { name: 'retrieval-ab', title: 'Retrieval latency A/B against another build, same process (--before=<dist>)', run: runRetrievalAbBench },
  {
    name: 'retrieval-targets',
    title: "Issue 14's retrieval targets: each tier's cost at 1k / 10k / 100k per key beside exact KNN and plain BM25 (--scale 1m: tenant independence)",
    run: () => runRetrievalTargetsBench(process.argv.slice(2)),
  },
  { name: 'rrf-weights', title: 'RRF weights on a labelled set (MRR, recall@3)', run: runRrfWeightBench },
  { name: 'quality', title: 'Retrieval quality on labelled chat sets vs BM25 / cosine / RRF references (issue #10)', run: runQualityBench },
  { name: 'jobs', title: 'Worker throughput and repair-sweep', run: runJobsBench },
  { name: 'durable-extract', title: "The api's cost per chat of the durable extract-facts record (SQLite INSERT) beside the Redis add alone", run: runDurableExtractBench },
  { name: 'job-targets', title: 'Issue 14 job targets: 100k reindex through the job, chat → fact injectable, worker peak RSS (--before=<dist>)', run: () => runJobTargetsBench() },
  { name: 'proxy', title: 'Chat proxy added latency', run: runProxyBench },
  { name: 'proxy-targets', title: 'Issue 14 request path: proxy overhead, api CPU per chat, req/s share of upstream direct, api RSS (autocannon; --before=<dist root>, --profile=<dir>)', run: runProxyTargetsBench },
  { name: 'api-rss', title: "The api's peak RSS under proxy-targets' memory-on load, several variants in turn (--variant=label=<dist root>[:NODE_OPTIONS][|NAME=value…], --rounds)", run: () => runApiRssBench() },
  { name: 'transfer', title: 'Import (50k NDJSON rows, worker job) and export (200k rows): rows/s and peak RSS', run: runTransferBench },
  { name: 'load', title: 'Proxy and retrieve-preview under load (autocannon, 32 connections): req/s, p50/p99, errors, api RSS vs upstream direct (issue #15)', run: runLoadBench },
  { name: 'soak', title: 'Soak: mixed traffic against spawned api + worker, sampled every 10 s (--minutes=N, default 10; issue #15)', run: runSoakBench },
  { name: 'qdrant', title: 'Qdrant tier: search p50 through the store vs sqlite-vec KNN, backfill rows/s (against the fake Qdrant)', run: runQdrantBench },
  { name: 'targets', title: "Issue 14's whole target table: retrieval, request path and job figures beside their same-run baselines (--scale 1m adds the 1M-row tenant figure)", run: () => runTargetsBench() },
];

/** Runs the named benches (all when none are named) in sequence, each under a heading; figures are printed, never asserted. Arguments starting with `--` are options a bench reads itself (e.g. `quality --sets=gen-na`). */
export async function runBenches(args: string[]): Promise<number> {
  // `--scale 1m` is an option with a separate value, not a bench named 1m.
  const names = args.filter((a, i) => !a.startsWith('--') && args[i - 1] !== '--scale');
  const unknown = names.filter((n) => !BENCHES.some((b) => b.name === n));
  if (unknown.length) {
    console.error(`unknown bench(es): ${unknown.join(', ')}; choose from ${BENCHES.map((b) => b.name).join(', ')}`);
    return 2;
  }
  const selected = names.length ? BENCHES.filter((b) => names.includes(b.name)) : BENCHES;
  const summary: { bench: string; seconds: number; outcome: string }[] = [];
  for (const b of selected) {
    console.log(`\n=== ${b.name}: ${b.title} ===\n`);
    const t0 = performance.now();
    let outcome = 'ok';
    try {
      await b.run();
    } catch (err) {
      // One broken bench must not hide the others' figures.
      outcome = `failed: ${(err as Error).message?.split('\n')[0] ?? String(err)}`;
      console.error(err);
    }
    summary.push({ bench: b.name, seconds: Number(((performance.now() - t0) / 1000).toFixed(1)), outcome });
  }
  console.log('\n=== summary ===\n');
  console.table(summary);
  return summary.every((s) => s.outcome === 'ok') ? 0 : 1;
}

if (require.main === module) {
  runBenches(process.argv.slice(2)).then(
    // Exit explicitly: the run is over, and a handle some bench left open must not keep it alive.
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
