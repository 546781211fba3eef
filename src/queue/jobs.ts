import crypto from 'node:crypto';
import type { JobsOptions } from 'bullmq';
import { z } from 'zod';
import type { QueueName } from '../config/queue-names';

/** One job kind: where it runs, what its payload is, how its id is derived. */
export interface JobSpec<S extends z.ZodType = z.ZodType> {
  queue: QueueName;
  schema: S;
  /** Deterministic id: the same logical work always gets the same id (BullMQ dedupes it). */
  jobId?: (data: z.infer<S>, now: number) => string | undefined;
  /**
   * The job is acknowledged work Redis alone must not hold (it may restart empty): its outbox row is
   * written before the add and kept until the handler claims it in its own transaction
   * (QueueLayer.claimDurable); the relay re-adds it if Redis lost the job. Needs a deterministic jobId.
   */
  durable?: boolean;
  /** Overrides of DEFAULT_JOB_OPTIONS. */
  options?: JobsOptions;
  /** Repeat interval for jobs run by a scheduler (created idempotently at worker boot). */
  scheduleEveryMs?: (env: { REPAIR_SWEEP_EVERY_MS: number; EXPIRE_EVERY_MS: number; COMPACT_EVERY_MS: number; QDRANT_CLEANUP_EVERY_MS: number }) => number;
}

const spec = <S extends z.ZodType>(s: JobSpec<S>) => s;

/** Defaults for every job: 5 attempts, exponential backoff with jitter, bounded retention. */
export const DEFAULT_JOB_OPTIONS: JobsOptions = {
  attempts: 5,
  backoff: { type: 'exponential', delay: 1000, jitter: 0.5 },
  removeOnComplete: { age: 24 * 3600, count: 1000 },
  removeOnFail: { age: 7 * 24 * 3600, count: 5000 },
};

/** The deduplication id that makes `reindex` a singleton. */
export const REINDEX_DEDUPLICATION_ID = 'reindex';

/** The deduplication id that makes `qdrant-backfill` a singleton (409 while one runs). */
export const QDRANT_BACKFILL_DEDUPLICATION_ID = 'qdrant-backfill';

