/**
 * Loads a labelled set into Engram through its real code path and asks Engram's RetrievalService
 * the set's questions, once per engine variant (a variant = env overrides + memory-settings
 * overrides + the strategies to run).
 *
 * Loading: a fresh temp DATA_DIR, openStorage (migrations included), MemoryService.upsertMany per
 * chat (one API key per chat, type `episodic`, metadata `{ date }`), then created_at/updated_at
 * set to the session's instant with a direct SQL UPDATE (the service has no way to set them), then
 * ReindexService.run() — the reindex job's own code — builds the sqlite-vec index with the static
 * model. That database is the set's pristine copy: each variant runs on its own file copy in its own
 * DATA_DIR, opened with the variant's env, so variants never see each other's settings.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { envSchema, loadEnv, type Env } from '../../src/config/env';
import { EmbeddingService } from '../../src/embedding/embedding.service';
import { createLogger, type Logger } from '../../src/logger';
import { ReindexService } from '../../src/memory/reindex.service';
import { rerankerFromEnv } from '../../src/memory/rerank';
import { RetrievalService } from '../../src/memory/retrieval.service';
import type { RetrievalStrategy } from '../../src/memory/retrieval.types';
import { DEFAULT_MEMORY_SETTINGS, memorySettingsUpdateSchema, type MemorySettingsUpdate } from '../../src/memory/settings';
import type { QueueLayer } from '../../src/queue/queues';
import { openStorage, type Storage } from '../../src/services';
import type { LabelledSet, SetQuestion } from './types';

export const STRATEGIES: RetrievalStrategy[] = ['exact', 'semantic', 'hybrid'];

/** One engine configuration to measure. */
export interface Variant {
  name: string;
  /** Raw env strings, as in a .env file (e.g. MEMORY_RRF_K: "30"); applied to the parsed Env and to process.env while the variant runs. */
  env?: Record<string, string>;
  /** Memory settings as PUT /api/settings/memory takes them (e.g. { hybridFusion: "…" } once that setting exists). */
  settings?: Record<string, unknown>;
  /** Strategies to run (default: exact, semantic, hybrid). */
  strategies?: RetrievalStrategy[];
  /**
   * Rebuild the keyword index with this FTS5 tokenizer on the variant's copy (e.g.
   * "porter unicode61 remove_diacritics 2"), to compare tokenizers (issue #10 item 2).
   */
  ftsTokenizer?: string;
}

/** One question's answer from one system: the set's turn ids, best first, and how long it took. */
export interface Answer {
  ids: string[];
  ms: number;
  fallback: string | null;
}

export interface VariantRun {
  variant: Variant;
  /** Why the variant did not run (e.g. a setting this build does not have). */
  skipped: string | null;
  /** Env keys of the variant that this build's env schema does not know (still set in process.env). */
  unknownEnv: string[];
  /** The retrieval knobs in effect. */
  knobs: Record<string, unknown>;
  /** strategy → question id → answer. */
  answers: Map<RetrievalStrategy, Map<string, Answer>>;
  reindex: { done: number; total: number; rebuilt: boolean | undefined; seconds: number };
}

const noop = async () => undefined;
const HOOKS = { progress: noop, checkpoint: noop };
const REINDEX_BATCH = 256;
/** Questions asked before the measured pass of each strategy (statement caches, model load). */
const WARMUP = 5;

/** The queue layer is never touched by ReindexService.run(); the bench needs no Redis. */
const NO_QUEUES = new Proxy({} as QueueLayer, {
  get(_t, prop) {
    throw new Error(`the quality bench has no queue layer (ReindexService touched queues.${String(prop)})`);
  },
});

export interface EngineOptions {
  /** The static model folder (MEMORY_STATIC_MODEL). */
  modelFolder: string;
  log?: Logger;
}

function envFor(dataDir: string, model: string, overrides: Record<string, string> = {}): Env {
  return loadEnv({ ...process.env, DATA_DIR: dataDir, LOG_LEVEL: 'silent', MEMORY_STATIC_MODEL: model, ...overrides });
}

