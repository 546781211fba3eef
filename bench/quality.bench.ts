/**
 * Retrieval quality on labelled conversational sets (issue #10): evidence recall@5/10/20, MRR and
 * p50 latency of Engram's strategies — asked through RetrievalService exactly as the API does —
 * beside in-process references over the same texts (Okapi BM25, exact cosine over the same
 * static vectors, their RRF). See bench/README.md.
 *
 *   npm run bench -- quality [--sets=gen-na,handwritten] [--chats=3] [--variants=variants.json]
 *                            [--out=bench/results/quality.json]
 * or the same through QUALITY_SETS, QUALITY_CHATS, QUALITY_VARIANTS (a file or inline JSON), QUALITY_OUT.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { benchStaticModel, WINK_MODEL_DIR } from './build-wink-model';
import { LoadedSet, type Answer, type Variant, type VariantRun } from './quality/engine';
import { GENERATED_SETS, generateSet } from './quality/generator';
import { handwrittenSet } from './quality/handwritten';
import { SLICES, scoreAnswer, sliceStats, type QuestionScore, type SliceStats } from './quality/metrics';
import { Bm25, ExactCosine, rrf, whitespaceTokens, wordTokens } from './quality/reference';
import type { LabelledSet, SetQuestion } from './quality/types';
import { QUESTION_KINDS, QUESTION_TAGS } from './quality/types';

/**
 * What runs when no variants are given: the engine as configured, its keyword ranking alone (hybrid
 * with the vector weight at 0), and the other fusion (RRF with the env's weights, and 1:1).
 */
export const DEFAULT_VARIANTS: Variant[] = [
  { name: 'engram' },
  { name: 'kw-only', settings: { hybridVectorWeight: 0 }, strategies: ['hybrid'] },
  { name: 'rrf', settings: { hybridFusion: 'rrf' }, strategies: ['hybrid'] },
  { name: 'rrf-1:1', settings: { hybridFusion: 'rrf', hybridFtsWeight: 1, hybridVectorWeight: 1 }, strategies: ['hybrid'] },
];

const REPO_ROOT = path.resolve(WINK_MODEL_DIR, '..', '..', '..');
const DEFAULT_OUT = path.join(REPO_ROOT, 'bench', 'results', 'quality.json');
const ALL_SETS = [...GENERATED_SETS.map((g) => g.name), 'handwritten'];

interface Options {
  sets: string[];
  chats: number | null;
  variants: Variant[];
  out: string;
}

function flag(name: string): string | undefined {
  const prefix = `--${name}=`;
  return process.argv.find((a) => a.startsWith(prefix))?.slice(prefix.length);
}

function parseVariants(spec: string): Variant[] {
  const text = spec.trim().startsWith('[') || spec.trim().startsWith('{') ? spec : fs.readFileSync(spec, 'utf8');
  const raw = JSON.parse(text) as unknown;
  const list = (Array.isArray(raw) ? raw : [raw]) as Variant[];
  const names = new Set<string>();
  for (const v of list) {
    if (!v || typeof v.name !== 'string' || !v.name) throw new Error(`every variant needs a name: ${JSON.stringify(v)}`);
    if (names.has(v.name)) throw new Error(`duplicate variant name ${v.name}`);
    names.add(v.name);
    for (const s of v.strategies ?? []) if (!['exact', 'semantic', 'hybrid'].includes(s)) throw new Error(`variant ${v.name}: unknown strategy ${s}`);
    if (v.env && Object.values(v.env).some((x) => typeof x !== 'string')) throw new Error(`variant ${v.name}: env values must be strings`);
  }
  return list;
}

