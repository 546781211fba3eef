import type { Registry } from './context';
import { expireMemories } from './handlers/expire-memories.handler';
import { repairSweep } from './handlers/repair-sweep.handler';

/** Every job of src/queue/jobs.ts → its handler. Adding a job to the map without one here does not compile. */
export const registry: Registry = {
  'expire-memories': expireMemories,
  'repair-sweep': repairSweep,
};