/** The retrieval env knobs in effect (everything MEMORY_RRF_* / MEMORY_VEC_* / MEMORY_RERANK_TIMEOUT_MS), for the report. */
function knobsOf(env: Env): Record<string, unknown> {
  return Object.fromEntries(Object.entries(env).filter(([k]) => /^MEMORY_(RRF_|VEC_|FTS_|HYBRID_|RETRIEVAL_|KEYWORD_)/.test(k)));
}

/** Re-creates memory_fts (and its vocab view) with another tokenizer and rebuilds it from memories; the triggers address it by name. */
function rebuildFts(storage: Storage, tokenizer: string): void {
  if (!/^[a-z0-9_ ]+$/.test(tokenizer)) throw new Error(`ftsTokenizer ${JSON.stringify(tokenizer)}: letters, digits, spaces only`);
  storage.db.db.exec(`DROP TABLE IF EXISTS memory_fts_vocab; DROP TABLE memory_fts;
    CREATE VIRTUAL TABLE memory_fts USING fts5(content, key, fts_tenant, content = 'memories', content_rowid = 'memory_id', tokenize = '${tokenizer}');
    INSERT INTO memory_fts(memory_fts) VALUES ('rebuild');
    CREATE VIRTUAL TABLE memory_fts_vocab USING fts5vocab('memory_fts', 'row');`);
}

/** A set loaded once into a pristine database file, ready to be copied per variant. */
export class LoadedSet {
  private constructor(
    readonly set: LabelledSet,
    private readonly dir: string,
    /** Engram memory UUID → the set's turn id. */
    readonly turnOf: Map<string, string>,
    /** chat id → API key id. */
    readonly keyOf: Map<string, string>,
    readonly loadSeconds: { insert: number; reindex: number },
  ) {}