export function qualityOptions(): Options {
  const sets = (flag('sets') ?? process.env.QUALITY_SETS ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  const unknown = sets.filter((s) => !ALL_SETS.includes(s));
  if (unknown.length) throw new Error(`unknown set(s) ${unknown.join(', ')}; choose from ${ALL_SETS.join(', ')}`);
  const chats = flag('chats') ?? process.env.QUALITY_CHATS;
  const variants = flag('variants') ?? process.env.QUALITY_VARIANTS;
  return {
    sets: sets.length ? sets : ALL_SETS,
    chats: chats ? Math.max(1, Number.parseInt(chats, 10)) : null,
    variants: variants ? parseVariants(variants) : DEFAULT_VARIANTS,
    out: path.resolve(flag('out') ?? process.env.QUALITY_OUT ?? DEFAULT_OUT),
  };
}

function buildSet(name: string, chats: number | null): LabelledSet {
  if (name === 'handwritten') return handwrittenSet();
  const cfg = GENERATED_SETS.find((g) => g.name === name)!;
  return generateSet({ ...cfg, chats: chats ?? cfg.chats });
}

/** One row source of a table: an engine variant × strategy, or a reference ranker. */
interface System {
  name: string;
  answers: Map<string, Answer>;
  fallbacks: number;
}

/** BM25 (two tokenizations), exact cosine and their RRF, per chat, over the same turn texts. */
async function referenceSystems(loaded: LoadedSet, modelFolder: string): Promise<System[]> {
  const set = loaded.set;
  const emb = loaded.embedder({ modelFolder });
  const out = { bm25: new Map<string, Answer>(), words: new Map<string, Answer>(), cosine: new Map<string, Answer>(), rrf: new Map<string, Answer>() };
  try {
    for (const chat of set.chats) {
      const turns = set.turns.filter((t) => t.chat === chat.id);
      const texts = turns.map((t) => t.content);
      const bm25 = new Bm25(texts, whitespaceTokens);
      const words = new Bm25(texts, wordTokens);
      const cosine = new ExactCosine(await emb.embed(texts));
      const ids = (docs: { index: number }[]) => docs.slice(0, 20).map((d) => turns[d.index].id);
      for (const q of set.questions.filter((x) => x.chat === chat.id)) {
        let t = performance.now();
        const b = bm25.search(q.question, 100);
        const bMs = performance.now() - t;
        out.bm25.set(q.id, { ids: ids(b), ms: bMs, fallback: null });
        t = performance.now();
        const w = words.search(q.question, 100);
        out.words.set(q.id, { ids: ids(w), ms: performance.now() - t, fallback: null });
        t = performance.now();
        const [vec] = await emb.embed([q.question]);
        const c = cosine.search(vec, 100);
        const cMs = performance.now() - t;
        out.cosine.set(q.id, { ids: ids(c), ms: cMs, fallback: null });
        t = performance.now();
        const f = rrf([b, c], 60, 20);
        out.rrf.set(q.id, { ids: ids(f), ms: bMs + cMs + (performance.now() - t), fallback: null });
      }
    }
  } finally {
    await emb.close();
  }
  return [
    { name: 'ref:bm25', answers: out.bm25, fallbacks: 0 },
    { name: 'ref:bm25-words', answers: out.words, fallbacks: 0 },
    { name: 'ref:cosine', answers: out.cosine, fallbacks: 0 },
    { name: 'ref:rrf', answers: out.rrf, fallbacks: 0 },
  ];
}

const f3 = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : '–');
const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : '–');

/** A Markdown table with aligned columns (numbers right-aligned), so the output pastes into the README as is. */
export function mdTable(headers: string[], rows: (string | number)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map(String))];
  const width = headers.map((_, i) => Math.max(...cells.map((r) => r[i].length), 3));
  const numeric = headers.map((_, i) => rows.length > 0 && rows.every((r) => /^[-–\d.]+$/.test(String(r[i]))));
  const line = (r: string[]) => `| ${r.map((c, i) => (numeric[i] ? c.padStart(width[i]) : c.padEnd(width[i]))).join(' | ')} |`;
  const sep = `|${width.map((w, i) => (numeric[i] ? `${'-'.repeat(w + 1)}:` : `${'-'.repeat(w + 2)}`)).join('|')}|`;
  return [line(cells[0]), sep, ...cells.slice(1).map(line)].join('\n');
}

