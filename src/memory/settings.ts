import { z } from 'zod';
import { nowIso } from '../db/connection';
import { SettingsRepository } from './settings.repository';
import type { Db } from '../db/connection';

/** Memory settings, API field names as in the original (digest §1.5). */
export interface MemorySettings {
  enabled: boolean;
  maxTokens: number;
  retentionDays: number;
  strategy: 'recent' | 'semantic' | 'hybrid';
  /** Stored and returned for compatibility only: Engram has no skills feature. */
  skillsEnabled: boolean;
  embeddingSource: 'remote' | 'static' | 'transformers' | 'auto';
  embeddingProviderModel: string | null;
  transformersEnabled: boolean;
  staticEnabled: boolean;
  rerankEnabled: boolean;
  rerankProviderModel: string | null;
  vectorStore: 'sqlite-vec' | 'qdrant' | 'auto';
  primaryBackend: string;
  fallbackBackends: string[];
  backendConfigs: Record<string, Record<string, unknown>>;
  customBaseUrl: string | null;
  customModelId: string | null;
  /** Engram addition: mine the assistant's reply too (off: only the user's own words become facts). */
  extractFromAssistant: boolean;
  /** The original's MemoryConfig field, now real: schedules compact-memories per tenant over compactFactor × maxTokens. */
  autoSummarize: boolean;
  /** A tenant is compacted when its memories exceed this many injection budgets. */
  compactFactor: number;
  /** How summaries are written: rule-based lines, or by the upstream model (falling back to rules on any failure). */
  summaryMode: 'rules' | 'llm';
  /** The upstream model asked for summaries in summaryMode "llm". */
  summaryModel: string;
  /** Engram addition (issue #10): how hybrid fuses its keyword and vector rankings. */
  hybridFusion: HybridFusion;
  /** Keyword tier's weight in the fusion; null = the fusion's default (rrf: env MEMORY_RRF_FTS_WEIGHT). */
  hybridFtsWeight: number | null;
  /** Vector tier's weight in the fusion; null = the fusion's default (rrf: env MEMORY_RRF_VECTOR_WEIGHT). */
  hybridVectorWeight: number | null;
  /** Issue #10 item 4 (convex only): keyword candidates whose bm25 ÷ Σ idf is below this drop out; null = off (default 0.1). */
  hybridKeywordFloor: number | null;
  /** Issue #10 item 4 (convex only): vector hits whose min-max normalised cosine is below this drop out; null = off. */
  hybridVectorFloor: number | null;
  /** Issue #10 item 4: added to the fused score of memories dated inside the window a question names ("in May 2023"); null = off (default 0.3). */
  hybridTemporalBoost: number | null;
  /** Issue #10 item 4 (convex only): weight (× the keyword weight) of an RM3 expansion from the top keyword hits; null = off. */
  hybridPrfWeight: number | null;
}

export const HYBRID_FUSIONS = ['rrf', 'convex'] as const;
export type HybridFusion = (typeof HYBRID_FUSIONS)[number];
/** Largest fusion weight accepted (as the env's MEMORY_RRF_* weights). */
export const MAX_FUSION_WEIGHT = 100;

export const DEFAULT_MEMORY_SETTINGS: Readonly<MemorySettings> = Object.freeze({
  enabled: false,
  maxTokens: 2000,
  retentionDays: 30,
  strategy: 'hybrid',
  skillsEnabled: true,
  embeddingSource: 'auto',
  embeddingProviderModel: null,
  transformersEnabled: false,
  staticEnabled: false,
  rerankEnabled: false,
  rerankProviderModel: null,
  vectorStore: 'auto',
  primaryBackend: 'sqlite',
  fallbackBackends: [],
  backendConfigs: {},
  customBaseUrl: null,
  customModelId: null,
  extractFromAssistant: false,
  autoSummarize: false,
  compactFactor: 4,
  summaryMode: 'rules',
  summaryModel: 'gpt-4o-mini',
  hybridFusion: 'convex',
  hybridFtsWeight: null,
  hybridVectorWeight: null,
  // Issue #10 item 4: on by default, the pair that won on every labelled set (bench/README.md, "Issue #10 item 4").
  hybridKeywordFloor: 0.1,
  hybridVectorFloor: null,
  hybridTemporalBoost: 0.3,
  hybridPrfWeight: null,
});

