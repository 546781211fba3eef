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

/** Where a safetensors file's embedding tensor lies (`embeddings`, else the first 2-D float tensor), from its header alone. */
interface TensorPlace {
  name: string;
  rows: number;
  dim: number;
  dtype: 'F32' | 'F16' | 'BF16';
  /** Byte offset of the tensor in the file. */
  start: number;
}

/** The 8-byte header length at the start of a safetensors file, checked against the file's size. */
function headerLength(head: Buffer, fileSize: number): number {
  if (fileSize < 8 || head.length < 8) throw new Error('safetensors file is too short');
  const headerLen = Number(head.readBigUInt64LE(0));
  if (headerLen <= 0 || 8 + headerLen > fileSize) throw new Error('safetensors header length is out of range');
  return headerLen;
}

/** Finds the embedding tensor in a header (`head` holds the file's first 8 + header length bytes). */
function tensorPlace(head: Buffer, fileSize: number): TensorPlace {
  const headerLen = headerLength(head, fileSize);
  const header = JSON.parse(head.subarray(8, 8 + headerLen).toString('utf8')) as Record<
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
  if (end > fileSize || end - start !== rows * dim * width) throw new Error('safetensors tensor size does not match its shape');
  return { name, rows, dim, dtype: t.dtype as TensorPlace['dtype'], start };
}

/** Decodes `count` values of a tensor's dtype from `bytes` into `out` from index `at`: the one conversion of every path. */
function decodeInto(out: Float32Array, at: number, bytes: Buffer, dtype: TensorPlace['dtype'], count: number): void {
  for (let i = 0; i < count; i++) {
    if (dtype === 'F32') out[at + i] = bytes.readFloatLE(i * 4);
    else if (dtype === 'F16') out[at + i] = halfToFloat(bytes.readUInt16LE(i * 2));
    else out[at + i] = new Float32Array(new Uint32Array([bytes.readUInt16LE(i * 2) << 16]).buffer)[0];
  }
}

/** Reads the embedding matrix of a model2vec safetensors file (`embeddings`, else the first 2-D float tensor). */
export function parseSafetensors(buf: Buffer): SafetensorsMatrix {
  const { name, rows, dim, dtype, start } = tensorPlace(buf, buf.length);
  if (dtype === 'F32' && os.endianness() === 'LE' && (buf.byteOffset + start) % 4 === 0) {
    // A view of the file's own bytes: no copy. Each 40 MB copy cost ~1 s of page faults on the
    // bench machine, and the worker's peak RSS held the file, the copy and the matrix at once.
    return { name, rows, dim, data: new Float32Array(buf.buffer, buf.byteOffset + start, rows * dim) };
  }
  const data = new Float32Array(rows * dim);
  if (dtype === 'F32' && os.endianness() === 'LE') {
    // Copy through an aligned buffer: the tensor may start at any byte offset.
    data.set(new Float32Array(buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + start + rows * dim * 4)));
  } else {
    decodeInto(data, 0, buf.subarray(start), dtype, data.length);
  }
  return { name, rows, dim, data };
}

/** Thrown when a model file that is being read row by row is no longer the file that was opened. */
export class StaticModelChangedError extends Error {
  constructor(readonly file: string) {
    // No path in the message: it can reach a client in an embedding error.
    super('the model file changed on disk after it was loaded');
    this.name = 'StaticModelChangedError';
  }
}

/** Bytes read per block of rows: one page, so a row that is used makes about one page of the table resident. */
const TABLE_BLOCK_BYTES = 4096;

/** Closes the file of a table that is no longer referenced (a forgotten model). */
const tableFiles = new FinalizationRegistry<number>((fd) => fs.close(fd, () => undefined));

/**
 * A model2vec embedding table read from its safetensors file a block of rows at a time, the first time one of its
 * rows is used. The Float32Array is allocated whole but zero-filled pages are not resident until written, so a
 * process holds only the rows its texts use: the api embeds queries, which use a small part of a 100k-word
 * vocabulary (its RSS held the whole 38 MB table before; bench/README.md, "Seventh pass"). The values are the same
 * floats, decoded by the same code, as a whole-file read. The file stays open; a block is read only if the file
 * still has the size and modification time it had when opened (a copy over it in place would otherwise mix two models' rows).
 */
export class SafetensorsTable {
  readonly rows: number;
  readonly dim: number;
  /** The [rows, dim] matrix; a row's values are valid once `ensure` has been given its id. */
  readonly data: Float32Array;
  private readonly dtype: TensorPlace['dtype'];
  private readonly start: number;
  private readonly blockRows: number;
  private readonly loaded: Uint8Array;
  private readonly stamp: string;

  private constructor(
    private readonly file: string,
    private readonly fd: number,
    place: TensorPlace,
    stat: fs.Stats,
  ) {
    this.rows = place.rows;
    this.dim = place.dim;
    this.dtype = place.dtype;
    this.start = place.start;
    this.data = new Float32Array(place.rows * place.dim);
    this.blockRows = Math.max(1, Math.floor(TABLE_BLOCK_BYTES / (place.dim * 4)));
    this.loaded = new Uint8Array(Math.ceil(place.rows / this.blockRows));
    this.stamp = SafetensorsTable.stampOf(stat);
  }

  private static stampOf(s: fs.Stats): string {
    // Not ctime: a rename over the path changes the opened file's ctime (its link count), not its bytes.
    return `${s.ino}:${s.size}:${s.mtimeMs}`;
  }

