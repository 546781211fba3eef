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
