import fs from 'node:fs';
import path from 'node:path';
import { testEnv, tempDir } from '../../test/helpers/env';
import { startFakeHubServer, type FakeHubServer } from '../../test/helpers/fake-hub-server';
import { fixtureMatrix, safetensorsBytes, topicModelSpec, writeModel2VecFolder } from '../../test/helpers/model-fixtures';
import v8 from 'node:v8';
import vm from 'node:vm';
import { forgetStaticModels, loadStaticModel, parseSafetensors, SafetensorsTable, splitsOnWhitespace, StaticEmbedder, StaticModel, staticModelLocation } from './static';
import { mulberry32 } from '../../test/helpers/prng';
import { cosine, isZeroVector } from './types';

const norm = (v: Float32Array) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

/** The bytes of a fixture model2vec folder, keyed as the fake hub serves them. */
function hubFiles(repo: string, dim = 8): Record<string, Buffer> {
  const dir = writeModel2VecFolder(path.join(tempDir('m2v-src'), 'm'), topicModelSpec(dim));
  return Object.fromEntries(['tokenizer.json', 'model.safetensors', 'config.json'].map((f) => [`${repo}/${f}`, fs.readFileSync(path.join(dir, f))]));
}

describe('static (model2vec) source from a local folder', () => {
  afterEach(() => forgetStaticModels());

  it('tokenises with the transformers.js tokenizer, mean-pools, normalises; related words score higher', async () => {
    const folder = writeModel2VecFolder(path.join(tempDir('m2v'), 'potion-fixture'), topicModelSpec(16));
    const e = new StaticEmbedder(testEnv({ MEMORY_STATIC_MODEL: folder }));
    expect(e.identity).toBe(folder);
    const [cat, kitten, pizza, dog] = await e.embed(['My CAT', 'the kitten', 'pizza and pasta', 'dog']);
    expect(cat.length).toBe(16);
    for (const v of [cat, kitten, pizza, dog]) expect(norm(v)).toBeCloseTo(1, 5);
    expect(cosine(cat, kitten)).toBeGreaterThan(cosine(cat, pizza) + 0.3);
    expect(cosine(dog, kitten)).toBeGreaterThan(cosine(dog, pizza));
  });

  it('accepts a relative folder path', () => {
    const folder = writeModel2VecFolder(path.join(tempDir('m2v'), 'rel'), topicModelSpec(8));
    const rel = path.relative(process.cwd(), folder);
    expect(staticModelLocation(testEnv({ MEMORY_STATIC_MODEL: rel }))).toEqual({ kind: 'local', folder });
  });

  it('drops special tokens and [UNK]: unknown words change nothing, an all-unknown text is a zero vector without NaN', () => {
    const folder = writeModel2VecFolder(path.join(tempDir('m2v'), 'm'), topicModelSpec(8));
    const model = StaticModel.fromFolder(folder);
    expect(model.unkId).toBe(1);
    const plain = model.embed('cat');
    const noisy = model.embed('cat zzzqqq xyzzy');
    expect(Array.from(noisy)).toEqual(Array.from(plain));
    expect(model.tokenIds('[CLS] cat [SEP]')).toEqual(model.tokenIds('cat'));
    const zero = model.embed('zzzqqq xyzzy');
    expect(zero.length).toBe(8);
    expect(isZeroVector(zero)).toBe(true);
    expect(zero.some(Number.isNaN)).toBe(false);
    expect(isZeroVector(model.embed(''))).toBe(true);
  });

  it('checks the folder once per second, not at every resolution (2–3 per retrieval)', () => {
    const folder = writeModel2VecFolder(path.join(tempDir('m2v'), 'stat-once'), topicModelSpec(8));
    const env = testEnv({ MEMORY_STATIC_MODEL: folder });
    const stat = jest.spyOn(fs, 'statSync');
    try {
      for (let i = 0; i < 5; i++) expect(staticModelLocation(env)).toEqual({ kind: 'local', folder });
      expect(stat.mock.calls.filter((c) => c[0] === folder)).toHaveLength(1);
    } finally {
      stat.mockRestore();
    }
  });

  it('reports a folder that does not exist as model_load_failed', async () => {
    const e = new StaticEmbedder(testEnv({ MEMORY_STATIC_MODEL: path.join(tempDir('m2v'), 'missing') }));
    await expect(e.embed(['x'])).rejects.toMatchObject({ reason: 'model_load_failed', source: 'static' });
  });
});