  /** Opens a safetensors file and reads its header; no row is read yet. */
  static open(file: string): SafetensorsTable {
    const fd = fs.openSync(file, 'r');
    try {
      const stat = fs.fstatSync(fd);
      const first = Buffer.alloc(8);
      SafetensorsTable.readFully(fd, first, 0, file);
      const head = Buffer.alloc(8 + headerLength(first, stat.size));
      SafetensorsTable.readFully(fd, head, 0, file);
      const table = new SafetensorsTable(file, fd, tensorPlace(head, stat.size), stat);
      tableFiles.register(table, fd);
      return table;
    } catch (err) {
      fs.closeSync(fd);
      throw err;
    }
  }

  private static readFully(fd: number, into: Uint8Array, position: number, file: string): void {
    let done = 0;
    while (done < into.length) {
      const got = fs.readSync(fd, into, done, into.length - done, position + done);
      if (got === 0) throw new StaticModelChangedError(file);
      done += got;
    }
  }

  /** Reads the blocks holding these rows that have not been read yet (ids must be in [0, rows)). */
  ensure(ids: readonly number[]): void {
    for (const id of ids) {
      const block = (id / this.blockRows) | 0;
      if (this.loaded[block] === 0) this.readBlock(block);
    }
  }

  /** Reads every row not read yet (tests compare the table with a whole-file read). */
  ensureAll(): void {
    for (let b = 0; b < this.loaded.length; b++) if (this.loaded[b] === 0) this.readBlock(b);
  }

  private readBlock(block: number): void {
    try {
      if (SafetensorsTable.stampOf(fs.fstatSync(this.fd)) !== this.stamp) throw new StaticModelChangedError(this.file);
      const first = block * this.blockRows;
      const count = (Math.min(this.rows, first + this.blockRows) - first) * this.dim;
      const width = this.dtype === 'F32' ? 4 : 2;
      const position = this.start + first * this.dim * width;
      if (this.dtype === 'F32' && os.endianness() === 'LE') {
        SafetensorsTable.readFully(this.fd, new Uint8Array(this.data.buffer, first * this.dim * 4, count * 4), position, this.file);
      } else {
        const bytes = Buffer.alloc(count * width);
        SafetensorsTable.readFully(this.fd, bytes, position, this.file);
        decodeInto(this.data, first * this.dim, bytes, this.dtype, count);
      }
      // Again after the read: a write that lands between the check above and the read's end changes the stamp too.
      if (SafetensorsTable.stampOf(fs.fstatSync(this.fd)) !== this.stamp) throw new StaticModelChangedError(this.file);
    } catch (err) {
      // Any failure to read the opened file (ESTALE once an NFS server has replaced it, EIO) is handled as a change:
      // the model is forgotten and the next call opens the folder's file again, instead of failing until a restart.
      if (err instanceof StaticModelChangedError) throw err;
      throw Object.assign(new StaticModelChangedError(this.file), { cause: err });
    }
    this.loaded[block] = 1;
  }
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

  readonly rows: number;
  readonly dim: number;

  constructor(
    private readonly tokenizer: Tokenizer,
    private readonly table: SafetensorsTable,
    readonly unkId: number | null,
    wordwise = false,
  ) {
    this.rows = table.rows;
    this.dim = table.dim;
    this.pieces = wordwise ? new Map() : null;
    // Text that spells "[CLS]" would otherwise match the added token; special rows carry no meaning of the text.
    this.skip = new Set([...(tokenizer.all_special_ids ?? []), ...(unkId === null ? [] : [unkId])]);
  }

  /** Loads tokenizer.json and model.safetensors from a folder. */
  static fromFolder(folder: string): StaticModel {
    const { tokenizer, unkId, wordwise } = loadTokenizer(folder);
    return new StaticModel(tokenizer, SafetensorsTable.open(path.join(folder, 'model.safetensors')), unkId, wordwise);
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
    this.table.ensure(ids);
    const matrix = this.table.data;
    for (const id of ids) {
      const row = id * this.dim;
      for (let j = 0; j < this.dim; j++) out[j] += matrix[row + j];
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

/** Forgets one loaded model (its file changed on disk), so the next caller loads its folder again. */
function forgetStaticModel(model: StaticModel): void {
  for (const [folder, m] of loaded) {
    if (m !== model) continue;
    loaded.delete(folder);
    loads.delete(folder);
  }
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
    if (ready) return this.embedWith(ready, texts);
    let model: StaticModel;
    try {
      // A caller giving up does not cancel the shared load: the next caller reuses it.
      model = await abortable(loadStaticModel(this.env, this.policy), signal);
    } catch (err) {
      if (signal?.aborted) throw new EmbeddingError('timeout', 'static', this.model, 'static model load did not finish in time');
      throw new EmbeddingError('model_load_failed', 'static', this.model, `static model could not be loaded: ${(err as Error).message}`);
    }
    return this.embedWith(model, texts);
  }

  private embedWith(model: StaticModel, texts: string[]): Float32Array[] {
    try {
      return texts.map((t) => model.embed(t));
    } catch (err) {
      if (!(err instanceof StaticModelChangedError)) throw err;
      // Rows are read as they are first used: a file changed under them cannot give this text a vector of one
      // model. The next call loads the folder again, whole.
      forgetStaticModel(model);
      throw new EmbeddingError('model_load_failed', 'static', this.model, `static model could not be loaded: ${err.message}`);
    }
  }
}