interface SetReport {
  name: string;
  description: string;
  seed: number | null;
  memories: number;
  chats: number;
  questions: number;
  kinds: Record<string, number>;
  tags: Record<string, number>;
  checks: Record<string, unknown>;
  loadSeconds: { insert: number; reindex: number };
  variants: { name: string; env: Record<string, string>; settings: Record<string, unknown>; knobs: Record<string, unknown>; skipped: string | null; unknownEnv: string[]; reindex: VariantRun['reindex'] }[];
  systems: { name: string; fallbacks: number; slices: Record<string, SliceStats> }[];
  /** Per question: kind, tags and the rank of each evidence turn per system (null = not in the top 20). */
  perQuestion: { id: string; kind: string; tags: string[]; ranks: Record<string, (number | null)[]> }[];
}

/** Tokens the static model's vocabulary knows (WordPiece vocab of tokenizer.json), for the rare-token check. */
function modelVocabulary(folder: string): Set<string> | null {
  try {
    const tok = JSON.parse(fs.readFileSync(path.join(folder, 'tokenizer.json'), 'utf8')) as { model?: { vocab?: Record<string, number> } };
    return tok.model?.vocab ? new Set(Object.keys(tok.model.vocab)) : null;
  } catch {
    return null;
  }
}

function setChecks(set: LabelledSet, vocab: Set<string> | null): Record<string, unknown> {
  const rare = [...new Set(set.questions.map((q) => q.rareToken).filter((t): t is string => !!t))];
  const knownRare = vocab ? rare.filter((t) => vocab.has(t.toLowerCase())) : [];
  const evidenceTurns = new Set(set.questions.flatMap((q) => q.evidence));
  // Engram keeps one of several memories with the same text, so an evidence turn must be unique in its chat.
  const norm = (t: { chat: string; content: string }) => `${t.chat}|${t.content.trim().replace(/\s+/g, ' ').toLowerCase()}`;
  const copies = countBy(set.turns, (t) => [norm(t)]);
  const duplicated = set.turns.filter((t) => evidenceTurns.has(t.id) && copies[norm(t)] > 1).map((t) => t.id);
  return {
    evidenceTurnsWithDuplicateText: duplicated,
    rareTokens: rare.length,
    rareTokensKnownToModel: vocab ? knownRare : 'vocabulary not readable',
    evidenceTurns: evidenceTurns.size,
    meanEvidencePerQuestion: Number((set.questions.reduce((a, q) => a + q.evidence.length, 0) / Math.max(1, set.questions.length)).toFixed(2)),
    ...('droppedParaphrase' in set ? { droppedParaphraseQuestions: (set as { droppedParaphrase: number }).droppedParaphrase } : {}),
  };
}

function countBy<T>(xs: T[], key: (x: T) => string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of xs) for (const k of key(x)) out[k] = (out[k] ?? 0) + 1;
  return out;
}