  /** Inserts every turn through MemoryService, back-dates it, and builds the vector index with ReindexService.run(). */
  static async load(set: LabelledSet, opts: EngineOptions): Promise<LoadedSet> {
    const log = opts.log ?? createLogger('silent', 'bench');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `engram-quality-${set.name}-`));
    const env = envFor(dir, opts.modelFolder);
    const storage = openStorage(env, log);
    const embedding = new EmbeddingService(env, { log });
    try {
      storage.settings.updateMemory({ embeddingSource: 'static', staticEnabled: true });
      const t0 = performance.now();
      const turnOf = new Map<string, string>();
      const keyOf = new Map(set.chats.map((c) => [c.id, `quality-${c.id.replace(/[^A-Za-z0-9]+/g, '-')}`]));
      const backdate = storage.db.db.prepare('UPDATE memories SET created_at = @at, updated_at = @at WHERE id = @id');
      for (const chat of set.chats) {
        const turns = set.turns.filter((t) => t.chat === chat.id);
        const apiKeyId = keyOf.get(chat.id)!;
        const changes = storage.memory.upsertMany(
          turns.map((t) => ({ apiKeyId, type: 'episodic' as const, content: t.content, metadata: { date: t.date } })),
          { source: 'import' },
          'import',
        );
        storage.db.db.transaction(() => {
          changes.forEach((c, i) => {
            turnOf.set(c.memory.id, turns[i].id);
            backdate.run({ at: turns[i].createdAt, id: c.memory.id });
          });
        })();
      }
      const insert = (performance.now() - t0) / 1000;
      const t1 = performance.now();
      const reindex = new ReindexService({ ...storage, embedding, queues: NO_QUEUES, log });
      const res = await reindex.run({ force: false, batchSize: REINDEX_BATCH }, HOOKS);
      if (res.phase !== 'done' || res.failed > 0 || res.done !== set.turns.length) {
        throw new Error(`reindex did not embed every turn: ${JSON.stringify(res)}`);
      }
      return new LoadedSet(set, dir, turnOf, keyOf, { insert, reindex: (performance.now() - t1) / 1000 });
    } finally {
      await embedding.close();
      storage.db.close();
    }
  }

  /** Runs every question of the set through RetrievalService for each of the variant's strategies, on a private copy of the database. */
  async run(variant: Variant, opts: EngineOptions, onlyQuestions?: SetQuestion[]): Promise<VariantRun> {
    const log = opts.log ?? createLogger('silent', 'bench');
    const strategies = variant.strategies ?? STRATEGIES;
    const known = new Set(Object.keys(envSchema.shape));
    const unknownEnv = Object.keys(variant.env ?? {}).filter((k) => !known.has(k));
    const empty: VariantRun = { variant, skipped: null, unknownEnv, knobs: {}, answers: new Map(), reindex: { done: 0, total: 0, rebuilt: undefined, seconds: 0 } };

    let settingsUpdate: MemorySettingsUpdate | null = null;
    if (variant.settings && Object.keys(variant.settings).length) {
      const parsed = memorySettingsUpdateSchema.safeParse(variant.settings);
      if (!parsed.success) {
        return { ...empty, skipped: `settings rejected by this build: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}` };
      }
      settingsUpdate = parsed.data;
    }

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `engram-quality-${this.set.name}-v-`));
    fs.copyFileSync(path.join(this.dir, 'engram.db'), path.join(dir, 'engram.db'));
    // Knobs read straight from process.env (not through Env) see the variant too; restored afterwards.
    const saved = Object.fromEntries(Object.keys(variant.env ?? {}).map((k) => [k, process.env[k]]));
    Object.assign(process.env, variant.env ?? {});
    let storage: Storage | null = null;
    let embedding: EmbeddingService | null = null;
    try {
      const env = envFor(dir, opts.modelFolder, variant.env);
      storage = openStorage(env, log);
      embedding = new EmbeddingService(env, { log });
      storage.settings.updateMemory({ embeddingSource: 'static', staticEnabled: true });
      if (settingsUpdate) storage.settings.updateMemory(settingsUpdate);
      if (variant.ftsTokenizer) rebuildFts(storage, variant.ftsTokenizer);
      // A no-op unless the variant changed the model or the quantization (then it rebuilds, as the job would).
      const t0 = performance.now();
      const r = await new ReindexService({ ...storage, embedding, queues: NO_QUEUES, log }).run({ force: false, batchSize: REINDEX_BATCH }, HOOKS);
      const reindex = { done: r.done, total: r.total, rebuilt: r.rebuilt, seconds: (performance.now() - t0) / 1000 };
      const retrieval = new RetrievalService({ env, log, db: storage.db.db, settings: storage.settings, embedding, vectors: storage.vectors, reranker: rerankerFromEnv(env, log) });
      const questions = onlyQuestions ?? this.set.questions;
      const answers = new Map<RetrievalStrategy, Map<string, Answer>>();
      for (const strategy of strategies) {
        const ask = async (q: SetQuestion): Promise<Answer> => {
          const t = performance.now();
          const res = await retrieval.retrieve(this.keyOf.get(q.chat)!, { query: q.question, strategy, maxTokens: 16000, retentionDays: 0, limit: 20, scope: 'apiKey' }, { preview: true });
          const ms = performance.now() - t;
          return { ids: res.items.map((it) => this.turnOf.get(it.memory.id) ?? `?${it.memory.id}`), ms, fallback: res.resolution.fallbackReason };
        };
        // Each question is new text: no query vector cached from another strategy's pass.
        embedding.clearCache();
        for (const q of questions.slice(0, WARMUP)) await ask({ ...q, question: `${q.question} warm-up` });
        embedding.clearCache();
        const byQ = new Map<string, Answer>();
        for (const q of questions) byQ.set(q.id, await ask(q));
        answers.set(strategy, byQ);
      }
      return { ...empty, knobs: knobsOf(env), answers, reindex };
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
      await embedding?.close();
      storage?.db.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }

  /** Embeds texts with the base configuration's static model (for the in-process references). */
  embedder(opts: EngineOptions): { embed: (texts: string[]) => Promise<(Float32Array | null)[]>; close: () => Promise<void> } {
    const log = opts.log ?? createLogger('silent', 'bench');
    const embedding = new EmbeddingService(envFor(this.dir, opts.modelFolder), { log });
    const settings = { ...DEFAULT_MEMORY_SETTINGS, embeddingSource: 'static' as const, staticEnabled: true };
    return {
      embed: async (texts) => {
        const out: (Float32Array | null)[] = [];
        for (let i = 0; i < texts.length; i += 512) out.push(...(await embedding.embedMany(texts.slice(i, i + 512), settings)).vectors);
        return out;
      },
      close: () => embedding.close(),
    };
  }

  dispose(): void {
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
