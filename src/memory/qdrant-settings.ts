import { z } from 'zod';
import type { Env } from '../config/env';
import { checkOutboundUrl, OutboundUrlError } from '../net/url-policy';
import type { QdrantConfig, QdrantQuantization } from '../vector/qdrant.store';
import { SETTING_KEYS } from './settings';
import type { SettingsService } from './settings';

/** The original's stored keys (digest §1.5). */
export const QDRANT_KEYS = {
  enabled: 'qdrantEnabled',
  host: 'qdrantHost',
  port: 'qdrantPort',
  apiKey: 'qdrantApiKey',
  collection: 'qdrantCollection',
  embeddingModel: 'qdrantEmbeddingModel',
  quantization: 'qdrantQuantization',
} as const;

export const DEFAULT_QDRANT_COLLECTION = 'engram_memory';
export const DEFAULT_QDRANT_PORT = 6333;

/** Normalised Qdrant settings (api key included: never answer this object as is). */
export interface QdrantSettings {
  enabled: boolean;
  host: string;
  port: number;
  apiKey: string | null;
  collection: string;
  embeddingModel: string;
  quantization: QdrantQuantization;
}

/** What GET/PUT /api/settings/qdrant answer: the key masked as in the original (`***` + last 4) and never in full. */
export interface MaskedQdrantSettings extends Omit<QdrantSettings, 'apiKey'> {
  hasApiKey: boolean;
  apiKeyMasked: string | null;
}

const nonEmpty = (v: unknown): string | null => (typeof v === 'string' && v.trim() !== '' ? v.trim() : null);

/** Stored keys + env → settings (the original's normalisation, §8.3). */
export function normalizeQdrantSettings(raw: Record<string, unknown>, env: Pick<Env, 'QDRANT_HOST' | 'QDRANT_PORT' | 'QDRANT_API_KEY' | 'QDRANT_COLLECTION'>): QdrantSettings {
  const portRaw = raw[QDRANT_KEYS.port];
  const portOf = (v: unknown): number | null => {
    const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v.trim()) ? Number(v) : NaN;
    return Number.isInteger(n) && n >= 1 && n <= 65535 ? n : null;
  };
  const port = portRaw !== undefined && portRaw !== null ? (portOf(portRaw) ?? DEFAULT_QDRANT_PORT) : (portOf(env.QDRANT_PORT) ?? DEFAULT_QDRANT_PORT);
  const q = raw[QDRANT_KEYS.quantization];
  return {
    enabled: raw[QDRANT_KEYS.enabled] === true,
    host: nonEmpty(raw[QDRANT_KEYS.host]) ?? env.QDRANT_HOST ?? '',
    port,
    apiKey: nonEmpty(raw[QDRANT_KEYS.apiKey]) ?? env.QDRANT_API_KEY ?? null,
    collection: nonEmpty(raw[QDRANT_KEYS.collection]) ?? env.QDRANT_COLLECTION ?? DEFAULT_QDRANT_COLLECTION,
    embeddingModel: nonEmpty(raw[QDRANT_KEYS.embeddingModel]) ?? 'same-as-memory',
    quantization: q === 'int8' || q === 'binary' ? q : 'none',
  };
}

/** `***` + the last 4 characters (the original's mask); null without a key. */
export function maskApiKey(key: string | null): string | null {
  if (!key) return null;
  return `***${key.length > 8 ? key.slice(-4) : ''}`;
}

export function maskQdrantSettings(s: QdrantSettings): MaskedQdrantSettings {
  const { apiKey, ...rest } = s;
  return { ...rest, hasApiKey: !!apiKey, apiKeyMasked: maskApiKey(apiKey) };
}

/** The base URL: strip trailing slashes, add http:// without a scheme, the configured port when the URL has none (§8.3). */
export function qdrantBaseUrl(host: string, port: number): string | null {
  const h = host.trim().replace(/\/+$/, '');
  if (!h) return null;
  const withScheme = /^https?:\/\//i.test(h) ? h : `http://${h}`;
  const url = checkOutboundUrl(withScheme, { allowPrivate: true });
  if (!url.port) url.port = String(port);
  return url.toString().replace(/\/+$/, '');
}

