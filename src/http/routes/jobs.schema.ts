import { z } from 'zod';
import { QUEUE_NAMES } from '../../config/queue-names';

export const jobParams = z.object({
  queue: z.enum(QUEUE_NAMES),
  id: z.string().min(1).max(200),
});

/** An outbox row's integer id (DELETE /api/jobs/outbox/:outboxId). */
export const outboxParams = z.object({
  outboxId: z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER),
});

/** GET /api/jobs/list: jobs in the given states (comma-separated) across every queue, newest first. */
export const LISTABLE_STATES = ['active', 'waiting', 'delayed', 'failed', 'completed'] as const;
export const listJobsQuery = z.object({
  states: z
    .string()
    .max(100)
    .default('active,failed')
    .transform((s) => [...new Set(s.split(',').map((x) => x.trim()).filter(Boolean))])
    .pipe(z.array(z.enum(LISTABLE_STATES)).min(1)),
  limit: z
    .string()
    .regex(/^\d+$/, 'expected a non-negative integer')
    .transform(Number)
    .pipe(z.number().int().min(1).max(100))
    .default(20),
});
