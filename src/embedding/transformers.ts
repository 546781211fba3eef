import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Env } from '../config/env';
import { EmbeddingError, clipText, l2Normalize, MAX_INPUT_CHARS, type Embedder } from './types';

export type TransformersEnv = Pick<
  Env,
  'MEMORY_TRANSFORMERS_MODEL' | 'MEMORY_TRANSFORMERS_CACHE_DIR' | 'DATA_DIR' | 'HF_HUB_ENDPOINT' | 'MEMORY_EMBEDDING_BATCH_SIZE'
>;

/** Where a transformers.js model comes from: a local folder (offline) or a hub id cached under a folder. */
export type TransformersLocation = { kind: 'local'; folder: string } | { kind: 'hub'; id: string; cacheDir: string };

/** Reads MEMORY_TRANSFORMERS_MODEL: an existing folder (absolute or relative) or a hub id. */
export function transformersModelLocation(env: TransformersEnv): TransformersLocation {
  const model = env.MEMORY_TRANSFORMERS_MODEL.trim();
  const expanded = model.startsWith('~') ? path.join(os.homedir(), model.slice(1)) : model;
  const local = path.resolve(expanded);
  let isDir = false;
  try {
    isDir = fs.statSync(local).isDirectory();
  } catch {
    isDir = false;
  }
  if (isDir || path.isAbsolute(expanded) || model.startsWith('.')) return { kind: 'local', folder: local };
  return { kind: 'hub', id: model, cacheDir: path.resolve(env.MEMORY_TRANSFORMERS_CACHE_DIR ?? path.join(env.DATA_DIR, 'models', 'transformers')) };
}

/** The slice of a transformers.js Tensor this module reads. */
interface TensorLike {
  dims: number[];
  data: ArrayLike<number>;
}
type FeatureExtractor = (texts: string[], opts: { pooling: 'mean'; normalize: boolean }) => Promise<TensorLike>;
type TransformersModule = typeof import('@huggingface/transformers');

/** Splits a pipeline output into one normalised row per input: [n, hidden] as is, [n, seq, hidden] mean-pooled, [hidden] for one. */
export function tensorRows(t: TensorLike, count: number): Float32Array[] {
  const d = t.dims;
  const data = t.data;
  const rows: Float32Array[] = [];
  if (d.length === 3) {
    const [n, seq, hidden] = d;
    for (let i = 0; i < n; i++) {
      const v = new Float32Array(hidden);
      for (let s = 0; s < seq; s++) for (let j = 0; j < hidden; j++) v[j] += data[(i * seq + s) * hidden + j];
      rows.push(l2Normalize(v));
    }
  } else if (d.length === 2) {
    const [n, hidden] = d;
    for (let i = 0; i < n; i++) rows.push(l2Normalize(Float32Array.from({ length: hidden }, (_, j) => data[i * hidden + j])));
  } else if (d.length === 1 && count === 1) {
    rows.push(l2Normalize(Float32Array.from(data)));
  }
  if (rows.length !== count) throw new Error(`pipeline returned ${rows.length} vectors for ${count} inputs`);
  return rows;
}

/** One pipeline per model location and process; a failed load is forgotten so the next call retries. */
const pipelines = new Map<string, Promise<FeatureExtractor>>();
/** transformers.js keeps its settings in one global object: loads run one at a time so they never see each other's. */
let loadChain: Promise<unknown> = Promise.resolve();

function loadPipeline(loc: TransformersLocation, env: TransformersEnv): Promise<FeatureExtractor> {
  const key = loc.kind === 'local' ? `local:${loc.folder}` : `hub:${loc.id}:${loc.cacheDir}`;
  let p = pipelines.get(key);
  if (!p) {
    const run = async (): Promise<FeatureExtractor> => {
      // Required lazily: onnxruntime and sharp load only when this source is used.
      const t = require('@huggingface/transformers') as TransformersModule;
      if (loc.kind === 'local') {
        t.env.allowLocalModels = true;
        t.env.allowRemoteModels = false;
        t.env.useFSCache = false;
        // An absolute folder is not a hub id, so transformers.js reads it as is.
        return (await t.pipeline('feature-extraction', loc.folder)) as unknown as FeatureExtractor;
      }
      fs.mkdirSync(loc.cacheDir, { recursive: true });
      t.env.allowRemoteModels = true;
      t.env.useFSCache = true;
      t.env.cacheDir = loc.cacheDir;
      t.env.remoteHost = `${env.HF_HUB_ENDPOINT.replace(/\/+$/, '')}/`;
      return (await t.pipeline('feature-extraction', loc.id, { cache_dir: loc.cacheDir })) as unknown as FeatureExtractor;
    };
    const next = loadChain.then(run, run);
    loadChain = next.catch(() => undefined);
    p = next;
    pipelines.set(key, p);
    p.catch(() => {
      if (pipelines.get(key) === p) pipelines.delete(key);
    });
  }
  return p;
}

/** Forgets loaded pipelines (tests). */
export function forgetTransformersPipelines(): void {
  pipelines.clear();
}

/** Sentence embeddings from a transformers.js feature-extraction pipeline (mean pooling, normalised). */
export class TransformersEmbedder implements Embedder {
  readonly source = 'transformers' as const;
  readonly model: string;
  readonly identity: string;
  private readonly loc: TransformersLocation;

  constructor(private readonly env: TransformersEnv) {
    this.model = env.MEMORY_TRANSFORMERS_MODEL;
    this.loc = transformersModelLocation(env);
    this.identity = this.loc.kind === 'local' ? this.loc.folder : this.loc.id;
  }

  async embed(texts: string[], signal?: AbortSignal): Promise<Float32Array[]> {
    let extract: FeatureExtractor;
    try {
      extract = await loadPipeline(this.loc, this.env);
    } catch (err) {
      throw new EmbeddingError('model_load_failed', 'transformers', this.model, `transformers model could not be loaded: ${(err as Error).message}`);
    }
    const out: Float32Array[] = [];
    // Batches bound the padded [batch, seq, hidden] tensor the model allocates.
    const size = Math.max(1, Math.min(this.env.MEMORY_EMBEDDING_BATCH_SIZE, 32));
    for (let i = 0; i < texts.length; i += size) {
      if (signal?.aborted) throw new EmbeddingError('timeout', 'transformers', this.model, 'transformers embedding was aborted');
      const batch = texts.slice(i, i + size).map((t) => clipText(t, MAX_INPUT_CHARS));
      try {
        out.push(...tensorRows(await extract(batch, { pooling: 'mean', normalize: true }), batch.length));
      } catch (err) {
        throw new EmbeddingError('request_failed', 'transformers', this.model, `transformers inference failed: ${(err as Error).message}`);
      }
    }
    return out;
  }
}