/** The host field must make a URL the outbound policy accepts (http(s), no credentials, no metadata address). */
const hostSchema = z
  .string()
  .max(512)
  .superRefine((v, ctx) => {
    if (v.trim() === '') return;
    try {
      qdrantBaseUrl(v, DEFAULT_QDRANT_PORT);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: err instanceof OutboundUrlError ? err.message : 'not a valid host or URL' });
    }
  });

/** PUT /api/settings/qdrant: strict, every field optional; `apiKey: ""` removes the key. */
export const qdrantSettingsUpdateSchema = z.strictObject({
  enabled: z.boolean().optional(),
  host: hostSchema.optional(),
  port: z.number().int().min(1).max(65535).optional(),
  collection: z
    .string()
    .min(1)
    .max(100)
    .regex(/^[A-Za-z0-9_-]+$/, 'letters, digits, _ and - only')
    .optional(),
  embeddingModel: z.string().min(1).max(256).optional(),
  quantization: z.enum(['none', 'int8', 'binary']).optional(),
  apiKey: z.string().max(1024).optional(),
});
export type QdrantSettingsUpdate = z.infer<typeof qdrantSettingsUpdateSchema>;

/** The Qdrant settings of one process: reads (short cache of SettingsService), writes, and the store's config. */
export class QdrantSettingsService {
  constructor(
    private readonly settings: SettingsService,
    private readonly env: Env,
  ) {}

  /** The settings in effect; `fresh` bypasses the short settings cache (jobs: another process may just have changed them). */
  get(fresh = false): QdrantSettings {
    if (fresh) this.settings.memoryFresh();
    return normalizeQdrantSettings(this.settings.raw(), this.env);
  }

  masked(): MaskedQdrantSettings {
    return maskQdrantSettings(this.get());
  }

  /** Persists the given fields; enabling sets memoryVectorStore=qdrant, disabling resets it to auto (#5597). */
  update(body: QdrantSettingsUpdate): MaskedQdrantSettings {
    const values: Record<string, unknown> = {};
    if (body.enabled !== undefined) {
      values[QDRANT_KEYS.enabled] = body.enabled;
      values[SETTING_KEYS.vectorStore] = body.enabled ? 'qdrant' : 'auto';
    }
    if (body.host !== undefined) values[QDRANT_KEYS.host] = body.host.trim();
    if (body.port !== undefined) values[QDRANT_KEYS.port] = body.port;
    if (body.collection !== undefined) values[QDRANT_KEYS.collection] = body.collection;
    if (body.embeddingModel !== undefined) values[QDRANT_KEYS.embeddingModel] = body.embeddingModel;
    if (body.quantization !== undefined) values[QDRANT_KEYS.quantization] = body.quantization;
    if (body.apiKey !== undefined) values[QDRANT_KEYS.apiKey] = body.apiKey.trim() === '' ? null : body.apiKey.trim();
    this.settings.setRaw(values);
    return this.masked();
  }

  /** The store's configuration from the settings in effect. */
  config(): QdrantConfig {
    const s = this.get();
    let url: string | null = null;
    try {
      url = qdrantBaseUrl(s.host, s.port);
    } catch {
      url = null;
    }
    return {
      enabled: s.enabled,
      url,
      apiKey: s.apiKey,
      collection: s.collection,
      quantization: s.quantization,
      timeoutMs: this.env.QDRANT_TIMEOUT_MS,
      searchTimeoutMs: this.env.QDRANT_SEARCH_TIMEOUT_MS,
    };
  }

  /** Qdrant is the configured vector tier (memoryVectorStore=qdrant and enabled with a host). */
  selected(): boolean {
    const c = this.config();
    return this.settings.memory().vectorStore === 'qdrant' && c.enabled && c.url !== null;
  }

  /** Qdrant receives writes (enabled with a host), whatever the retrieval tier; `fresh` reads SQLite now. */
  syncing(fresh = false): boolean {
    if (fresh) this.settings.memoryFresh();
    const c = this.config();
    return c.enabled && c.url !== null;
  }
}
