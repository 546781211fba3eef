import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadEnv } from '../src/config/env';
import { EmbeddingService } from '../src/embedding/embedding.service';
import type { EmbeddingSettings } from '../src/embedding/resolve';
import { startFakeEmbeddingsServer } from '../test/helpers/fake-embeddings-server';
import { FIXTURE_TOPICS, shareTypedArraysWithNative, topicModelSpec, writeModel2VecFolder, writeTransformersModel } from '../test/helpers/model-fixtures';

const TEXTS = 2000;
const DIM = 256;
const FILLER = 20_000;

const base: EmbeddingSettings = {
  embeddingSource: 'auto',
  embeddingProviderModel: null,
  staticEnabled: false,
  transformersEnabled: false,
  customBaseUrl: null,
  customModelId: null,
};

/** Distinct 8–15-word sentences over the fixture vocabulary, so nothing hits the cache on the first pass. */
function sentences(n: number): string[] {
  const words = [...Object.values(FIXTURE_TOPICS).flat(), 'the', 'my', 'a', 'likes', 'is', 'and'];
  let seed = 12345;
  const rnd = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
  return Array.from({ length: n }, (_, i) => {
    const len = 8 + Math.floor(rnd() * 8);
    const picked = Array.from({ length: len }, () => (rnd() < 0.3 ? `filler${Math.floor(rnd() * FILLER)}` : words[Math.floor(rnd() * words.length)]));
    return `${picked.join(' ')} ${i}`;
  });
}

interface Row {
  source: string;
  model: string;
  dim: number | null;
  texts: number;
  'first call ms (load)': number;
  'embeddings/s (uncached)': number;
  'embeddings/s (cached)': number;
}

async function measure(label: string, svc: EmbeddingService, settings: EmbeddingSettings, texts: string[]): Promise<Row> {
  const t0 = performance.now();
  await svc.embedOne('warm up the model', settings);
  const load = performance.now() - t0;
  const t1 = performance.now();
  const cold = await svc.embedMany(texts, settings);
  const uncached = performance.now() - t1;
  const t2 = performance.now();
  const warm = await svc.embedMany(texts, settings);
  const cached = performance.now() - t2;
  if (warm.cached !== texts.length) throw new Error(`${label}: expected every text cached on the second pass, got ${warm.cached}`);
  return {
    source: label,
    model: path.basename(cold.resolution.model ?? ''),
    dim: cold.resolution.dimensions,
    texts: texts.length,
    'first call ms (load)': Math.round(load),
    'embeddings/s (uncached)': Math.round(texts.length / (uncached / 1000)),
    'embeddings/s (cached)': Math.round(texts.length / (cached / 1000)),
  };
}

/** Prints embeddings/second for each source on the fixture models (and a loopback fake remote); never asserts. */
export async function runEmbeddingBench(): Promise<Row[]> {
  shareTypedArraysWithNative();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'engram-embedding-bench-'));
  const server = await startFakeEmbeddingsServer({ dim: DIM });
  try {
    const spec = topicModelSpec(DIM, FILLER);
    const m2v = writeModel2VecFolder(path.join(dir, 'model2vec'), spec);
    const tf = writeTransformersModel(path.join(dir, 'transformers'), spec);
    const env = loadEnv({
      NODE_ENV: 'production',
      DATA_DIR: path.join(dir, 'data'),
      LOG_LEVEL: 'silent',
      MEMORY_STATIC_MODEL: m2v,
      MEMORY_TRANSFORMERS_MODEL: tf,
      OLLAMA_BASE_URL: server.baseUrl.replace(/\/v1$/, ''),
      MEMORY_EMBEDDING_CACHE_MAX: String(TEXTS * 2),
      MEMORY_EMBEDDING_BATCH_SIZE: '64',
    });
    const texts = sentences(TEXTS);
    const rows: Row[] = [];
    for (const [label, settings] of [
      ['static', { ...base, embeddingSource: 'static', staticEnabled: true }],
      ['transformers', { ...base, embeddingSource: 'transformers', transformersEnabled: true }],
      ['remote (loopback fake)', { ...base, embeddingSource: 'remote', embeddingProviderModel: 'ollama/nomic-embed-text' }],
    ] as Array<[string, EmbeddingSettings]>) {
      const svc = new EmbeddingService(env);
      try {
        rows.push(await measure(label, svc, settings, texts));
      } finally {
        await svc.close();
      }
    }
    console.log(`Embedding throughput: ${TEXTS} distinct texts, fixture vocabulary ${spec.vocab.length + 4} tokens × ${DIM} dims, batch 64`);
    console.table(rows);
    console.log('transformers here is a one-op Gather graph: the figure bounds tokenizer + runtime overhead, not a real encoder.');
    return rows;
  } finally {
    await server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  runEmbeddingBench().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
