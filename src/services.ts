import type { Env } from './config/env';
import { openDatabase, type DbHandle } from './db/connection';
import { migrate } from './db/migrate';
import { BackendManager } from './backends/manager';
import { EmbeddingService } from './embedding/embedding.service';
import type { Logger } from './logger';
import { MemoryReadCache } from './memory/read-cache';
import { MemoryService } from './memory/memory.service';
import { QdrantSettingsService } from './memory/qdrant-settings';
import { QdrantSyncService } from './memory/qdrant-sync.service';
import { ReindexService } from './memory/reindex.service';
import { ExportService } from './memory/export.service';
import { ImportService } from './memory/import.service';
import { SummarizeService } from './memory/summarize.service';
import { LlmSummarizer } from './memory/summary-llm';
import { SettingsService } from './memory/settings';
import { QueueLayer } from './queue/queues';
import { outboundPolicyFromEnv } from './net/url-policy';
import type { RedisRole } from './queue/redis';
import { QdrantVectorStore } from './vector/qdrant.store';
import { SqliteVecStore } from './vector/sqlite-vec.store';

/** What lives in the SQLite file: the memory store, settings and the sqlite-vec tier. */
export interface Storage {
  db: DbHandle;
  memory: MemoryService;
  settings: SettingsService;
  vectors: SqliteVecStore;
  /** The Qdrant tier (used when enabled in the settings) and its settings. */
  qdrant: QdrantVectorStore;
  qdrantSettings: QdrantSettingsService;
}

/** The services both processes share: built once at boot, passed down explicitly. */
export interface Services extends Storage {
  env: Env;
  log: Logger;
  queues: QueueLayer;
  embedding: EmbeddingService;
  reindex: ReindexService;
  /** Memory backends (primary/fallbacks from settings): the REST routes and MCP tools go through it. */
  backends: BackendManager;
  summarize: SummarizeService;
  exporter: ExportService;
  importer: ImportService;
  qdrantSync: QdrantSyncService;
}

/** Opens SQLite, applies migrations and builds the storage services; deleting a memory deletes its vector in the same transaction. */
export function openStorage(env: Env, log: Logger, file?: string, tuning: { walAutoCheckpointPages?: number } = {}): Storage {
  const db = openDatabase({
    dataDir: env.DATA_DIR,
    file,
    busyTimeoutMs: env.SQLITE_BUSY_TIMEOUT_MS,
    disableVec: env.VECTOR_STORE_DISABLE_VEC,
    log,
    walAutoCheckpointPages: tuning.walAutoCheckpointPages,
  });
  try {
    migrate(db.db, log);
  } catch (err) {
    db.close();
    throw err;
  }
  const memory = new MemoryService(db.db, new MemoryReadCache(env.MEMORY_CACHE_MAX, env.MEMORY_CACHE_TTL_MS));
  const settings = new SettingsService(db.db, env.SETTINGS_CACHE_TTL_MS);
  const vectors = new SqliteVecStore(db.db, {
    vecLoaded: db.vecLoaded,
    quantization: env.MEMORY_VEC_QUANTIZATION,
    scanCacheBytes: env.MEMORY_VEC_SCAN_CACHE_MB * 1_048_576,
  });
  memory.addHooks({ onDeleteInTx: (rowId) => vectors.deleteInTx(rowId) });
  const qdrantSettings = new QdrantSettingsService(settings, env);
  const qdrant = new QdrantVectorStore(db.db, vectors, () => qdrantSettings.config());
  return { db, memory, settings, vectors, qdrant, qdrantSettings };
}

/** Storage plus queues, embeddings and the reindex service, for the api or a worker process. */
export function openServices(env: Env, log: Logger, role: RedisRole, opts: { dbFile?: string } = {}): Services {
  // The api checkpoints the WAL only past API_WAL_AUTOCHECKPOINT_PAGES: below it the workers' commits (SQLite's default,
  // 1000 pages) do, with the copy and the fsyncs off the request path (docs/storage-and-caches.md, "WAL checkpoints").
  const storage = openStorage(env, log, opts.dbFile, role === 'api' ? { walAutoCheckpointPages: env.API_WAL_AUTOCHECKPOINT_PAGES } : {});
  const queues = new QueueLayer(env, log, storage.db.db, role);
  const embedding = new EmbeddingService(env, { log });
  const qdrantSync = new QdrantSyncService({ ...storage, queues, log });
  // Updates and deletes reach Qdrant through qdrant-sync jobs (ids only; the outbox when Redis is down).
  // A delete's or an update's sync is recorded in its own transaction, so a crash right after the commit cannot lose it.
  storage.memory.addHooks({
    onDeleteInTx: (_rowId, memoryId) => qdrantSync.recordSyncInTx(memoryId),
    onUpdateInTx: (_rowId, memoryId) => qdrantSync.recordSyncInTx(memoryId),
    afterCommit: (changes) => qdrantSync.onChanges(changes),
  });
  const reindex = new ReindexService({ ...storage, embedding, queues, log, qdrantSync });
  const backends = new BackendManager({ memory: storage.memory, settings: storage.settings, queues, policy: outboundPolicyFromEnv(env), log });
  const summarize = new SummarizeService({ ...storage, reindex, log, llm: new LlmSummarizer(env) });
  const exporter = new ExportService(storage.db.file, env.SQLITE_BUSY_TIMEOUT_MS);
  const importer = new ImportService({ db: storage.db.db, dataDir: env.DATA_DIR, memory: storage.memory, queues, reindex, log, maxBytes: env.IMPORT_MAX_BYTES });
  return { env, log, ...storage, queues, embedding, reindex, qdrantSync, backends, summarize, exporter, importer };
}