describe('tokenizing piece by piece (whitespace-delimited pieces remembered)', () => {
  it('gives exactly the tokenizer\'s ids on generated text: subwords, punctuation, case, accents, CJK, control and special tokens', () => {
    const spec = topicModelSpec(8, 0);
    spec.vocab.push('play', '##ing', '##ed', 'run', '##ner', 'café', '中', '文', 'hello', 'world');
    const folder = writeModel2VecFolder(path.join(tempDir('pieces'), 'm'), spec);
    const model = StaticModel.fromFolder(folder);
    expect(model.cachesPieces).toBe(true);
    const parts = [
      'playing', 'played', 'runner', 'Cat', 'PIZZA', 'café', 'CAFÉ', 'cafe\u0301', '中文', 'hello,world', 'world!', '"python"', '(bug)',
      '[CLS]', 'x[SEP]y', '[unk]', 'snow\u00a0rain', 'rain\u200bcloud', '\ufeffcat', 'dog\u0000', 'e-mail', "don't", '42', 'v2.5',
      'a'.repeat(120), '🙂', 'ΟΔΟΣ', 'straße', '\t', '\n', '\r\n', '  ',
    ];
    const r = mulberry32(7);
    for (let n = 0; n < 300; n++) {
      const text = Array.from({ length: 1 + Math.floor(r() * 12) }, () => parts[Math.floor(r() * parts.length)]!).join([' ', '', '\t', '\n', '  '][Math.floor(r() * 5)]!);
      expect(model.tokenIds(text)).toEqual(model.tokenIdsUncached(text));
    }
    // Twice: the second pass reads every piece from the map.
    const long = Array.from({ length: 700 }, (_, i) => parts[i % parts.length]).join(' ');
    expect(model.tokenIds(long)).toEqual(model.tokenIdsUncached(long));
    expect(model.tokenIds(long)).toEqual(model.tokenIdsUncached(long));
  });

  it('is used only where whitespace always splits: not for byte-level BPE, Metaspace or a spaced added token', () => {
    const bert = { normalizer: { type: 'BertNormalizer' }, pre_tokenizer: { type: 'BertPreTokenizer' }, model: { type: 'WordPiece' }, added_tokens: [{ content: '[CLS]' }] };
    expect(splitsOnWhitespace(bert)).toBe(true);
    expect(splitsOnWhitespace({ ...bert, pre_tokenizer: { type: 'ByteLevel' }, model: { type: 'BPE' } })).toBe(false);
    expect(splitsOnWhitespace({ ...bert, pre_tokenizer: { type: 'Metaspace' }, model: { type: 'Unigram' } })).toBe(false);
    expect(splitsOnWhitespace({ ...bert, normalizer: { type: 'Sequence' } })).toBe(false);
    expect(splitsOnWhitespace({ ...bert, added_tokens: [{ content: 'new york' }] })).toBe(false);
  });
});