/** THE job map: every job Engram runs, declared once. A job without a handler does not compile (workers/registry.ts). */
export const JOBS = {
  'expire-memories': spec({
    queue: 'maintenance',
    schema: z.strictObject({ batchSize: z.number().int().min(1).max(10_000).default(500) }),
    scheduleEveryMs: (e) => e.EXPIRE_EVERY_MS,
  }),
  'repair-sweep': spec({
    queue: 'maintenance',
    schema: z.strictObject({
      reason: z.enum(['schedule', 'reconnect', 'manual']).default('schedule'),
      batchSize: z.number().int().min(1).max(10_000).default(1000),
    }),
    // Reconnect storms (several api processes, flapping Redis) coalesce into one sweep per 10 s.
    jobId: (d, now) => (d.reason === 'schedule' ? undefined : `repair-sweep-${d.reason}-${Math.floor(now / 10_000)}`),
    scheduleEveryMs: (e) => e.REPAIR_SWEEP_EVERY_MS,
  }),
  'extract-facts': spec({
    queue: 'extraction',
    schema: z.strictObject({
      apiKeyId: z.string().min(1).max(128),
      sessionId: z.string().max(256).nullable().default(null),
      // The one payload that carries text (DESIGN §3): capped at 64 KiB.
      userText: z.string().max(65_536),
      assistantText: z.string().max(65_536).optional(),
      requestId: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/),
    }),
    jobId: (d) => `extract-${d.requestId}`,
    // A 200 to the chat acknowledged these facts: a Redis restarted empty must not lose them (issue 15 §3).
    durable: true,
    // The payload is the user's chat text: once the facts are in SQLite it has no reason to stay in Redis
    // (the default keeps 1000 completed jobs for a day). A failed one is kept a day for diagnosis.
    options: { removeOnComplete: true, removeOnFail: { age: 24 * 3600, count: 1000 } },
  }),
  'embed-memory': spec({
    queue: 'embedding',
    schema: z.strictObject({ memoryId: z.uuid(), contentHash: z.string().regex(/^[0-9a-f]{64}$/) }),
    jobId: (d) => `embed-${d.memoryId}-${d.contentHash.slice(0, 8)}`,
  }),
  reindex: spec({
    queue: 'reindex',
    schema: z.strictObject({
      force: z.boolean().default(false),
      // One embed call and one vec0 transaction per batch: at 512 a 100k reindex spends ~25% less CPU
      // than at 128 (vec0 writes its chunks once per transaction), and a failed batch re-flags 512 rows at most.
      batchSize: z.number().int().min(1).max(2048).default(512),
      trigger: z.enum(['api', 'auto']).default('auto'),
    }),
    // At most one live reindex: BullMQ's deduplication id is checked and set atomically in Redis, so
    // concurrent triggers (routes, settings changes, drift checks, an outbox flush) collapse into one
    // job; finished runs keep their own ids, so their results stay visible. The id is unique per
    // request (a timestamp alone is not: concurrent triggers in the same millisecond shared one, and
    // each of them then believed it had started the job).
    jobId: (d, now) => `reindex-${d.trigger}-${now}-${crypto.randomBytes(4).toString('hex')}`,
    options: { attempts: 10, deduplication: { id: REINDEX_DEDUPLICATION_ID } },
  }),
  'record-access': spec({
    queue: 'maintenance',
    // counts[i]: how often memoryIds[i] was injected since the api's last send (absent: once each; jobs from before it was added).
    schema: z
      .strictObject({ memoryIds: z.array(z.uuid()).min(1).max(200), counts: z.array(z.number().int().min(1).max(1_000_000_000)).max(200).optional() })
      .refine((d) => d.counts === undefined || d.counts.length === d.memoryIds.length, { path: ['counts'], message: 'expected one count per memory id' }),
    options: { attempts: 3, removeOnComplete: { age: 3600, count: 100 } },
  }),
  'backend-sync': spec({
    queue: 'maintenance',
    // Brings one fallback backend's copy of one memory to the primary's current state (idempotent).
    schema: z.strictObject({ backendId: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/), memoryId: z.string().min(1).max(256) }),
    options: { attempts: 8, backoff: { type: 'exponential', delay: 2000, jitter: 0.5 } },
  }),
  // Summarisation (issue #12): one summary memory per API key (never across tenants), candidates deleted
  // through the store so history keeps every original text. The cutoff is fixed by the job's creation
  // time, and each summary's key derives from the job id and the candidates it covers: a retry converges.
  'summarize-older-than': spec({
    queue: 'summarize',
    schema: z.strictObject({
      apiKeyId: z.string().max(128).optional(),
      sessionId: z.string().max(256).optional(),
      olderThanDays: z.number().int().min(1).max(365).default(30),
      mode: z.enum(['rules', 'llm']).optional(),
    }),
  }),
  // Budget compaction of one tenant (the original's summarizeMemories): the oldest, least-accessed rows
  // past N × the injection budget are folded into summaries. One live job per tenant.
  'compact-memories': spec({
    queue: 'summarize',
    schema: z.strictObject({ apiKeyId: z.string().max(128), trigger: z.enum(['api', 'auto']).default('auto') }),
    jobId: (d, now) => `compact-${crypto.createHash('sha256').update(d.apiKeyId).digest('hex').slice(0, 16)}-${Math.floor(now / 60_000)}`,
  }),
  // Scheduled: when the autoSummarize setting is on, one compact-memories per tenant over its threshold.
  'auto-compact': spec({
    queue: 'summarize',
    schema: z.strictObject({}),
    scheduleEveryMs: (e) => e.COMPACT_EVERY_MS,
  }),
  'import-memories': spec({
    queue: 'import',
    schema: z.strictObject({
      uploadId: z.uuid(),
      format: z.enum(['ndjson', 'sqlite']),
      /** Owner id in the file → Engram API key id. */
      keyMap: z.record(z.string().max(128), z.string().min(1).max(128)).default({}),
    }),
    jobId: (d) => `import-${d.uploadId}`,
    // A file read from the start again converges (records are keyed by id); a few attempts suffice.
    options: { attempts: 3 },
  }),
  // Qdrant (DESIGN §7): the payload carries memory ids only; the handler reads the current rows and
  // makes Qdrant match them, so duplicates, retries and reordering converge. Retried until Qdrant is back.
  'qdrant-sync': spec({
    queue: 'embedding',
    schema: z.strictObject({ memoryIds: z.array(z.uuid()).min(1).max(200) }),
    options: { attempts: 16, backoff: { type: 'exponential', delay: 1000, jitter: 0.5 } },
  }),
  'qdrant-backfill': spec({
    queue: 'reindex',
    schema: z.strictObject({
      reason: z.enum(['api', 'reindex', 'enable']).default('api'),
      batchSize: z.number().int().min(1).max(1000).default(256),
      // The checkpoint (rewritten by the job as it goes): a retry or a restarted worker resumes here.
      afterRowId: z.number().int().min(0).default(0),
      done: z.number().int().min(0).default(0),
      failed: z.number().int().min(0).default(0),
      signature: z.string().max(512).nullable().default(null),
    }),
    jobId: (d, now) => `qdrant-backfill-${d.reason}-${now}-${crypto.randomBytes(4).toString('hex')}`,
    options: { attempts: 10, deduplication: { id: QDRANT_BACKFILL_DEDUPLICATION_ID } },
  }),
  'qdrant-cleanup': spec({
    queue: 'maintenance',
    schema: z.strictObject({ batchSize: z.number().int().min(1).max(1000).default(256) }),
    jobId: (_d, now) => `qdrant-cleanup-${Math.floor(now / 10_000)}`,
    scheduleEveryMs: (e) => e.QDRANT_CLEANUP_EVERY_MS,
  }),
} as const satisfies Record<string, JobSpec>;

export type JobName = keyof typeof JOBS;
export type JobData<N extends JobName> = z.output<(typeof JOBS)[N]['schema']>;
export type JobInput<N extends JobName> = z.input<(typeof JOBS)[N]['schema']>;
export const JOB_NAMES = Object.keys(JOBS) as JobName[];

/** Jobs that live on a queue. */
export function jobsOfQueue(queue: QueueName): JobName[] {
  return JOB_NAMES.filter((n) => JOBS[n].queue === queue);
}

/** Parses a payload for a job; throws the zod error when invalid. */
export function parsePayload<N extends JobName>(name: N, data: unknown): JobData<N> {
  return (JOBS[name].schema as z.ZodType).parse(data) as JobData<N>;
}

/** Options of one add: defaults, the spec's overrides and the deterministic id. */
export function jobOptions<N extends JobName>(name: N, data: JobData<N>, fallbackId: string): JobsOptions & { jobId: string } {
  const s = JOBS[name] as JobSpec;
  const jobId = s.jobId?.(data, Date.now()) ?? fallbackId;
  return { ...DEFAULT_JOB_OPTIONS, ...(s.options ?? {}), jobId };
}
