import { z } from 'zod';
import { QUEUE_NAMES } from '../../config/queue-names';

export const jobParams = z.object({
  queue: z.enum(QUEUE_NAMES),
  id: z.string().min(1).max(200),
});
