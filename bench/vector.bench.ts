import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openDatabase } from '../src/db/connection';
import { migrate } from '../src/db/migrate';
import { createLogger } from '../src/logger';
import { MemoryReadCache } from '../src/memory/read-cache';
import { MemoryService } from '../src/memory/memory.service';
import { normalise, SqliteVecStore } from '../src/vector/sqlite-vec.store';
import type { VecQuantization } from '../src/vector/types';
import { mulberry32 as rng } from '../test/helpers/prng';

const SMALL = 10_000;
const LARGE = 100_000;
/** Rows of other tenants sharing the table, so the partition key has something to skip. */
const OTHER_KEYS = 4;
const OTHER_ROWS_PER_KEY = 5_000;
const K = 20;
const QUERIES: Record<number, number> = { [SMALL]: 300, [LARGE]: 100 };
const DIMS = [256, 384];
const QUANTS: VecQuantization[] = ['none', 'int8'];

interface Owned {
  rowId: number;
  apiKeyId: string;
  contentHash: string;
}


function randomUnit(dim: number, r: () => number): Float32Array {
  const v = new Float32Array(dim);
  // Gaussian components (Box-Muller) give directions uniform on the sphere.
  for (let i = 0; i < dim; i += 2) {
    const m = Math.sqrt(-2 * Math.log(1 - r()));
    const a = 2 * Math.PI * r();
    v[i] = m * Math.cos(a);
    if (i + 1 < dim) v[i + 1] = m * Math.sin(a);
  }
  return normalise(v)!;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

const ms = (x: number) => Number(x.toFixed(2));

/** Creates the tenants' memories through MemoryService (the real write path) and returns their keys. */
function seedMemories(memory: MemoryService): Owned[] {
  const tenants: [string, number][] = [
    ['bench-10k', SMALL],
    ['bench-100k', LARGE],
    ...Array.from({ length: OTHER_KEYS }, (_, i): [string, number] => [`bench-other-${i}`, OTHER_ROWS_PER_KEY]),
  ];
  const out: Owned[] = [];
  for (const [apiKeyId, n] of tenants) {
    for (let start = 0; start < n; start += 10_000) {
      const inputs = Array.from({ length: Math.min(10_000, n - start) }, (_, i) => ({
        apiKeyId,
        type: 'factual' as const,
        content: `benchmark memory ${start + i} of ${apiKeyId}`,
      }));
      for (const c of memory.upsertMany(inputs, { source: 'import' }, 'import')) {
        out.push({ rowId: c.memory.rowId, apiKeyId, contentHash: c.memory.contentHash });
      }
    }
  }
  return out;
}

/** Prints sqlite-vec KNN latency (p50/p99) per tenant size, storage type and dimension; never asserts. */
export async function runVectorBench(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'engram-vector-bench-'));
  const log = createLogger('silent', 'bench');
  const handle = openDatabase({ dataDir: dir, busyTimeoutMs: 5000, disableVec: false, log });
  try {
    if (!handle.vecLoaded) {
      console.log(`sqlite-vec is not available (${handle.vecError}); nothing to measure`);
      return;
    }
    migrate(handle.db, log);
    const memory = new MemoryService(handle.db, new MemoryReadCache(100, 60_000));
    let t0 = performance.now();
    const owned = seedMemories(memory);
    console.log(`seeded ${owned.length} memories in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    const rows: Record<string, string | number>[] = [];
    const nowIso = new Date().toISOString();
    for (const dim of DIMS) {
      // Float32 top-k per (tenant, query) for the int8 recall column.
      const floatTopK = new Map<string, number[][]>();
      for (const quantization of QUANTS) {
        const store = new SqliteVecStore(handle.db, { vecLoaded: true, quantization });
        const signature = store.signatureFor({ source: 'bench', model: 'random-unit', dimensions: dim })!;
        store.rebuild(signature, dim);
        const r = rng(dim);
        t0 = performance.now();
        for (let i = 0; i < owned.length; i += 5_000) {
          store.upsertMany(owned.slice(i, i + 5_000).map((o) => ({ ...o, vector: randomUnit(dim, r) })));
        }
        const insertPerSec = Math.round(owned.length / ((performance.now() - t0) / 1000));
        const stats = store.stats();

        for (const [apiKeyId, size] of [['bench-10k', SMALL], ['bench-100k', LARGE]] as const) {
          const qr = rng(dim * 1000 + size);
          const queries = Array.from({ length: QUERIES[size]! }, () => randomUnit(dim, qr));
          for (const q of queries.slice(0, 3)) store.knn(apiKeyId, q, K, { nowIso });
          const times: number[] = [];
          const results: number[][] = [];
          for (const q of queries) {
            const start = performance.now();
            const hits = store.knn(apiKeyId, q, K, { nowIso });
            times.push(performance.now() - start);
            results.push(hits.map((h) => h.rowId));
          }
          let recall: number | string = '(baseline)';
          if (quantization === 'none') floatTopK.set(apiKeyId, results);
          else {
            const base = floatTopK.get(apiKeyId)!;
            let found = 0;
            results.forEach((ids, i) => {
              const truth = new Set(base[i]);
              found += ids.filter((id) => truth.has(id)).length;
            });
            recall = Number((found / (K * results.length)).toFixed(3));
          }
          times.sort((a, b) => a - b);
          rows.push({
            dims: dim,
            storage: quantization === 'int8' ? 'int8' : 'float32',
            'vectors/key': size,
            'table rows': stats.rowCount,
            queries: queries.length,
            k: K,
            'p50 ms': ms(percentile(times, 50)),
            'p99 ms': ms(percentile(times, 99)),
            'mean ms': ms(times.reduce((a, b) => a + b, 0) / times.length),
            [`recall@${K} vs float32`]: recall,
            'upserts/s': insertPerSec,
          });
        }
        console.log(`done: ${dim} dims ${quantization}`);
      }
    }
    console.log(`sqlite-vec KNN via SqliteVecStore.knn (partitioned by key, joined to memories), random unit vectors, ${os.cpus().length} CPUs`);
    console.table(rows);
  } finally {
    handle.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  runVectorBench().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