describe('the static model\'s tokenizer without the transformers.js bundle (issue #14: ~35 MB of api RSS)', () => {
  afterEach(() => forgetStaticModels());

  it('loads and embeds without requiring @huggingface/transformers (onnxruntime-node, sharp)', () => {
    const folder = writeModel2VecFolder(path.join(tempDir('no-ort'), 'm'), topicModelSpec(8));
    try {
      jest.isolateModules(() => {
        jest.doMock('@huggingface/transformers', () => {
          throw new Error('@huggingface/transformers was loaded');
        });
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const isolated = require('./static') as typeof import('./static');
        const model = isolated.StaticModel.fromFolder(folder);
        expect(model.tokenIds('[CLS] cat [SEP]')).toEqual(model.tokenIds('cat'));
        expect(isZeroVector(model.embed('cat'))).toBe(false);
      });
    } finally {
      jest.dontMock('@huggingface/transformers');
    }
  });

  it('gives the ids and special tokens transformers.js gives, with and without a tokenizer_config.json', () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const transformers = require('@huggingface/transformers') as typeof import('@huggingface/transformers');
    const spec = topicModelSpec(8, 0);
    spec.vocab.push('play', '##ing', '##ed', 'café', '中', '文', 'hello', 'world');
    const plain = writeModel2VecFolder(path.join(tempDir('parity'), 'plain'), spec);
    const bert = writeModel2VecFolder(path.join(tempDir('parity'), 'bert'), spec);
    fs.writeFileSync(path.join(bert, 'tokenizer_config.json'), JSON.stringify({ tokenizer_class: 'BertTokenizerFast', do_lower_case: true }));
    const parts = ['playing', 'played', 'Cat', 'PIZZA', 'café', 'CAFÉ', '中文', 'hello,world', '[CLS]', 'x[SEP]y', '[UNK]', 'zzz', 'e-mail', '42', '🙂', '  ', '\n'];
    const r = mulberry32(11);
    for (const folder of [plain, bert]) {
      const config = fs.existsSync(path.join(folder, 'tokenizer_config.json')) ? JSON.parse(fs.readFileSync(path.join(folder, 'tokenizer_config.json'), 'utf8')) : {};
      const reference = new transformers.PreTrainedTokenizer(JSON.parse(fs.readFileSync(path.join(folder, 'tokenizer.json'), 'utf8')), config);
      const model = StaticModel.fromFolder(folder);
      const skip = new Set([...reference.all_special_ids, model.unkId]);
      for (let n = 0; n < 200; n++) {
        const text = Array.from({ length: 1 + Math.floor(r() * 10) }, () => parts[Math.floor(r() * parts.length)]!).join(r() < 0.5 ? ' ' : '');
        expect(model.tokenIdsUncached(text)).toEqual(reference.encode(text, { add_special_tokens: false }).filter((id) => !skip.has(id)));
      }
    }
  });
});

