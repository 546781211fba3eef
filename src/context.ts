import type { ApiKeyService } from './auth/api-keys.service';
import type { Env } from './config/env';
import type { DbHandle } from './db/connection';
import type { Logger } from './logger';
import type { EmbeddingService } from './embedding/embedding.service';
import type { MemoryService } from './memory/memory.service';
import type { Retriever } from './memory/retrieval.types';
import type { SettingsService } from './memory/settings';
import type { JobEventsHub } from './queue/job-events';
import type { QueueLayer } from './queue/queues';
import type { SqliteVecStore } from './vector/sqlite-vec.store';

/** What every part of a process shares: built once at boot, passed down explicitly. */
export interface CoreContext {
  env: Env;
  log: Logger;
  db: DbHandle;
  memory: MemoryService;
  settings: SettingsService;
  queues: QueueLayer;
  embedding: EmbeddingService;
  vectors: SqliteVecStore;
}

/** The api process' context. */
export interface ApiContext extends CoreContext {
  apiKeys: ApiKeyService;
  managementToken: string;
  jobEvents: JobEventsHub;
  retrieval: Retriever;
}