async function measureSet(set: LabelledSet, opts: Options, modelFolder: string, vocab: Set<string> | null): Promise<SetReport> {
  const loaded = await LoadedSet.load(set, { modelFolder });
  try {
    const systems: System[] = [];
    const variants: SetReport['variants'] = [];
    for (const v of opts.variants) {
      const run = await loaded.run(v, { modelFolder });
      variants.push({ name: v.name, env: v.env ?? {}, settings: v.settings ?? {}, knobs: run.knobs, skipped: run.skipped, unknownEnv: run.unknownEnv, reindex: run.reindex });
      if (run.skipped) console.log(`variant ${v.name} skipped on ${set.name}: ${run.skipped}`);
      if (run.unknownEnv.length) console.log(`variant ${v.name}: env ${run.unknownEnv.join(', ')} not in this build's env schema (set in process.env only)`);
      for (const [strategy, answers] of run.answers) {
        systems.push({ name: `${v.name}:${strategy}`, answers, fallbacks: [...answers.values()].filter((a) => a.fallback).length });
      }
    }
    systems.push(...(await referenceSystems(loaded, modelFolder)));

    const scored = systems.map((s) => {
      const scores = new Map<string, QuestionScore>();
      const ms = new Map<string, number>();
      for (const q of set.questions) {
        const a = s.answers.get(q.id)!;
        scores.set(q.id, scoreAnswer(q.evidence, a.ids));
        ms.set(q.id, a.ms);
      }
      return { s, scores, slices: sliceStats(set.questions, scores, ms) };
    });
    return {
      name: set.name,
      description: set.description,
      seed: set.seed,
      memories: set.turns.length,
      chats: set.chats.length,
      questions: set.questions.length,
      kinds: countBy(set.questions, (q) => [q.kind]),
      tags: countBy(set.questions, (q) => q.tags),
      checks: setChecks(set, vocab),
      loadSeconds: { insert: Number(loaded.loadSeconds.insert.toFixed(2)), reindex: Number(loaded.loadSeconds.reindex.toFixed(2)) },
      variants,
      systems: scored.map(({ s, slices }) => ({ name: s.name, fallbacks: s.fallbacks, slices })),
      perQuestion: set.questions.map((q: SetQuestion) => ({ id: q.id, kind: q.kind, tags: q.tags, ranks: Object.fromEntries(scored.map(({ s, scores }) => [s.name, scores.get(q.id)!.ranks])) })),
    };
  } finally {
    loaded.dispose();
  }
}

function printSet(r: SetReport): void {
  console.log(`\n### ${r.name}: ${r.description}\n`);
  console.log(
    `${r.memories} memories in ${r.chats} chats (one API key each); ${r.questions} questions — ` +
      `${QUESTION_KINDS.map((k) => `${r.kinds[k] ?? 0} ${k}`).join(', ')}; tags: ${QUESTION_TAGS.map((t) => `${r.tags[t] ?? 0} ${t}`).join(', ')}. ` +
      `Load: insert ${r.loadSeconds.insert} s, reindex ${r.loadSeconds.reindex} s.`,
  );
  const known = r.checks.rareTokensKnownToModel;
  if (Array.isArray(known)) console.log(`Rare tokens: ${r.checks.rareTokens}, of which the static model knows ${known.length}${known.length ? ` (${known.join(', ')})` : ''}.`);
  const dup = r.checks.evidenceTurnsWithDuplicateText as string[];
  if (dup.length) console.log(`WARNING: ${dup.length} evidence turns repeat another turn's text in their chat (Engram returns only one of them): ${dup.slice(0, 5).join(', ')}`);
  const rows: (string | number)[][] = [];
  for (const slice of SLICES) {
    for (const s of r.systems) {
      const x = s.slices[slice.name];
      if (!x || x.n === 0) continue;
      rows.push([slice.name, x.n, s.name, f3(x.r5), f3(x.r10), f3(x.r20), f3(x.mrr), f2(x.p50ms)]);
    }
  }
  console.log('');
  console.log(mdTable(['slice', 'n', 'system', 'R@5', 'R@10', 'R@20', 'MRR', 'p50 ms'], rows));
  const fb = r.systems.filter((s) => s.fallbacks > 0);
  if (fb.length) console.log(`\nkeyword fallbacks (vector tier not used): ${fb.map((s) => `${s.name} ${s.fallbacks}`).join(', ')}`);
  console.log(`\n${issueChecks(r).join('\n')}`);
}

