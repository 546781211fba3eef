import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Env } from '../config/env';
import { operatorPolicy, type OutboundPolicy } from '../net/url-policy';
import { downloadHubFiles, hubRepoFolderName, isHubRepoId } from './hub-download';
import { EmbeddingError, clipText, l2Normalize, MAX_INPUT_CHARS, type Embedder } from './types';

/** model2vec's own limit: tokens past this many are ignored. */
const MAX_TOKENS = 512;
/** Distinct whitespace-delimited pieces remembered per model (~100 bytes each) before the map starts over. */
const MAX_CACHED_PIECES = 200_000;

export type StaticEnv = Pick<Env, 'MEMORY_STATIC_MODEL' | 'MEMORY_STATIC_CACHE_DIR' | 'DATA_DIR' | 'HF_HUB_ENDPOINT'>;

/** Where a static model lives: a local folder, a hub repo cached in a folder, or an unusable setting. */
export type StaticLocation =
  | { kind: 'local'; folder: string }
  | { kind: 'hub'; repo: string; folder: string }
  | { kind: 'invalid'; why: string };

/** How long a folder check is trusted: resolving the source (2–3 times per retrieval) stat()ed the folder each time. */
const DIR_CHECK_TTL_MS = 1000;
const dirChecks = new Map<string, { dir: boolean; at: number }>();

function isDir(p: string): boolean {
  const now = performance.now();
  const seen = dirChecks.get(p);
  if (seen && now - seen.at < DIR_CHECK_TTL_MS) return seen.dir;
  let dir: boolean;
  try {
    dir = fs.statSync(p).isDirectory();
  } catch {
    dir = false;
  }
  if (dirChecks.size >= 64) dirChecks.clear();
  dirChecks.set(p, { dir, at: now });
  return dir;
}

/** Reads MEMORY_STATIC_MODEL: an existing folder (absolute or relative) or a hub repo id. */
export function staticModelLocation(env: StaticEnv): StaticLocation {
  const model = env.MEMORY_STATIC_MODEL.trim();
  const explicitPath = path.isAbsolute(model) || model.startsWith('.') || model.startsWith('~');
  const local = path.resolve(model.startsWith('~') ? path.join(os.homedir(), model.slice(1)) : model);
  if (isDir(local)) return { kind: 'local', folder: local };
  if (explicitPath) return { kind: 'invalid', why: 'MEMORY_STATIC_MODEL folder not found' };
  if (!isHubRepoId(model)) return { kind: 'invalid', why: 'MEMORY_STATIC_MODEL is neither a folder nor a hub repo id' };
  const root = path.resolve(env.MEMORY_STATIC_CACHE_DIR ?? path.join(env.DATA_DIR, 'models', 'static'));
  return { kind: 'hub', repo: model, folder: path.join(root, hubRepoFolderName(model)) };
}

export interface SafetensorsMatrix {
  name: string;
  rows: number;
  dim: number;
  data: Float32Array;
}

function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * 2 ** -14 * (frac / 1024);
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * 2 ** (exp - 15) * (1 + frac / 1024);
}

/** Reads the embedding matrix of a model2vec safetensors file (`embeddings`, else the first 2-D float tensor). */
export function parseSafetensors(buf: Buffer): SafetensorsMatrix {
  if (buf.length < 8) throw new Error('safetensors file is too short');
  const headerLen = Number(buf.readBigUInt64LE(0));
  if (headerLen <= 0 || 8 + headerLen > buf.length) throw new Error('safetensors header length is out of range');
  const header = JSON.parse(buf.subarray(8, 8 + headerLen).toString('utf8')) as Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] }
  >;
  const floats = ['F32', 'F16', 'BF16'];
  const entries = Object.entries(header).filter(([k, t]) => k !== '__metadata__' && t && floats.includes(t.dtype) && t.shape?.length === 2);
  const picked = entries.find(([k]) => k === 'embeddings') ?? entries[0];
  if (!picked) throw new Error('safetensors file has no 2-D float tensor');
  const [name, t] = picked;
  const [rows, dim] = t.shape;
  const width = t.dtype === 'F32' ? 4 : 2;
  const start = 8 + headerLen + t.data_offsets[0];
  const end = 8 + headerLen + t.data_offsets[1];
  if (end > buf.length || end - start !== rows * dim * width) throw new Error('safetensors tensor size does not match its shape');
  if (t.dtype === 'F32' && os.endianness() === 'LE' && (buf.byteOffset + start) % 4 === 0) {
    // A view of the file's own bytes: no copy. Each 40 MB copy cost ~1 s of page faults on the
    // bench machine, and the worker's peak RSS held the file, the copy and the matrix at once.
    return { name, rows, dim, data: new Float32Array(buf.buffer, buf.byteOffset + start, rows * dim) };
  }
  const data = new Float32Array(rows * dim);
  if (t.dtype === 'F32' && os.endianness() === 'LE') {
    // Copy through an aligned buffer: the tensor may start at any byte offset.
    data.set(new Float32Array(buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + end)));
  } else {
    for (let i = 0; i < data.length; i++) {
      const at = start + i * width;
      if (t.dtype === 'F32') data[i] = buf.readFloatLE(at);
      else if (t.dtype === 'F16') data[i] = halfToFloat(buf.readUInt16LE(at));
      else data[i] = new Float32Array(new Uint32Array([buf.readUInt16LE(at) << 16]).buffer)[0];
    }
  }
  return { name, rows, dim, data };
}