/** API field → stored settings key (the original's keys). */
export const SETTING_KEYS: Record<keyof MemorySettings, string> = {
  enabled: 'memoryEnabled',
  maxTokens: 'memoryMaxTokens',
  retentionDays: 'memoryRetentionDays',
  strategy: 'memoryStrategy',
  skillsEnabled: 'skillsEnabled',
  embeddingSource: 'memoryEmbeddingSource',
  embeddingProviderModel: 'memoryEmbeddingProviderModel',
  transformersEnabled: 'memoryTransformersEnabled',
  staticEnabled: 'memoryStaticEnabled',
  rerankEnabled: 'memoryRerankEnabled',
  rerankProviderModel: 'memoryRerankProviderModel',
  vectorStore: 'memoryVectorStore',
  primaryBackend: 'memoryPrimaryBackend',
  fallbackBackends: 'memoryFallbackBackends',
  backendConfigs: 'memoryBackendConfigs',
  customBaseUrl: 'memoryEmbeddingCustomBaseUrl',
  customModelId: 'memoryEmbeddingCustomModelId',
  extractFromAssistant: 'memoryExtractFromAssistant',
  autoSummarize: 'memoryAutoSummarize',
  compactFactor: 'memoryCompactFactor',
  summaryMode: 'memorySummaryMode',
  summaryModel: 'memorySummaryModel',
  hybridFusion: 'memoryHybridFusion',
  hybridFtsWeight: 'memoryHybridFtsWeight',
  hybridVectorWeight: 'memoryHybridVectorWeight',
  hybridKeywordFloor: 'memoryHybridKeywordFloor',
  hybridVectorFloor: 'memoryHybridVectorFloor',
  hybridTemporalBoost: 'memoryHybridTemporalBoost',
  hybridPrfWeight: 'memoryHybridPrfWeight',
};

const isBool = (v: unknown): v is boolean => typeof v === 'boolean';
const clampInt = (v: unknown, lo: number, hi: number, def: number) => {
  const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN;
  if (!Number.isFinite(n)) return def;
  return Math.min(hi, Math.max(lo, Math.round(n)));
};
const nonEmpty = (v: unknown): string | null => (typeof v === 'string' && v.trim() !== '' ? v.trim() : null);
const weightOrNull = (v: unknown): number | null =>
  typeof v === 'number' && Number.isFinite(v) && v >= 0 && v <= MAX_FUSION_WEIGHT ? v : null;
const floorOrNull = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) && v >= 0 && v <= 1 ? v : null);
const oneOf = <T extends string>(v: unknown, allowed: readonly T[], def: T): T =>
  typeof v === 'string' && (allowed as readonly string[]).includes(v) ? (v as T) : def;