describe('parseSafetensors', () => {
  it('reads the F32 [vocab, dim] matrix after the JSON header', () => {
    const data = Float32Array.from([1, 2, 3, 4, 5, 6]);
    const m = parseSafetensors(safetensorsBytes('embeddings', [3, 2], data));
    expect(m).toMatchObject({ name: 'embeddings', rows: 3, dim: 2 });
    expect(Array.from(m.data)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('an aligned F32 tensor is read in place (no copy of the file); an unaligned one is copied and read the same', () => {
    const data = Float32Array.from([1, 2, 3, 4, 5, 6]);
    const aligned = parseSafetensors(safetensorsBytes('embeddings', [3, 2], data));
    expect(Array.from(aligned.data)).toEqual([1, 2, 3, 4, 5, 6]);
    const file = safetensorsBytes('embeddings', [3, 2], data);
    const viewed = parseSafetensors(file);
    expect(viewed.data.buffer).toBe(file.buffer);
    // The same bytes one byte into a larger buffer: the tensor no longer starts on a 4-byte boundary.
    const shifted = Buffer.alloc(file.length + 1);
    file.copy(shifted, 1);
    const copied = parseSafetensors(shifted.subarray(1));
    expect(copied.data.buffer).not.toBe(shifted.buffer);
    expect(Array.from(copied.data)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('reads F16 tensors', () => {
    const header = JSON.stringify({ embeddings: { dtype: 'F16', shape: [1, 3], data_offsets: [0, 6] } });
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(header.length));
    const halves = Buffer.alloc(6);
    [0x3c00, 0xc000, 0x3800].forEach((h, i) => halves.writeUInt16LE(h, i * 2)); // 1, -2, 0.5
    expect(Array.from(parseSafetensors(Buffer.concat([len, Buffer.from(header), halves])).data)).toEqual([1, -2, 0.5]);
  });

  it('rejects a file whose tensor is shorter than its shape', () => {
    const bytes = safetensorsBytes('embeddings', [3, 2], Float32Array.from([1, 2, 3, 4, 5, 6]));
    expect(() => parseSafetensors(bytes.subarray(0, bytes.length - 4))).toThrow(/size/);
  });
});

describe('static source from the hub (fake hub on 127.0.0.1)', () => {
  const repo = 'fixture-org/potion-tiny';
  let hub: FakeHubServer;

  afterEach(async () => {
    forgetStaticModels();
    await hub?.close();
  });

  it('downloads into <cache>/<owner>--<name>, then loads from disk without asking again (new service, same process)', async () => {
    hub = await startFakeHubServer(hubFiles(repo));
    const cache = tempDir('static-cache');
    const env = testEnv({ MEMORY_STATIC_MODEL: repo, HF_HUB_ENDPOINT: hub.endpoint, MEMORY_STATIC_CACHE_DIR: cache });
    const [v] = await new StaticEmbedder(env).embed(['kitten']);
    expect(v.length).toBe(8);
    const folder = path.join(cache, 'fixture-org--potion-tiny');
    expect(fs.readdirSync(folder).sort()).toEqual(['.engram-hub.json', 'config.json', 'model.safetensors', 'tokenizer.json']);
    expect(hub.count(repo, 'model.safetensors')).toBe(1);
    const before = hub.requests.length;

    // A fresh process would start with an empty memo: forget it and load again.
    forgetStaticModels();
    const [again] = await new StaticEmbedder(env).embed(['kitten']);
    expect(Array.from(again)).toEqual(Array.from(v));
    expect(hub.requests.length).toBe(before);
  });

  it('defaults the cache folder to DATA_DIR/models/static', () => {
    const env = testEnv({ MEMORY_STATIC_MODEL: 'minishlab/potion-base-8M' });
    expect(staticModelLocation(env)).toEqual({
      kind: 'hub',
      repo: 'minishlab/potion-base-8M',
      folder: path.join(env.DATA_DIR, 'models', 'static', 'minishlab--potion-base-8M'),
    });
  });

  it('shares one download between concurrent callers', async () => {
    hub = await startFakeHubServer(hubFiles(repo), { delayMs: 30 });
    const env = testEnv({ MEMORY_STATIC_MODEL: repo, HF_HUB_ENDPOINT: hub.endpoint, MEMORY_STATIC_CACHE_DIR: tempDir('static-cache') });
    const results = await Promise.all(Array.from({ length: 5 }, () => new StaticEmbedder(env).embed(['snow'])));
    expect(new Set(results.map((r) => r[0].join(','))).size).toBe(1);
    expect(hub.count(repo, 'tokenizer.json')).toBe(1);
    expect(hub.count(repo, 'model.safetensors')).toBe(1);
  });

  it('rejects a truncated download, leaves nothing in place, and retries on the next call', async () => {
    hub = await startFakeHubServer(hubFiles(repo));
    hub.truncate(repo, 'model.safetensors', 100);
    const cache = tempDir('static-cache');
    const env = testEnv({ MEMORY_STATIC_MODEL: repo, HF_HUB_ENDPOINT: hub.endpoint, MEMORY_STATIC_CACHE_DIR: cache });
    await expect(new StaticEmbedder(env).embed(['rain'])).rejects.toMatchObject({ reason: 'model_load_failed' });
    const folder = path.join(cache, 'fixture-org--potion-tiny');
    const left = fs.readdirSync(folder);
    expect(left).not.toContain('model.safetensors');
    expect(left.filter((f) => f.endsWith('.part'))).toEqual([]);

    // The failure was not memoised: once the hub serves the whole file, the same process recovers.
    hub.truncate(repo, 'model.safetensors', null);
    const [v] = await new StaticEmbedder(env).embed(['rain']);
    expect(v.length).toBe(8);
    expect(hub.count(repo, 'model.safetensors')).toBe(2);
    expect(hub.count(repo, 'tokenizer.json')).toBe(1);
  });

  it('fails with model_load_failed when a required file is missing from the repo, naming no URL', async () => {
    const files = hubFiles(repo);
    delete files[`${repo}/model.safetensors`];
    hub = await startFakeHubServer(files);
    const env = testEnv({ MEMORY_STATIC_MODEL: repo, HF_HUB_ENDPOINT: hub.endpoint, MEMORY_STATIC_CACHE_DIR: tempDir('static-cache') });
    const err = (await new StaticEmbedder(env).embed(['x']).then(
      () => null,
      (e: unknown) => e,
    )) as Error;
    expect(err).toMatchObject({ reason: 'model_load_failed' });
    expect(err.message).toMatch(/model\.safetensors/);
    expect(err.message).not.toMatch(/127\.0\.0\.1|http/);
  });

  it('memoises per folder: loadStaticModel returns the same promise to concurrent callers', () => {
    const folder = writeModel2VecFolder(path.join(tempDir('m2v'), 'm'), topicModelSpec(8));
    const env = testEnv({ MEMORY_STATIC_MODEL: folder });
    const a = loadStaticModel(env);
    expect(loadStaticModel(env)).toBe(a);
    return a;
  });
});

/** A full collection from inside a test (the flag is V8's own; new contexts see `gc`). */
function collectGarbage(): void {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  gc();
  gc();
}

describe('what a loaded static model holds (issue #14: the api\'s RSS)', () => {
  afterEach(() => forgetStaticModels());

  it('does not keep the tokenizer.json vocabulary object once the tokenizer has its own map of it', async () => {
    const spec = topicModelSpec(8, 200);
    const folder = writeModel2VecFolder(path.join(tempDir('vocab-drop'), 'm'), spec);
    // The vocabulary object as JSON.parse gives it to the loader, held weakly.
    const parseJson = JSON.parse.bind(JSON);
    let vocab: WeakRef<object> | null = null;
    const parse = jest.spyOn(JSON, 'parse').mockImplementation((text: string, reviver?: (this: unknown, key: string, value: unknown) => unknown) => {
      const value = parseJson(text, reviver) as { model?: { type?: string; vocab?: object } };
      if (value?.model?.type === 'WordPiece' && value.model.vocab) vocab = new WeakRef(value.model.vocab);
      return value;
    });
    let model: StaticModel;
    try {
      model = StaticModel.fromFolder(folder);
    } finally {
      parse.mockRestore();
    }
    expect(vocab).not.toBeNull();
    // WeakRef targets live to the end of the current job: collect in a later one.
    await new Promise((r) => setImmediate(r));
    collectGarbage();
    expect(vocab!.deref()).toBeUndefined();
    // The tokenizer still has every word.
    expect(model.tokenIds('filler199 cat')).toEqual([4 + spec.vocab.indexOf('filler199'), 4 + spec.vocab.indexOf('cat')]);
  });

  it('reads the table rows as they are first used, and gives the values of a whole-file read', () => {
    // 8 dims: 128 rows per 4 KB block, so 1,230 rows are 10 blocks.
    const spec = topicModelSpec(8, 1200);
    const folder = writeModel2VecFolder(path.join(tempDir('lazy-table'), 'm'), spec);
    const whole = parseSafetensors(fs.readFileSync(path.join(folder, 'model.safetensors')));
    const table = SafetensorsTable.open(path.join(folder, 'model.safetensors'));
    expect([table.rows, table.dim]).toEqual([whole.rows, whole.dim]);
    const read = jest.spyOn(fs, 'readSync');
    try {
      table.ensure([700]);
      table.ensure([701, 640]);
      expect(read).toHaveBeenCalledTimes(1);
    } finally {
      read.mockRestore();
    }
    const rowOf = (a: Float32Array, id: number) => Array.from(a.subarray(id * 8, id * 8 + 8));
    expect(rowOf(table.data, 700)).toEqual(rowOf(whole.data, 700));
    expect(rowOf(table.data, 640)).toEqual(rowOf(whole.data, 640));
    // A row of a block not used yet holds nothing.
    expect(rowOf(table.data, 5).every((x) => x === 0)).toBe(true);
    table.ensureAll();
    expect(Array.from(table.data)).toEqual(Array.from(whole.data));
  });

  it('reads F16 and BF16 tables a block at a time to the values of a whole-file read', () => {
    const rows = 300;
    const dim = 4;
    const values = Array.from({ length: rows * dim }, (_, i) => ((i * 7919) % 2000) / 64 - 15.5);
    for (const dtype of ['F16', 'BF16'] as const) {
      const header = JSON.stringify({ embeddings: { dtype, shape: [rows, dim], data_offsets: [0, rows * dim * 2] } });
      const len = Buffer.alloc(8);
      len.writeBigUInt64LE(BigInt(header.length));
      const halves = Buffer.alloc(rows * dim * 2);
      // Multiples of 1/64 below 16: F16 holds them exactly (BF16 rounds them down to 7 fraction bits, as a whole-file read does).
      values.forEach((v, i) => {
        const f = new Float32Array([v]);
        const bits = new Uint32Array(f.buffer)[0]!;
        if (dtype === 'BF16') halves.writeUInt16LE(bits >>> 16, i * 2);
        else {
          const exp = ((bits >>> 23) & 0xff) - 127 + 15;
          halves.writeUInt16LE(v === 0 ? 0 : ((bits >>> 16) & 0x8000) | (exp << 10) | ((bits >>> 13) & 0x3ff), i * 2);
        }
      });
      const bytes = Buffer.concat([len, Buffer.from(header), halves]);
      const file = path.join(tempDir('lazy-half'), `${dtype}.safetensors`);
      fs.writeFileSync(file, bytes);
      const table = SafetensorsTable.open(file);
      table.ensure([299, 0]);
      table.ensureAll();
      expect(Array.from(table.data)).toEqual(Array.from(parseSafetensors(bytes).data));
      if (dtype === 'F16') expect(Array.from(table.data)).toEqual(values);
    }
  });

  it('embeds exactly as the mean of whole-file rows, over texts that use rows of every block', () => {
    const spec = topicModelSpec(8, 1200);
    const folder = writeModel2VecFolder(path.join(tempDir('lazy-embed'), 'm'), spec);
    const { matrix } = fixtureMatrix(spec);
    const model = StaticModel.fromFolder(folder);
    const r = mulberry32(5);
    for (let n = 0; n < 200; n++) {
      const words = Array.from({ length: 1 + Math.floor(r() * 12) }, () => spec.vocab[Math.floor(r() * spec.vocab.length)]!);
      const ids = model.tokenIds(words.join(' '));
      const expected = new Float32Array(8);
      for (const id of ids) for (let j = 0; j < 8; j++) expected[j] += matrix[id * 8 + j]!;
      for (let j = 0; j < 8; j++) expected[j] /= ids.length;
      let sum = 0;
      for (let j = 0; j < 8; j++) sum += expected[j]! * expected[j]!;
      const len = Math.sqrt(sum);
      expect(Array.from(model.embed(words.join(' ')))).toEqual(Array.from(expected.map((x) => x / len)));
    }
  });

  it('a model file copied over in place is not mixed in: model_load_failed, then the next call loads the new file whole', async () => {
    const spec = topicModelSpec(8, 1200);
    const folder = writeModel2VecFolder(path.join(tempDir('lazy-changed'), 'm'), spec);
    const e = new StaticEmbedder(testEnv({ MEMORY_STATIC_MODEL: folder }));
    const [cat] = await e.embed(['cat']);
    // The same shape, other rows, written into the same file (what `cp new.safetensors model.safetensors` does).
    const other = fixtureMatrix({ ...spec, vectors: {} }).matrix;
    const file = path.join(folder, 'model.safetensors');
    const ino = fs.statSync(file).ino;
    fs.writeFileSync(file, safetensorsBytes('embeddings', [other.length / 8, 8], other.map((x) => -x)));
    fs.utimesSync(file, new Date(), new Date(Date.now() + 5000));
    expect(fs.statSync(file).ino).toBe(ino);
    await expect(e.embed(['filler1100'])).rejects.toMatchObject({ reason: 'model_load_failed', source: 'static' });
    const [catAgain] = await e.embed(['cat']);
    const fresh = StaticModel.fromFolder(folder);
    expect(Array.from(catAgain)).toEqual(Array.from(fresh.embed('cat')));
    expect(Array.from(catAgain)).not.toEqual(Array.from(cat));
  });

  it('a model file replaced by rename keeps giving the loaded model\'s vectors (the file it opened)', async () => {
    const spec = topicModelSpec(8, 1200);
    const folder = writeModel2VecFolder(path.join(tempDir('lazy-renamed'), 'm'), spec);
    const e = new StaticEmbedder(testEnv({ MEMORY_STATIC_MODEL: folder }));
    const reference = StaticModel.fromFolder(folder);
    reference.embed('filler1100 cat');
    await e.embed(['cat']);
    const other = fixtureMatrix({ ...spec, vectors: {} }).matrix;
    const file = path.join(folder, 'model.safetensors');
    fs.writeFileSync(`${file}.new`, safetensorsBytes('embeddings', [other.length / 8, 8], other.map((x) => -x)));
    fs.renameSync(`${file}.new`, file);
    const [v] = await e.embed(['filler1100 cat']);
    expect(Array.from(v)).toEqual(Array.from(reference.embed('filler1100 cat')));
  });

  it('a model file written while a block of it is being read is not mixed in: model_load_failed, not a vector', async () => {
    const spec = topicModelSpec(8, 1200);
    const folder = writeModel2VecFolder(path.join(tempDir('lazy-during'), 'm'), spec);
    const e = new StaticEmbedder(testEnv({ MEMORY_STATIC_MODEL: folder }));
    await e.embed(['cat']);
    const other = fixtureMatrix({ ...spec, vectors: {} }).matrix;
    const file = path.join(folder, 'model.safetensors');
    // `cp` over the file lands after the block's stat and before its read returns.
    const realRead = fs.readSync.bind(fs) as (...args: unknown[]) => number;
    const read = jest.spyOn(fs, 'readSync').mockImplementation(((...args: unknown[]) => {
      read.mockRestore();
      fs.writeFileSync(file, safetensorsBytes('embeddings', [other.length / 8, 8], other.map((x) => -x)));
      fs.utimesSync(file, new Date(), new Date(Date.now() + 5000));
      return realRead(...args);
    }) as typeof fs.readSync);
    try {
      await expect(e.embed(['filler1100'])).rejects.toMatchObject({ reason: 'model_load_failed', source: 'static' });
    } finally {
      read.mockRestore();
    }
  });

  it('a read error on the opened model file (ESTALE once an NFS server replaced it) loads the folder again instead of failing every later call', async () => {
    const spec = topicModelSpec(8, 1200);
    const folder = writeModel2VecFolder(path.join(tempDir('lazy-stale'), 'm'), spec);
    const e = new StaticEmbedder(testEnv({ MEMORY_STATIC_MODEL: folder }));
    await e.embed(['cat']);
    const stale = () => Object.assign(new Error('ESTALE: stale file handle, read'), { code: 'ESTALE', errno: -116 });
    // The first file the table touches from here on is the one already open: its handle is stale for good.
    let staleFd: number | null = null;
    const realFstat = fs.fstatSync.bind(fs) as (...args: unknown[]) => fs.Stats;
    const realRead = fs.readSync.bind(fs) as (...args: unknown[]) => number;
    const fstat = jest.spyOn(fs, 'fstatSync').mockImplementation(((fd: number, ...rest: unknown[]) => {
      staleFd ??= fd;
      if (fd === staleFd) throw stale();
      return realFstat(fd, ...rest);
    }) as typeof fs.fstatSync);
    const read = jest.spyOn(fs, 'readSync').mockImplementation(((fd: number, ...rest: unknown[]) => {
      if (fd === staleFd) throw stale();
      return realRead(fd, ...rest);
    }) as typeof fs.readSync);
    try {
      await expect(e.embed(['filler1100'])).rejects.toMatchObject({ reason: 'model_load_failed', source: 'static' });
      const [v] = await e.embed(['filler1100']);
      expect(Array.from(v)).toEqual(Array.from(StaticModel.fromFolder(folder).embed('filler1100')));
    } finally {
      fstat.mockRestore();
      read.mockRestore();
    }
  });
});