interface Tokenizer {
  encode(text: string, opts: { add_special_tokens: boolean }): number[];
  all_special_ids?: number[];
}

type TransformersModule = typeof import('@huggingface/transformers');

/** The tokenizer of a folder: tokenizer.json plus tokenizer_config.json when present (model2vec repos ship none). */
/**
 * True when encoding a text equals concatenating the encodings of its pieces between ASCII spaces,
 * tabs and line breaks: a BERT normalizer (per-character) and a BERT/whitespace pre-tokenizer (those
 * characters always split) in front of WordPiece, and no added token that spans such a character.
 * Byte-level BPE and Metaspace tokenizers fold the space into the next token, so they never qualify.
 */
export function splitsOnWhitespace(json: { normalizer?: { type?: string } | null; pre_tokenizer?: { type?: string } | null; model?: { type?: string }; added_tokens?: { content?: string }[] }): boolean {
  const normalizer = json.normalizer?.type ?? null;
  const pre = json.pre_tokenizer?.type ?? null;
  return (
    (normalizer === null || normalizer === 'BertNormalizer' || normalizer === 'Lowercase') &&
    (pre === 'BertPreTokenizer' || pre === 'Whitespace' || pre === 'WhitespaceSplit') &&
    json.model?.type === 'WordPiece' &&
    !(json.added_tokens ?? []).some((t) => /[ \t\n\r]/.test(t.content ?? ''))
  );
}

/**
 * Tokenizer classes whose transformers.js class only wraps @huggingface/tokenizers' Tokenizer: no
 * constructor of their own (M2M100, Marian, MBart, NLLB, VITS and XLM have one) and, like every
 * class, `encode` = `Tokenizer.encode(text, opts).ids`, special ids = the added tokens marked special.
 */
const PLAIN_TOKENIZER_CLASSES: ReadonlySet<string> = new Set(['PreTrainedTokenizer', 'BertTokenizer', 'DistilBertTokenizer', 'RobertaTokenizer', 'XLMRobertaTokenizer', 'MPNetTokenizer']);

type TokenizersModule = typeof import('@huggingface/tokenizers');

function loadTokenizer(folder: string): { tokenizer: Tokenizer; unkId: number | null; wordwise: boolean } {
  const json = JSON.parse(fs.readFileSync(path.join(folder, 'tokenizer.json'), 'utf8')) as Parameters<typeof splitsOnWhitespace>[0] & {
    model?: { type?: string; unk_token?: string | null; unk_id?: number | null; vocab?: unknown };
  };
  const configPath = path.join(folder, 'tokenizer_config.json');
  const config = fs.existsSync(configPath) ? (JSON.parse(fs.readFileSync(configPath, 'utf8')) as Record<string, unknown>) : {};
  // Same class choice as AutoTokenizer, without its file lookup that insists on tokenizer_config.json.
  const className = typeof config.tokenizer_class === 'string' ? config.tokenizer_class.replace(/Fast$/, '') : 'PreTrainedTokenizer';
  // Read before the vocabulary is let go below.
  const unkId = unknownId(json.model ?? {});
  let tokenizer: Tokenizer;
  if (PLAIN_TOKENIZER_CLASSES.has(className)) {
    // The library transformers.js bundles and calls for these classes, alone: the transformers bundle also
    // loads onnxruntime-node and sharp (~35 MB of the api's RSS, issue #14), which a static model never uses.
    const { Tokenizer: Inner } = require('@huggingface/tokenizers') as TokenizersModule;
    const inner = new Inner(json, config);
    dropVocabObject(json);
    const special = [...inner.get_added_tokens_decoder().values()].filter((t) => t.special).map((t) => t.id);
    tokenizer = { encode: (text, opts) => inner.encode(text, { add_special_tokens: opts.add_special_tokens }).ids, all_special_ids: special };
  } else {
    // Required lazily: the library pulls in onnxruntime, which only static/transformers users should pay for.
    const transformers = require('@huggingface/transformers') as TransformersModule;
    const exports = transformers as unknown as Record<string, unknown>;
    const Cls = (typeof exports[className] === 'function' ? exports[className] : transformers.PreTrainedTokenizer) as new (
      tokenizerJSON: unknown,
      tokenizerConfig: unknown,
    ) => Tokenizer;
    tokenizer = new Cls(json, config);
  }
  return { tokenizer, unkId, wordwise: splitsOnWhitespace(json) };
}

