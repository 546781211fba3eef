import { loadEnv } from '../src/config/env';
import { createLogger } from '../src/logger';
import { QdrantSyncService } from '../src/memory/qdrant-sync.service';
import { openStorage } from '../src/services';
import { normalise } from '../src/vector/sqlite-vec.store';
import { startFakeQdrant } from '../test/helpers/fake-qdrant';
import { tempDir } from '../test/helpers/env';
import { mulberry32 as rng } from '../test/helpers/prng';

const ROWS = 5000;
const DIM = 256;
const QUERIES = 200;
const K = 20;

function randomUnit(dim: number, r: () => number): Float32Array {
  const v = new Float32Array(dim);
  for (let i = 0; i < dim; i++) v[i] = Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
  return normalise(v)!;
}

function p(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((q / 100) * sorted.length) - 1))]!;
}
const r2 = (x: number) => Number(x.toFixed(2));

/**
 * Qdrant tier figures against the fake Qdrant (schema validation off, so the figures are the
 * client + store overhead plus the fake's brute-force scan, which is reported separately): search
 * p50/p95 through QdrantVectorStore next to sqlite-vec KNN on the same rows, and backfill rows/s next
 * to writing the same vectors into sqlite-vec.
 */
export async function runQdrantBench(): Promise<void> {
  const fake = await startFakeQdrant({ validate: false });
  const env = loadEnv({ NODE_ENV: 'production', DATA_DIR: tempDir('qdrant-bench'), LOG_LEVEL: 'silent', QDRANT_SEARCH_TIMEOUT_MS: '10000' });
  const log = createLogger('silent', 'bench');
  const s = openStorage(env, log);
  try {
    s.qdrantSettings.update({ enabled: true, host: fake.url });
    const sig = s.vectors.signatureFor({ source: 'static', model: 'bench', dimensions: DIM })!;
    s.vectors.rebuild(sig, DIM);
    const r = rng(42);
    const inputs = Array.from({ length: ROWS }, (_, i) => ({
      apiKeyId: i % 5 === 0 ? 'other' : 'bench',
      type: 'factual' as const,
      key: `k${i}`,
      content: `bench memory ${i}`,
      metadata: {},
    }));
    const changes = s.memory.upsertMany(inputs, { source: 'api' });
    const rows = changes.map((c) => ({ rowId: c.memory.rowId, apiKeyId: c.memory.apiKeyId, vector: randomUnit(DIM, r), contentHash: c.memory.contentHash }));

    // Baseline write: the same vectors into sqlite-vec.
    let t = performance.now();
    s.vectors.upsertMany(rows, sig);
    const sqliteWriteS = (performance.now() - t) / 1000;

    const sync = new QdrantSyncService({ qdrant: s.qdrant, qdrantSettings: s.qdrantSettings, vectors: s.vectors, queues: undefined as never, log });
    const hooks = { progress: async () => undefined, checkpoint: async () => undefined, saveCursor: async () => undefined };
    t = performance.now();
    const res = await sync.backfill({ reason: 'api', batchSize: 256, afterRowId: 0, done: 0, failed: 0, signature: null }, hooks);
    const backfillS = (performance.now() - t) / 1000;
    if (res.done !== ROWS) throw new Error(`backfill wrote ${res.done} of ${ROWS}`);

    const queries = Array.from({ length: QUERIES }, () => randomUnit(DIM, r));
    const now = new Date().toISOString();
    // Warm both paths once.
    await s.qdrant.search({ apiKeyId: 'bench', vector: queries[0]!, k: K, filter: { nowIso: now } });
    s.vectors.knn('bench', queries[0]!, K, { nowIso: now });

    const qdrantMs: number[] = [];
    const serverMs: number[] = [];
    for (const q of queries) {
      const before = fake.requests.length;
      t = performance.now();
      const hits = await s.qdrant.search({ apiKeyId: 'bench', vector: q, k: K, filter: { nowIso: now } });
      qdrantMs.push(performance.now() - t);
      if (hits.length !== K) throw new Error(`qdrant returned ${hits.length} hits`);
      serverMs.push(fake.requests.slice(before).reduce((a, x) => a + (x.serverMs ?? 0), 0));
    }
    const sqliteMs: number[] = [];
    for (const q of queries) {
      t = performance.now();
      s.vectors.knn('bench', q, K, { nowIso: now });
      sqliteMs.push(performance.now() - t);
    }
    const overhead = qdrantMs.map((x, i) => x - serverMs[i]!);
    for (const a of [qdrantMs, serverMs, sqliteMs, overhead]) a.sort((x, y) => x - y);
    console.log(`${ROWS} rows × ${DIM} dims (${ROWS * 0.8} of the searched tenant), k=${K}, ${QUERIES} queries\n`);
    console.table([
      { path: 'QdrantVectorStore.search → fake (total)', p50_ms: r2(p(qdrantMs, 50)), p95_ms: r2(p(qdrantMs, 95)) },
      { path: '  of which the fake computing (brute force in JS)', p50_ms: r2(p(serverMs, 50)), p95_ms: r2(p(serverMs, 95)) },
      { path: '  = client + HTTP + SQLite re-check (our overhead)', p50_ms: r2(p(overhead, 50)), p95_ms: r2(p(overhead, 95)) },
      { path: 'baseline: sqlite-vec KNN, same rows', p50_ms: r2(p(sqliteMs, 50)), p95_ms: r2(p(sqliteMs, 95)) },
    ]);
    console.table([
      { write: 'qdrant-backfill (pages of 256, sqlite-vec read + upsert over HTTP)', rows: ROWS, seconds: r2(backfillS), rows_per_s: Math.round(ROWS / backfillS) },
      { write: 'baseline: sqlite-vec upsertMany of the same vectors', rows: ROWS, seconds: r2(sqliteWriteS), rows_per_s: Math.round(ROWS / sqliteWriteS) },
    ]);
  } finally {
    s.db.close();
    await fake.close();
  }
}
