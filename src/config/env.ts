import os from 'node:os';
import path from 'node:path';
import proxyaddr from 'proxy-addr';
import { z } from 'zod';
import { QUEUE_NAMES, type QueueName } from './queue-names';

export { QUEUE_NAMES, type QueueName };

/** The memory this process may use: its cgroup's limit (a container's memory limit) when it has one, else the machine's. */
export function memoryLimitBytes(): number {
  const total = os.totalmem();
  // Node ≥ 19.6; an unconstrained process reports 0 or a huge number (2^64 on cgroup v2's "max").
  const constrained = typeof process.constrainedMemory === 'function' ? process.constrainedMemory() : undefined;
  return constrained !== undefined && constrained > 0 && constrained < total ? constrained : total;
}

/**
 * MEMORY_VEC_SCAN_CACHE_MB's 'auto': a quarter of `limitBytes`, at most 256 MB. A 100k-vector key of
 * 384 dimensions takes ~186 MB (float32 and int8 rows), so 256 keeps one such key in memory; a 512 MB
 * container gets 128 MB rather than a budget that alone would push it towards its limit.
 */
export function autoVecScanCacheMb(limitBytes: number): number {
  return Math.max(0, Math.min(256, Math.floor(limitBytes / 4 / 1_048_576)));
}

const TRUE = new Set(['true', '1', 'yes', 'on']);
const FALSE = new Set(['false', '0', 'no', 'off', '']);

/** A boolean env var: true|false|1|0|yes|no|on|off (case-insensitive). */
const envBool = (def: boolean) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined) return def;
      const s = v.trim().toLowerCase();
      if (TRUE.has(s)) return true;
      if (FALSE.has(s)) return false;
      ctx.addIssue({ code: 'custom', message: 'expected one of true|false|1|0|yes|no|on|off' });
      return z.NEVER;
    });

/**
 * One entry of a TRUST_PROXY list as express will take it (a name, an address, address/prefix, IPv4 address/netmask):
 * asked of proxy-addr itself, which express compiles `trust proxy` with, so what passes here cannot fail at startup.
 */
const trustEntry = (e: string): boolean => {
  try {
    proxyaddr.compile([e]);
    return true;
  } catch {
    return false;
  }
};

/**
 * Express's `trust proxy`: whose X-Forwarded-For names the client (the auth brake counts that address). `false`: no
 * one's, the peer address is the client; a number: that many hops from the peer; `true`: anyone's (only behind a proxy
 * that overwrites the header); else a comma list of loopback|linklocal|uniquelocal, addresses and subnets.
 */
const trustProxy = z
  .string()
  .optional()
  .transform((v, ctx): boolean | number | string[] => {
    const s = (v ?? '').trim().toLowerCase();
    if (s === '') return ['loopback'];
    if (s === 'true') return true;
    if (s === 'false') return false;
    if (/^\d+$/.test(s)) return Number(s);
    const entries = s.split(',').map((e) => e.trim()).filter((e) => e !== '');
    const bad = entries.filter((e) => !trustEntry(e));
    if (entries.length === 0 || bad.length > 0) {
      ctx.addIssue({ code: 'custom', message: `expected true|false, a hop count, or a comma list of loopback|linklocal|uniquelocal, addresses and subnets${bad.length ? ` (not one: ${bad.join(', ')})` : ''}` });
      return z.NEVER;
    }
    return entries;
  });

const int = (def: number, min: number, max: number) => z.coerce.number().int().min(min).max(max).default(def);
/** A job schedule's interval: 0 (off) or 1 s to 1 day. */
const scheduleMs = (def: number) =>
  z.coerce.number().int().refine((n) => n === 0 || (n >= 1000 && n <= 86_400_000), 'expected 0 (off) or 1000-86400000').default(def);
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));


