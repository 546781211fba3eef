import { z } from 'zod';

/** POST /api/memory/summarize (the original's strict schema, plus sessionId and mode). */
export const summarizeBody = z.strictObject({
  olderThanDays: z.number().int().min(1).max(365).default(30),
  apiKeyId: z.string().min(1).max(128).optional(),
  sessionId: z.string().max(256).optional(),
  dryRun: z.boolean().default(false),
  mode: z.enum(['rules', 'llm']).optional(),
});

/** POST /api/memory/compact */
export const compactBody = z.strictObject({ apiKeyId: z.string().min(1).max(128) });

/** GET /api/memory/export */
export const exportQuery = z.strictObject({
  apiKeyId: z.string().min(1).max(128),
  sessionId: z.string().max(256).optional(),
});

const mapping = z
  .string()
  .max(300)
  .regex(/^[^=]*=[^=]+$/, 'expected old=new')
  .transform((s) => {
    const i = s.indexOf('=');
    return [s.slice(0, i), s.slice(i + 1)] as const;
  });

/** POST /api/memory/import?map=old=new&map=… (the body is the file itself). */
export const importQuery = z.strictObject({
  map: z
    .union([mapping.transform((m) => [m]), z.array(mapping).max(1000)])
    .optional()
    .transform((m) => Object.fromEntries(m ?? []) as Record<string, string>),
});