/** The two claims of issue #10, on this set (R@10 over all questions). */
function issueChecks(r: SetReport): string[] {
  const r10 = (name: string) => r.systems.find((s) => s.name === name)?.slices.all.r10;
  const out: string[] = [];
  for (const ref of ['ref:bm25', 'ref:bm25-words']) {
    const bm25 = r10(ref);
    for (const kw of ['engram:exact', 'kw-only:hybrid']) {
      const x = r10(kw);
      if (x !== undefined && bm25 !== undefined) out.push(`issue #10 (a) ${kw} R@10 ${f3(x)} vs ${ref} ${f3(bm25)}: ${x >= bm25 ? 'at least as good' : `LOSES by ${f3(bm25 - x)}`}`);
    }
  }
  const hybrid = r10('engram:hybrid');
  const inputs = ['engram:exact', 'kw-only:hybrid', 'engram:semantic'].map((n) => [n, r10(n)] as const).filter((p): p is readonly [string, number] => p[1] !== undefined);
  if (hybrid !== undefined && inputs.length) {
    const best = inputs.reduce((a, b) => (b[1] > a[1] ? b : a));
    out.push(`issue #10 (b) engram:hybrid R@10 ${f3(hybrid)} vs best single tier ${best[0]} ${f3(best[1])}: ${hybrid > best[1] ? 'beats both inputs' : hybrid === best[1] ? 'ties the better input' : `does NOT beat it (${f3(hybrid - best[1])})`}`);
  }
  return out;
}

function printSummary(reports: SetReport[]): void {
  const names = [...new Set(reports.flatMap((r) => r.systems.map((s) => s.name)))];
  const rows = names.map((n) => [
    n,
    ...reports.flatMap((r) => {
      const s = r.systems.find((x) => x.name === n)?.slices.all;
      return s ? [f3(s.r10), f3(s.mrr)] : ['–', '–'];
    }),
  ]);
  console.log('\n### Summary: R@10 and MRR over all questions, per set\n');
  console.log(mdTable(['system', ...reports.flatMap((r) => [`${r.name} R@10`, `${r.name} MRR`])], rows));
}

function gitRevision(): string | null {
  try {
    const rev = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], { cwd: REPO_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
      .split('\n')
      .map((l) => l.slice(3).trim())
      .filter(Boolean);
    return dirty.length ? `${rev} + uncommitted ${dirty.join(', ')}` : rev;
  } catch {
    return null;
  }
}

/** Prints per-set tables of evidence recall and MRR for every engine variant and reference, and writes bench/results/quality.json; never asserts. */
export async function runQualityBench(): Promise<void> {
  const opts = qualityOptions();
  const model = benchStaticModel();
  if (model.fixture) console.log('NOTE: the fixture model knows no English: semantic figures below say nothing about quality.');
  const vocab = modelVocabulary(model.folder);
  const started = performance.now();
  const revision = gitRevision();
  console.log(
    `Quality bench at ${revision ?? 'unknown revision'}: model ${model.label}; sets ${opts.sets.join(', ')}${opts.chats ? ` (first ${opts.chats} chats of generated sets)` : ''}; ` +
      `variants ${opts.variants.map((v) => `${v.name}${v.env ? ` env ${JSON.stringify(v.env)}` : ''}${v.settings ? ` settings ${JSON.stringify(v.settings)}` : ''}`).join('; ')}. ` +
      `Engine rows: RetrievalService.retrieve(key, {query, strategy, maxTokens: 16000, retentionDays: 0, limit: 20, scope: 'apiKey'}, {preview: true}).`,
  );
  const reports: SetReport[] = [];
  for (const name of opts.sets) {
    const t0 = performance.now();
    const set = buildSet(name, opts.chats);
    const report = await measureSet(set, opts, model.folder, vocab);
    reports.push(report);
    printSet(report);
    console.log(`(${name}: ${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  }
  printSummary(reports);

  const result = {
    bench: 'quality',
    when: new Date().toISOString(),
    revision,
    machine: { cpus: os.cpus().length, node: process.version, platform: `${os.platform()} ${os.arch()}` },
    model: model.label,
    seconds: Number(((performance.now() - started) / 1000).toFixed(1)),
    variants: opts.variants,
    sets: reports,
  };
  fs.mkdirSync(path.dirname(opts.out), { recursive: true });
  fs.writeFileSync(opts.out, `${JSON.stringify(result, null, 1)}\n`);
  console.log(`\nwrote ${path.relative(process.cwd(), opts.out) || opts.out} (${result.seconds} s)`);
}

if (require.main === module) {
  runQualityBench().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