/** The [UNK] id of a tokenizer.json model section: its unk_id, else its unk_token's entry in a WordPiece/BPE vocabulary. */
function unknownId(model: { unk_token?: string | null; unk_id?: number | null; vocab?: unknown }): number | null {
  if (typeof model.unk_id === 'number') return model.unk_id;
  if (typeof model.unk_token === 'string' && model.vocab && typeof model.vocab === 'object' && !Array.isArray(model.vocab)) {
    const id = (model.vocab as Record<string, number>)[model.unk_token];
    if (typeof id === 'number') return id;
  }
  return null;
}

/**
 * Lets go of a WordPiece tokenizer.json's `model.vocab` object once @huggingface/tokenizers has built its model from
 * it. The library keeps the parsed JSON (`Tokenizer.tokenizer`, and the model section as `model.config`) but reads
 * the vocabulary only in the model's constructor, which copies it into its own token → id Map and id → token array;
 * kept, the object was a second copy of the vocabulary, ~6 MB of the api's live heap with a 100k-word model
 * (bench/README.md, "Seventh pass"). Only for WordPiece, the one model whose code this was checked against.
 */
export function dropVocabObject(json: { model?: { type?: string; vocab?: unknown } }): void {
  if (json.model?.type === 'WordPiece') delete json.model.vocab;
}


/** A loaded model2vec model: tokenizer plus [vocab, dim] matrix. */
export class StaticModel {
  /** Ids that never contribute: special tokens and [UNK]. */
  private readonly skip: Set<number>;
  /** Token ids by whitespace-delimited piece (see splitsOnWhitespace); null when the tokenizer does not allow it. */
  private readonly pieces: Map<string, number[]> | null;

  constructor(
    private readonly tokenizer: Tokenizer,
    private readonly matrix: Float32Array,
    readonly rows: number,
    readonly dim: number,
    readonly unkId: number | null,
    wordwise = false,
  ) {
    this.pieces = wordwise ? new Map() : null;
    // Text that spells "[CLS]" would otherwise match the added token; special rows carry no meaning of the text.
    this.skip = new Set([...(tokenizer.all_special_ids ?? []), ...(unkId === null ? [] : [unkId])]);
  }

  /** Loads tokenizer.json and model.safetensors from a folder. */
  static fromFolder(folder: string): StaticModel {
    const { tokenizer, unkId, wordwise } = loadTokenizer(folder);
    const m = parseSafetensors(fs.readFileSync(path.join(folder, 'model.safetensors')));
    return new StaticModel(tokenizer, m.data, m.rows, m.dim, unkId, wordwise);
  }

  /** The tokenizer's own ids for a text (special tokens included), before the 512-token cut. */
  private encode(text: string): number[] {
    if (!this.pieces) return this.tokenizer.encode(text, { add_special_tokens: false });
    // Words repeat (Zipf): each distinct piece goes through the tokenizer once. The tokenizer was
    // ~80% of a reindex's embedding time; a piece lookup is a Map get.
    const ids: number[] = [];
    for (const piece of text.split(/[ \t\n\r]+/)) {
      if (piece === '') continue;
      let got = this.pieces.get(piece);
      if (!got) {
        got = this.tokenizer.encode(piece, { add_special_tokens: false });
        // Bounded: a stream of unique tokens (ids, hashes) must not grow the map without end.
        if (this.pieces.size >= MAX_CACHED_PIECES) this.pieces.clear();
        this.pieces.set(piece, got);
      }
      for (const id of got) ids.push(id);
      if (ids.length >= MAX_TOKENS) break;
    }
    return ids;
  }