/** Stored key/value map → normalised settings (defaults and clamps of the original). */
export function normalizeMemorySettings(raw: Record<string, unknown>): MemorySettings {
  const d = DEFAULT_MEMORY_SETTINGS;
  const g = (f: keyof MemorySettings) => raw[SETTING_KEYS[f]];
  const backendConfigs = g('backendConfigs');
  const fallbacks = g('fallbackBackends');
  const base = nonEmpty(g('customBaseUrl'));
  return {
    enabled: isBool(g('enabled')) ? (g('enabled') as boolean) : d.enabled,
    maxTokens: clampInt(g('maxTokens'), 0, 16000, d.maxTokens),
    retentionDays: clampInt(g('retentionDays'), 1, 365, d.retentionDays),
    strategy: oneOf(g('strategy'), ['recent', 'semantic', 'hybrid'] as const, d.strategy),
    skillsEnabled: isBool(g('skillsEnabled')) ? (g('skillsEnabled') as boolean) : d.skillsEnabled,
    embeddingSource: oneOf(g('embeddingSource'), ['remote', 'static', 'transformers', 'auto'] as const, d.embeddingSource),
    embeddingProviderModel: nonEmpty(g('embeddingProviderModel')),
    transformersEnabled: isBool(g('transformersEnabled')) ? (g('transformersEnabled') as boolean) : d.transformersEnabled,
    staticEnabled: isBool(g('staticEnabled')) ? (g('staticEnabled') as boolean) : d.staticEnabled,
    rerankEnabled: isBool(g('rerankEnabled')) ? (g('rerankEnabled') as boolean) : d.rerankEnabled,
    rerankProviderModel: nonEmpty(g('rerankProviderModel')),
    vectorStore: oneOf(g('vectorStore'), ['sqlite-vec', 'qdrant', 'auto'] as const, d.vectorStore),
    primaryBackend: nonEmpty(g('primaryBackend')) ?? d.primaryBackend,
    fallbackBackends: Array.isArray(fallbacks) ? fallbacks.filter((x): x is string => typeof x === 'string') : [],
    backendConfigs:
      backendConfigs && typeof backendConfigs === 'object' && !Array.isArray(backendConfigs)
        ? (backendConfigs as Record<string, Record<string, unknown>>)
        : {},
    customBaseUrl: base ? base.replace(/\/+$/, '') : null,
    customModelId: nonEmpty(g('customModelId')),
    extractFromAssistant: isBool(g('extractFromAssistant')) ? (g('extractFromAssistant') as boolean) : d.extractFromAssistant,
    autoSummarize: isBool(g('autoSummarize')) ? (g('autoSummarize') as boolean) : d.autoSummarize,
    compactFactor: clampInt(g('compactFactor'), 2, 100, d.compactFactor),
    summaryMode: oneOf(g('summaryMode'), ['rules', 'llm'] as const, d.summaryMode),
    summaryModel: nonEmpty(g('summaryModel')) ?? d.summaryModel,
    hybridFusion: oneOf(g('hybridFusion'), HYBRID_FUSIONS, d.hybridFusion),
    hybridFtsWeight: weightOrNull(g('hybridFtsWeight')),
    hybridVectorWeight: weightOrNull(g('hybridVectorWeight')),
    // Never stored → the default; stored null → off.
    hybridKeywordFloor: g('hybridKeywordFloor') === undefined ? d.hybridKeywordFloor : floorOrNull(g('hybridKeywordFloor')),
    hybridVectorFloor: g('hybridVectorFloor') === undefined ? d.hybridVectorFloor : floorOrNull(g('hybridVectorFloor')),
    hybridTemporalBoost: g('hybridTemporalBoost') === undefined ? d.hybridTemporalBoost : floorOrNull(g('hybridTemporalBoost')),
    hybridPrfWeight: g('hybridPrfWeight') === undefined ? d.hybridPrfWeight : floorOrNull(g('hybridPrfWeight')),
  };
}

const nullableString = z
  .string()
  .max(512)
  .nullable()
  .transform((v) => (v === null || v.trim() === '' ? null : v.trim()));

/** A fusion weight: 0 (the tier does not vote) up to MAX_FUSION_WEIGHT. */
export const fusionWeight = z.number().min(0).max(MAX_FUSION_WEIGHT);

/** A relevance floor on a normalised score (issue #10 item 4): 0–1. */
export const scoreFloor = z.number().min(0).max(1);

