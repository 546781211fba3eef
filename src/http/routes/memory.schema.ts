import { z } from 'zod';
import { memoryTypeSchema } from '../../memory/types';
import { fusionWeight, HYBRID_FUSIONS, scoreFloor } from '../../memory/settings';

const MAX_CONTENT = 65_536;

const intFromQuery = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, 'expected a non-negative integer')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

export const listQuery = z.object({
  page: intFromQuery(1, 1_000_000).optional(),
  limit: intFromQuery(1, 200).optional(),
  offset: intFromQuery(0, 1_000_000_000).optional(),
  q: z.string().max(512).optional(),
  apiKeyId: z.string().max(128).optional(),
  type: memoryTypeSchema.optional(),
  sessionId: z.string().max(256).optional(),
});

const expiresAt = z
  .union([z.iso.datetime({ offset: true }), z.iso.date(), z.number().int().nonnegative()])
  .nullable()
  .transform((v, ctx) => {
    if (v === null) return null;
    const d = new Date(v);
    if (Number.isNaN(d.getTime())) {
      ctx.addIssue({ code: 'custom', message: 'expected an ISO-8601 date or epoch milliseconds' });
      return z.NEVER;
    }
    return d.toISOString();
  });

const metadata = z.record(z.string(), z.unknown()).refine((m) => JSON.stringify(m).length <= 16_384, 'metadata larger than 16 KiB');

/** POST /api/memory (the original's fields; unknown fields are ignored as there). */
export const createBody = z.object({
  content: z.string().trim().min(1).max(MAX_CONTENT),
  key: z.string().trim().min(1).max(512),
  type: memoryTypeSchema.default('factual'),
  sessionId: z.string().max(256).default(''),
  apiKeyId: z.string().max(128).default(''),
  metadata: metadata.default({}),
  expiresAt: expiresAt.optional(),
});

/** PUT /api/memory/:id: strict; Engram also lets expiry be set or cleared. */
export const updateBody = z
  .strictObject({
    type: memoryTypeSchema.optional(),
    key: z.string().trim().min(1).max(512).optional(),
    content: z.string().trim().min(1).max(MAX_CONTENT).optional(),
    metadata: metadata.optional(),
    expiresAt: expiresAt.optional(),
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), 'at least one field is required');

export const idParams = z.object({ id: z.string().min(1).max(128) });

/** POST /api/memory/retrieve-preview (the original's strict schema). */
export const previewBody = z
  .strictObject({
    query: z.string().trim().min(1).max(8192),
    strategy: z.enum(['exact', 'semantic', 'hybrid']).default('hybrid'),
    maxTokens: z.number().int().min(1).max(16000).default(2000),
    apiKeyId: z.string().min(1).max(128).optional(),
    limit: z.number().int().min(1).max(100).default(20),
    sessionId: z.string().max(256).optional(),
    // Engram additions (issue #10): try a fusion without changing the settings.
    hybridFusion: z.enum(HYBRID_FUSIONS).optional(),
    ftsWeight: fusionWeight.optional(),
    vectorWeight: fusionWeight.optional(),
    // Issue #10 item 4: try the relevance floors (null = off for this call).
    keywordFloor: scoreFloor.nullable().optional(),
    vectorFloor: scoreFloor.nullable().optional(),
    temporalBoost: scoreFloor.nullable().optional(),
    prfWeight: scoreFloor.nullable().optional(),
  })
  .refine((b) => !(b.ftsWeight === 0 && b.vectorWeight === 0), {
    message: 'ftsWeight and vectorWeight cannot both be 0 (nothing would be ranked)',
    path: ['vectorWeight'],
  });

/** POST /api/memory/reindex */
export const reindexBody = z.strictObject({ force: z.boolean().default(false) });