/** Every variable Engram reads; `.env.example` documents each one. */
export const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  PORT: int(20128, 0, 65535),
  HOST: z.string().min(1).default('127.0.0.1'),
  /**
   * The api's V8 old generation may grow to (1 + this/100) × what its last full collection left live before the
   * next one (src/heap-growth.ts); 0 = V8's own factor (up to 4×). Measured (bench proxy-targets, memory on):
   * V8's own let the heap reach ~2.5× its live size under load.
   */
  API_HEAP_GROWING_PERCENT: int(30, 0, 1000),
  DATA_DIR: z.string().min(1).default('./data'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * The api's and worker's log lines are buffered and written together at least this often (sooner once 4 KB wait),
   * and on exit; 0 = one write per line. A process killed with SIGKILL loses at most this many ms of lines.
   * Measured (bench proxy-targets, memory off): one write per access-log line cost the api ~14 µs per chat.
   */
  LOG_FLUSH_MS: int(100, 0, 10_000),
  MANAGEMENT_TOKEN: optionalString.pipe(z.string().min(16, 'must be at least 16 characters').optional()),
  BODY_LIMIT_BYTES: int(1_048_576, 1024, 64 * 1_048_576),
  PROXY_BODY_LIMIT_BYTES: int(20 * 1_048_576, 1024, 256 * 1_048_576),
  SHUTDOWN_GRACE_MS: int(10_000, 0, 600_000),
  /** Brute-force brake (src/http/auth-throttle.ts): wrong credentials one IP may present per window before it is refused (429) for AUTH_BLOCK_MS; 0 = off. */
  AUTH_FAILURE_LIMIT: int(20, 0, 1_000_000),
  AUTH_FAILURE_WINDOW_MS: int(600_000, 1000, 86_400_000),
  AUTH_BLOCK_MS: int(900_000, 1000, 86_400_000),
  TRUST_PROXY: trustProxy,
  /** `/metrics` without the management token (a scraper on a private network that cannot send one); off by default. */
  METRICS_PUBLIC: envBool(false),
  SQLITE_BUSY_TIMEOUT_MS: int(5000, 5000, 120_000),
  /**
   * The api's SQLite wal_autocheckpoint, in pages: its commits checkpoint the WAL only once it is this long. The workers
   * keep SQLite's 1000, so while one runs it checkpoints and the api's chats never wait on a checkpoint's copy and fsyncs;
   * without a worker the api still bounds the WAL (~16 MB at the default).
   */
  API_WAL_AUTOCHECKPOINT_PAGES: int(4000, 100, 1_000_000),
  VECTOR_STORE_DISABLE_VEC: envBool(false),
  MEMORY_CACHE_MAX: int(500, 1, 1_000_000),
  MEMORY_CACHE_TTL_MS: int(60_000, 1, 86_400_000),
  SETTINGS_CACHE_TTL_MS: int(2000, 0, 600_000),

  REDIS_URL: optionalString.pipe(z.url({ protocol: /^rediss?$/, error: 'expected a redis:// or rediss:// URL' }).optional()),
  QUEUE_PREFIX: z.string().regex(/^[A-Za-z0-9_.-]+$/, 'expected letters, digits, _ . -').default('engram'),
  REDIS_COMMAND_TIMEOUT_MS: int(500, 50, 60_000),
  WORKER_QUEUES: z
    .string()
    .default('all')
    .transform((v, ctx) => {
      const parts = v.split(',').map((s) => s.trim()).filter(Boolean);
      if (parts.length === 0 || parts.includes('all')) return [...QUEUE_NAMES];
      const bad = parts.filter((p) => !(QUEUE_NAMES as readonly string[]).includes(p));
      if (bad.length) {
        ctx.addIssue({ code: 'custom', message: `unknown queue(s) ${bad.join(', ')}; expected all or a list of ${QUEUE_NAMES.join(', ')}` });
        return z.NEVER;
      }
      return parts as QueueName[];
    }),
  WORKER_CONCURRENCY: z
    .string()
    .default('')
    .transform((v, ctx) => {
      const out: Partial<Record<QueueName, number>> = {};
      for (const part of v.split(',').map((s) => s.trim()).filter(Boolean)) {
        const m = /^([a-z]+)=(\d+)$/.exec(part);
        if (!m || !(QUEUE_NAMES as readonly string[]).includes(m[1]) || Number(m[2]) < 1 || Number(m[2]) > 256) {
          ctx.addIssue({ code: 'custom', message: `expected queue=n pairs (n 1-256), got "${part}"` });
          return z.NEVER;
        }
        out[m[1] as QueueName] = Number(m[2]);
      }
      return out;
    }),
  WORKER_STALLED_INTERVAL_MS: int(30_000, 1000, 600_000),
  WORKER_LOCK_DURATION_MS: int(30_000, 1000, 600_000),
  REPAIR_SWEEP_EVERY_MS: scheduleMs(60_000),
  // A durable job (extract-facts) whose record is this old and not done is re-added by the repair sweep (Redis may have lost it).
  OUTBOX_RELAY_GRACE_MS: int(60_000, 0, 86_400_000),
  EXPIRE_EVERY_MS: scheduleMs(300_000),

  UPSTREAM_BASE_URL: z.url({ protocol: /^https?$/, error: 'expected an http(s) URL' }).default('https://api.openai.com/v1'),
  UPSTREAM_API_KEY: optionalString,
  UPSTREAM_TIMEOUT_MS: int(120_000, 1000, 3_600_000),

  // Embeddings (DESIGN §7; names of the original where it had them).
  MEMORY_STATIC_MODEL: z.string().min(1).default('minishlab/potion-base-8M'),
  MEMORY_STATIC_CACHE_DIR: optionalString,
  MEMORY_TRANSFORMERS_MODEL: z.string().min(1).default('Xenova/all-MiniLM-L6-v2'),
  MEMORY_TRANSFORMERS_CACHE_DIR: optionalString,
  HF_HUB_ENDPOINT: z.url({ protocol: /^https?$/, error: 'expected an http(s) URL' }).default('https://huggingface.co'),
  MEMORY_EMBEDDING_CACHE_TTL_MS: int(300_000, 1, 86_400_000),
  MEMORY_EMBEDDING_CACHE_MAX: int(1000, 1, 1_000_000),
  MEMORY_EMBEDDING_TIMEOUT_MS: int(15_000, 100, 600_000),
  MEMORY_EMBEDDING_BATCH_SIZE: int(64, 1, 2048),
  MEMORY_EMBEDDING_CUSTOM_API_KEY: optionalString,
  OPENAI_API_KEY: optionalString,
  MISTRAL_API_KEY: optionalString,
  TOGETHER_API_KEY: optionalString,
  JINA_API_KEY: optionalString,
  VOYAGE_API_KEY: optionalString,
  NVIDIA_API_KEY: optionalString,
  OPENROUTER_API_KEY: optionalString,
  COHERE_API_KEY: optionalString,
  OLLAMA_BASE_URL: z.url({ protocol: /^https?$/, error: 'expected an http(s) URL' }).default('http://127.0.0.1:11434'),
  /** Outbound URL policy: allow private/loopback targets (self-hosted endpoints). Metadata hosts stay blocked. */
  OMNIROUTE_ALLOW_PRIVATE_PROVIDER_URLS: envBool(false),

  // Vector tier and retrieval (DESIGN §4, §7).
  MEMORY_VEC_QUANTIZATION: z.enum(['none', 'int8']).default('none'),
  /**
   * Memory (MB) the api may hold for in-memory copies of tenants' vectors, scanned with WebAssembly
   * SIMD instead of vec0 (issue #14); least recently searched tenants are dropped past it, a tenant
   * larger than all of it is searched by vec0. 0 = always vec0.
   */
  // 'auto': a quarter of the memory this process may use, at most 256 (autoVecScanCacheMb).
  MEMORY_VEC_SCAN_CACHE_MB: z
    .union([z.literal('auto'), z.coerce.number().int().min(0).max(1_048_576)], { error: "expected 'auto' or an integer 0-1048576" })
    .default('auto')
    .transform((v) => (v === 'auto' ? autoVecScanCacheMb(memoryLimitBytes()) : v)),
  /**
   * Bytes of the per-key in-memory keyword indexes (src/memory/keyword-index.ts), least recently
   * used dropped first. The key being queried is always kept, so a key larger than this is still
   * ranked by its own statistics (its index is then the only one held).
   */
  MEMORY_KEYWORD_INDEX_CACHE_MB: int(128, 1, 1_048_576),
  /**
   * Bytes of the per-key memory rows the api keeps beside the keyword indexes (src/memory/record-cache.ts),
   * so a chat's ranked rows are not read from SQLite each time; invalidated from the same change log.
   * Least recently used keys dropped first. 0 = rows always read from SQLite.
   */
  MEMORY_RECORD_CACHE_MB: int(32, 0, 1_048_576),
  MEMORY_VEC_TOP_K: int(20, 1, 1000),
  MEMORY_RRF_K: int(60, 1, 10_000),
  MEMORY_RRF_FTS_WEIGHT: z.coerce.number().min(0).max(100).default(1),
  // Measured (bench/rrf-weights.bench.ts): (fts 1, vector 0.5) was the best fusion on the labelled set.
  MEMORY_RRF_VECTOR_WEIGHT: z.coerce.number().min(0).max(100).default(0.5),
  MEMORY_RERANK_TIMEOUT_MS: int(5000, 100, 60_000),
  /** A self-hosted Cohere/Jina-style reranker (settings: rerankProviderModel `custom/<model>`). */
  MEMORY_RERANK_CUSTOM_BASE_URL: optionalString.pipe(z.url({ protocol: /^https?$/, error: 'expected an http(s) URL' }).optional()),
  MEMORY_RERANK_CUSTOM_API_KEY: optionalString,

  // Summarisation, export and import (issue #12).
  /** Largest upload POST /api/memory/import accepts (bytes); larger → 413 and nothing stored. */
  IMPORT_MAX_BYTES: int(256 * 1_048_576, 1024, 16 * 1_073_741_824),
  /** How often the auto-compaction sweep runs (settings autoSummarize decides whether it does anything); 0 = off. */
  COMPACT_EVERY_MS: scheduleMs(3_600_000),
  /** Timeout of one summary request to the upstream (summaryMode "llm"); on timeout the rule-based text is used. */
  SUMMARY_LLM_TIMEOUT_MS: int(30_000, 100, 600_000),
  // Qdrant, the second vector tier (settings qdrant* win; these are the fallbacks, as in the original).
  QDRANT_HOST: optionalString,
  QDRANT_PORT: optionalString,
  QDRANT_API_KEY: optionalString,
  QDRANT_COLLECTION: optionalString,
  /** Deadline of every Qdrant request made by jobs and health checks. */
  QDRANT_TIMEOUT_MS: int(10_000, 100, 600_000),
  // The qdrant-cleanup schedule (expired points, points whose memory is gone); the job skips at once while Qdrant is off.
  QDRANT_CLEANUP_EVERY_MS: scheduleMs(86_400_000),
  /** Deadline of a Qdrant search on the request path (then retrieval falls back to sqlite-vec). */
  QDRANT_SEARCH_TIMEOUT_MS: int(800, 50, 60_000),
});

export type Env = z.infer<typeof envSchema>;

/** Thrown when the environment is invalid; the message names each bad variable. */
export class EnvError extends Error {}

/** Parses an environment (default `process.env`) once; throws EnvError naming each invalid variable. */
export function loadEnv(source: NodeJS.ProcessEnv = process.env): Env {
  const r = envSchema.safeParse(source);
  if (!r.success) {
    const lines = r.error.issues.map((i) => `  ${i.path.join('.') || '(root)'}: ${i.message}`);
    throw new EnvError(`Invalid environment:\n${lines.join('\n')}`);
  }
  return { ...r.data, DATA_DIR: path.resolve(r.data.DATA_DIR) };
}

/** Redis URL in effect: REDIS_URL, else the local default. */
export function redisUrl(env: Env): string {
  return env.REDIS_URL ?? 'redis://127.0.0.1:6379';
}
