import type { ApiKeyService } from './auth/api-keys.service';
import type { Env } from './config/env';
import type { DbHandle } from './db/connection';
import type { Logger } from './logger';
import type { MemoryService } from './memory/memory.service';
import type { SettingsService } from './memory/settings';
import type { JobEventsHub } from './queue/job-events';
import type { QueueLayer } from './queue/queues';

/** What every part of a process shares: built once at boot, passed down explicitly. */
export interface CoreContext {
  env: Env;
  log: Logger;
  db: DbHandle;
  memory: MemoryService;
  settings: SettingsService;
  queues: QueueLayer;
}

/** The api process' context. */
export interface ApiContext extends CoreContext {
  apiKeys: ApiKeyService;
  managementToken: string;
  jobEvents: JobEventsHub;
}