/** PUT /api/settings/memory body: strict, every field optional (the original's schema, plus Engram's additions). */
export const memorySettingsUpdateSchema = z.strictObject({
  enabled: z.boolean().optional(),
  maxTokens: z.number().int().min(0).max(16000).optional(),
  retentionDays: z.number().int().min(1).max(365).optional(),
  strategy: z.enum(['recent', 'semantic', 'hybrid']).optional(),
  skillsEnabled: z.boolean().optional(),
  embeddingSource: z.enum(['remote', 'static', 'transformers', 'auto']).optional(),
  embeddingProviderModel: nullableString.optional(),
  transformersEnabled: z.boolean().optional(),
  staticEnabled: z.boolean().optional(),
  rerankEnabled: z.boolean().optional(),
  rerankProviderModel: nullableString.optional(),
  vectorStore: z.enum(['sqlite-vec', 'qdrant', 'auto']).optional(),
  primaryBackend: z.string().min(1).max(128).optional(),
  fallbackBackends: z.array(z.string().min(1).max(128)).max(16).optional(),
  backendConfigs: z.record(z.string(), z.record(z.string(), z.unknown())).optional(),
  customBaseUrl: nullableString.optional(),
  customModelId: nullableString.optional(),
  extractFromAssistant: z.boolean().optional(),
  autoSummarize: z.boolean().optional(),
  compactFactor: z.number().int().min(2).max(100).optional(),
  summaryMode: z.enum(['rules', 'llm']).optional(),
  summaryModel: z.string().trim().min(1).max(256).optional(),
  hybridFusion: z.enum(HYBRID_FUSIONS).optional(),
  hybridFtsWeight: fusionWeight.nullable().optional(),
  hybridVectorWeight: fusionWeight.nullable().optional(),
  hybridKeywordFloor: scoreFloor.nullable().optional(),
  hybridVectorFloor: scoreFloor.nullable().optional(),
  hybridTemporalBoost: scoreFloor.nullable().optional(),
  hybridPrfWeight: scoreFloor.nullable().optional(),
}).refine((b) => !(b.hybridFtsWeight === 0 && b.hybridVectorWeight === 0), {
  message: 'hybridFtsWeight and hybridVectorWeight cannot both be 0 (nothing would be ranked)',
  path: ['hybridVectorWeight'],
});
export type MemorySettingsUpdate = z.infer<typeof memorySettingsUpdateSchema>;

/** API fields → stored keys, omitting undefined. */
export function toMemorySettingsUpdates(partial: MemorySettingsUpdate): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(partial)) {
    if (value === undefined) continue;
    const key = SETTING_KEYS[field as keyof MemorySettings];
    if (key) out[key] = field === 'customBaseUrl' && typeof value === 'string' ? value.replace(/\/+$/, '') : value;
  }
  return out;
}

/** Settings read fresh from SQLite, cached for a short TTL so api and workers never disagree for long. */
export class SettingsService {
  private readonly repo: SettingsRepository;
  private cached: { at: number; value: MemorySettings; raw: Record<string, unknown> } | null = null;

  constructor(
    db: Db,
    private readonly ttlMs: number,
  ) {
    this.repo = new SettingsRepository(db);
  }

  /** All stored keys (memory and others, e.g. qdrant*). */
  raw(): Record<string, unknown> {
    return this.load().raw;
  }

  memory(): MemorySettings {
    return this.load().value;
  }

  /** Settings read now, bypassing the short cache (jobs: a reindex started by a settings change must see it). */
  memoryFresh(): MemorySettings {
    this.cached = null;
    return this.load().value;
  }

  private load() {
    if (this.cached && Date.now() - this.cached.at < this.ttlMs) return this.cached;
    const raw = this.repo.all();
    this.cached = { at: Date.now(), value: normalizeMemorySettings(raw), raw };
    return this.cached;
  }

  /** Persists mapped keys and returns the normalised settings. */
  updateMemory(partial: MemorySettingsUpdate): MemorySettings {
    this.setRaw(toMemorySettingsUpdates(partial));
    return this.memory();
  }

  setRaw(values: Record<string, unknown>): void {
    if (Object.keys(values).length) this.repo.setMany(values, nowIso());
    this.cached = null;
  }
}