  /** Token ids that contribute to a text's vector: no special tokens, no [UNK], none past the matrix. */
  tokenIds(text: string): number[] {
    const ids = this.encode(clipText(text, MAX_INPUT_CHARS)).slice(0, MAX_TOKENS);
    return ids.filter((id) => !this.skip.has(id) && id >= 0 && id < this.rows);
  }

  /** The tokenizer's ids for a text without the piece cache (tests compare the two). */
  tokenIdsUncached(text: string): number[] {
    const ids = this.tokenizer.encode(clipText(text, MAX_INPUT_CHARS), { add_special_tokens: false }).slice(0, MAX_TOKENS);
    return ids.filter((id) => !this.skip.has(id) && id >= 0 && id < this.rows);
  }

  /** Whether pieces between whitespace are tokenized once and remembered. */
  get cachesPieces(): boolean {
    return this.pieces !== null;
  }

  /** Mean of the token rows, L2-normalised; all zeros when no token is known. */
  embed(text: string): Float32Array {
    const out = new Float32Array(this.dim);
    const ids = this.tokenIds(text);
    for (const id of ids) {
      const row = id * this.dim;
      for (let j = 0; j < this.dim; j++) out[j] += this.matrix[row + j];
    }
    if (ids.length) for (let j = 0; j < this.dim; j++) out[j] /= ids.length;
    return l2Normalize(out);
  }
}

/** In-flight and finished loads by folder: one download and one parse per process. */
const loads = new Map<string, Promise<StaticModel>>();
/** The models whose load finished, by folder (the embed path uses them without a promise or an abort listener). */
const loaded = new Map<string, StaticModel>();

/** Loads (downloading first when it is a hub repo) the static model; concurrent callers share one promise, a failure is forgotten. */
export function loadStaticModel(env: StaticEnv, policy: OutboundPolicy = operatorPolicy()): Promise<StaticModel> {
  const loc = staticModelLocation(env);
  if (loc.kind === 'invalid') return Promise.reject(new Error(loc.why));
  const key = loc.folder;
  let p = loads.get(key);
  if (!p) {
    p = (async () => {
      if (loc.kind === 'hub') {
        await downloadHubFiles({
          endpoint: env.HF_HUB_ENDPOINT,
          repo: loc.repo,
          dir: loc.folder,
          required: ['tokenizer.json', 'model.safetensors'],
          optional: ['config.json', 'tokenizer_config.json'],
          policy,
        });
      }
      return StaticModel.fromFolder(loc.folder);
    })();
    loads.set(key, p);
    p.then(
      (model) => {
        if (loads.get(key) === p) loaded.set(key, model);
      },
      () => {
        if (loads.get(key) === p) loads.delete(key);
      },
    );
  }
  return p;
}

/** Forgets loaded models (tests, and operators swapping a folder in place). */
export function forgetStaticModels(): void {
  loads.clear();
  loaded.clear();
}


function abortable<T>(p: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** model2vec embeddings computed in-process from a local or downloaded folder. */
export class StaticEmbedder implements Embedder {
  readonly source = 'static' as const;
  readonly model: string;
  readonly identity: string;
  /** Where the model is (or will be) loaded from; null when the setting names neither a folder nor a hub repo. */
  private readonly folder: string | null;

  constructor(
    private readonly env: StaticEnv,
    private readonly policy: OutboundPolicy = operatorPolicy(),
  ) {
    this.model = env.MEMORY_STATIC_MODEL;
    const loc = staticModelLocation(env);
    this.identity = loc.kind === 'local' ? loc.folder : this.model;
    this.folder = loc.kind === 'invalid' ? null : loc.folder;
  }

  async embed(texts: string[], signal?: AbortSignal): Promise<Float32Array[]> {
    // Once loaded (every query after the first), no promise race and no abort listener per query.
    const ready = this.folder === null ? undefined : loaded.get(this.folder);
    if (ready) return texts.map((t) => ready.embed(t));
    let model: StaticModel;
    try {
      // A caller giving up does not cancel the shared load: the next caller reuses it.
      model = await abortable(loadStaticModel(this.env, this.policy), signal);
    } catch (err) {
      if (signal?.aborted) throw new EmbeddingError('timeout', 'static', this.model, 'static model load did not finish in time');
      throw new EmbeddingError('model_load_failed', 'static', this.model, `static model could not be loaded: ${(err as Error).message}`);
    }
    return texts.map((t) => model.embed(t));
  }
}
