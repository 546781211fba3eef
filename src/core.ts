import type { Env } from './config/env';
import { openDatabase, type DbHandle } from './db/connection';
import { migrate } from './db/migrate';
import type { Logger } from './logger';
import { MemoryReadCache } from './memory/read-cache';
import { MemoryService } from './memory/memory.service';
import { SettingsService } from './memory/settings';
import { EmbeddingService } from './embedding/embedding.service';
import { SqliteVecStore, hookIntoMemoryService } from './vector/sqlite-vec.store';

/** Opens SQLite, applies migrations and builds the storage services both processes use. */
export function openStorage(env: Env, log: Logger, file?: string): { db: DbHandle; memory: MemoryService; settings: SettingsService } {
  const db = openDatabase({ dataDir: env.DATA_DIR, file, busyTimeoutMs: env.SQLITE_BUSY_TIMEOUT_MS, disableVec: env.VECTOR_STORE_DISABLE_VEC, log });
  try {
    migrate(db.db, log);
  } catch (err) {
    db.close();
    throw err;
  }
  const memory = new MemoryService(db.db, new MemoryReadCache(env.MEMORY_CACHE_MAX, env.MEMORY_CACHE_TTL_MS));
  const settings = new SettingsService(db.db, env.SETTINGS_CACHE_TTL_MS);
  return { db, memory, settings };
}

/** The embedding service and the sqlite-vec store over an open database; deletes take their vector along. */
export function openVectorTier(env: Env, log: Logger, storage: { db: DbHandle; memory: MemoryService }): { embedding: EmbeddingService; vectors: SqliteVecStore } {
  const vectors = new SqliteVecStore(storage.db.db, { vecLoaded: storage.db.vecLoaded, quantization: env.MEMORY_VEC_QUANTIZATION });
  hookIntoMemoryService(storage.memory, vectors);
  return { embedding: new EmbeddingService(env, { log }), vectors };
}
