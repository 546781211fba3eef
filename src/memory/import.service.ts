import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import Database from 'better-sqlite3';
import { ApiKeyService } from '../auth/api-keys.service';
import type { Db } from '../db/connection';
import { nowIso } from '../db/connection';
import { AppError, badRequest } from '../errors';
import type { Logger } from '../logger';
import type { QueueLayer } from '../queue/queues';
import { fromOriginalRow, parseNdjsonLine, type OriginalRow, type SourceItem } from './import-records';
import { ImportRecordError, type MemoryChange, type MemoryService } from './memory.service';
import type { ReindexService } from './reindex.service';

export type ImportFormat = 'ndjson' | 'sqlite';

/** Records per transaction (and per progress report). */
const BATCH = 500;
/** The job result lists at most this many errors and warnings each (the counts cover all). */
const REPORT_LIMIT = 1000;
const SQLITE_MAGIC = Buffer.from('SQLite format 3\0', 'latin1');
/** The name an imported owner's new API key gets; a re-import finds it by this name. */
const OWNER_KEY_PREFIX = 'import:';

/** The upload is gone (already imported, removed) or is no database of the original: retrying cannot help. */
export class UnusableUploadError extends Error {}

export interface ImportResult {
  format: ImportFormat;
  total: number;
  processed: number;
  created: number;
  updated: number;
  unchanged: number;
  failed: number;
  errors: { line: number; error: string }[];
  warningCount: number;
  warnings: { line: number; warning: string }[];
  embedsQueued: number;
  /** Owner id in the file → the Engram API key its memories went to (only owners that were renamed). */
  ownerKeys: Record<string, string>;
  /** API keys this import created for owners without a mapping (their secrets are in keysFile, never here). */
  createdKeys: { owner: string; apiKeyId: string; prefix: string }[];
  keysFile: string | null;
}

export interface ImportJobHooks {
  jobId: string;
  progress(p: object): Promise<void>;
  checkpoint(): Promise<void>;
}

/** Counts bytes through a stream and fails it past the limit (the upload's 413). */
function byteLimit(max: number, seen: (n: number) => void): Transform {
  let n = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      n += chunk.length;
      seen(n);
      if (n > max) cb(tooLarge(max));
      else cb(null, chunk);
    },
  });
}

const tooLarge = (max: number) => new AppError(413, 'payload_too_large', `The upload is larger than IMPORT_MAX_BYTES (${max} bytes)`, { maxBytes: max });

/**
 * Import (DESIGN §3): uploads are streamed to DATA_DIR/imports/ (size-limited), then the
 * `import-memories` job reads them — Engram's NDJSON export or the original product's SQLite
 * file — validating every record (a bad one is reported with its line and skipped), upserting in
 * batches with history source `import`, mapping owners to API keys, enqueueing embeddings, and
 * deleting the upload when done. Records are keyed by id, so importing a file again changes nothing.
 */
export class ImportService {
  private readonly apiKeys: ApiKeyService;

  constructor(
    private readonly d: {
      db: Db;
      dataDir: string;
      memory: MemoryService;
      queues: QueueLayer;
      reindex: Pick<ReindexService, 'enqueueEmbeds'>;
      log: Logger;
      maxBytes: number;
    },
  ) {
    this.apiKeys = new ApiKeyService(d.db);
  }

  /** Where uploads wait for their job. */
  get dir(): string {
    return path.join(this.d.dataDir, 'imports');
  }

  private file(uploadId: string, format: ImportFormat): string {
    return path.join(this.dir, `${uploadId}.${format}`);
  }

  /**
   * Streams an upload to DATA_DIR/imports/<uploadId>.<format> (the format is read from the first
   * bytes). Over the limit → 413 and the partial file is removed (nothing stored); empty → 400.
   */
  async storeUpload(body: Readable, declaredLength: number | null): Promise<{ uploadId: string; format: ImportFormat; bytes: number }> {
    if (declaredLength !== null && declaredLength > this.d.maxBytes) throw tooLarge(this.d.maxBytes);
    await fs.promises.mkdir(this.dir, { recursive: true });
    const uploadId = crypto.randomUUID();
    const part = path.join(this.dir, `${uploadId}.part`);
    let bytes = 0;
    try {
      await pipeline(
        body,
        byteLimit(this.d.maxBytes, (n) => (bytes = n)),
        fs.createWriteStream(part, { flags: 'wx', mode: 0o600 }),
      );
    } catch (err) {
      await fs.promises.rm(part, { force: true });
      throw err;
    }
    if (bytes === 0) {
      await fs.promises.rm(part, { force: true });
      throw badRequest('The upload is empty');
    }
    const head = Buffer.alloc(SQLITE_MAGIC.length);
    const fd = await fs.promises.open(part, 'r');
    try {
      await fd.read(head, 0, head.length, 0);
    } finally {
      await fd.close();
    }
    const format: ImportFormat = head.equals(SQLITE_MAGIC) ? 'sqlite' : 'ndjson';
    await fs.promises.rename(part, this.file(uploadId, format));
    return { uploadId, format, bytes };
  }

  /** Removes an upload whose job could not be created. */
  async discardUpload(uploadId: string, format: ImportFormat): Promise<void> {
    await fs.promises.rm(this.file(uploadId, format), { force: true });
  }

  /** The import-memories job. */
  async run(data: { uploadId: string; format: ImportFormat; keyMap: Record<string, string> }, hooks: ImportJobHooks): Promise<ImportResult> {
    const file = this.file(data.uploadId, data.format);
    if (!fs.existsSync(file)) throw new UnusableUploadError(`upload ${data.uploadId} is not in ${this.dir} (already imported, or removed)`);
    const result: ImportResult = {
      format: data.format,
      total: 0,
      processed: 0,
      created: 0,
      updated: 0,
      unchanged: 0,
      failed: 0,
      errors: [],
      warningCount: 0,
      warnings: [],
      embedsQueued: 0,
      ownerKeys: {},
      createdKeys: [],
      keysFile: null,
    };
    const importedAt = nowIso();
    const secrets: string[] = [];
    const owners = new Map<string, string>();
    const ownerKey = (owner: string): string => {
      const known = owners.get(owner);
      if (known !== undefined) return known;
      let id = data.keyMap[owner];
      if (id === undefined && data.format === 'sqlite') {
        // The original's owner ids are its own keys: each gets an Engram key once (found again by name on a re-import).
        const name = `${OWNER_KEY_PREFIX}${owner}`;
        const existing = this.apiKeys.list().find((k) => k.name === name && k.revokedAt === null);
        if (existing) id = existing.id;
        else {
          const k = this.apiKeys.create(name);
          id = k.id;
          result.createdKeys.push({ owner, apiKeyId: k.id, prefix: k.prefix });
          secrets.push(`${owner}\t${k.id}\t${k.key}`);
        }
      }
      id ??= owner;
      owners.set(owner, id);
      if (id !== owner) result.ownerKeys[owner] = id;
      return id;
    };

    let source: ReturnType<ImportService['ndjson']> | ReturnType<ImportService['sqlite']>;
    try {
      source = data.format === 'ndjson' ? this.ndjson(file, importedAt) : this.sqlite(file, importedAt);
    } catch (err) {
      // Never importable (the job is not retried): the upload goes now, as after a finished import.
      if (err instanceof UnusableUploadError) await fs.promises.rm(file, { force: true });
      throw err;
    }
    result.total = await source.total();
    await hooks.progress({ phase: 'importing', done: 0, total: result.total, failed: 0 });
    const ctx = { source: 'import' as const, jobId: hooks.jobId };
    // The embeddings of one batch are enqueued while the next batch is written (at most one enqueue in flight).
    let enqueuing: Promise<void> = Promise.resolve();
    try {
      let batch: SourceItem[] = [];
      const flush = async () => {
        if (batch.length === 0) return;
        const items = batch;
        batch = [];
        // Owners resolve (and new keys are made) before the batch's transaction, which only reads the map.
        for (const item of items) if ('record' in item) ownerKey(item.record.owner);
        const { changes } = this.d.memory.transaction((report) => {
          for (const item of items) {
            if ('error' in item) {
              this.fail(result, item.at, item.error);
              continue;
            }
            for (const w of item.warnings) this.warn(result, item.at, w);
            const { owner, ...rest } = item.record;
            try {
              const r = this.d.memory.importInTx({ ...rest, apiKeyId: ownerKey(owner) }, ctx);
              result[r.outcome]++;
              report(r.change);
            } catch (err) {
              this.fail(result, item.at, importError(err));
            }
          }
        });
        result.processed += items.length;
        await enqueuing;
        enqueuing = this.enqueueEmbeds(changes).then((n) => {
          result.embedsQueued += n;
        });
        await hooks.progress({ phase: 'importing', done: result.processed, total: result.total, failed: result.failed });
        await hooks.checkpoint();
      };
      for await (const item of source.items()) {
        batch.push(item);
        if (batch.length >= BATCH) await flush();
      }
      await flush();
      await enqueuing;
    } finally {
      await enqueuing.catch(() => undefined);
      source.close();
      if (secrets.length) {
        // Secrets of keys made for unmapped owners: shown to no one over HTTP or in logs; the operator reads them on the host.
        result.keysFile = path.join(this.dir, `${data.uploadId}.keys.tsv`);
        await fs.promises.appendFile(result.keysFile, `${secrets.join('\n')}\n`, { mode: 0o600 });
      }
    }
    await fs.promises.rm(file, { force: true });
    return result;
  }

  private fail(result: ImportResult, line: number, error: string): void {
    result.failed++;
    if (result.errors.length < REPORT_LIMIT) result.errors.push({ line, error });
  }

  private warn(result: ImportResult, line: number, warning: string): void {
    result.warningCount++;
    if (result.warnings.length < REPORT_LIMIT) result.warnings.push({ line, warning });
  }

  private async enqueueEmbeds(changes: MemoryChange[]): Promise<number> {
    // A failed enqueue leaves needs_reindex set; repair-sweep enqueues those rows later.
    return this.d.reindex.enqueueEmbeds(changes, { bulk: true }).catch((err) => {
      this.d.log.warn({ err: { message: (err as Error).message } }, 'could not enqueue embeddings for imported rows; repair-sweep will');
      return 0;
    });
  }

  private ndjson(file: string, importedAt: string) {
    let stream: fs.ReadStream | null = null;
    return {
      total: async () => {
        let n = 0;
        let last = 0x0a;
        for await (const chunk of fs.createReadStream(file) as AsyncIterable<Buffer>) {
          for (let i = chunk.indexOf(0x0a); i !== -1; i = chunk.indexOf(0x0a, i + 1)) n++;
          if (chunk.length) last = chunk[chunk.length - 1];
        }
        return last === 0x0a ? n : n + 1;
      },
      items: async function* (): AsyncGenerator<SourceItem> {
        stream = fs.createReadStream(file, { encoding: 'utf8' });
        const lines = readline.createInterface({ input: stream, crlfDelay: Infinity });
        let at = 0;
        for await (const line of lines) {
          at++;
          if (line.trim() === '') continue;
          yield parseNdjsonLine(line, at, importedAt);
        }
      },
      close: () => stream?.destroy(),
    };
  }

  private sqlite(file: string, importedAt: string) {
    let db: Database.Database | undefined;
    try {
      db = new Database(file, { readonly: true, fileMustExist: true });
      // Only a table is read: a view is SQL from the file, run synchronously in the worker (a recursive one never returns).
      const kind = db.prepare("SELECT type FROM sqlite_master WHERE name = 'memories' COLLATE NOCASE").pluck().get();
      if (kind !== undefined && kind !== 'table') throw new Error(`memories is not a table (it is a ${String(kind)})`);
      const cols = (db.prepare("SELECT name FROM pragma_table_info('memories')").all() as { name: string }[]).map((c) => c.name);
      if (!cols.includes('content')) throw new Error('the database has no memories table with a content column');
    } catch (err) {
      if (db?.open) db.close();
      throw new UnusableUploadError(`not a database of the original product: ${(err as Error).message}`);
    }
    const opened = db;
    return {
      total: async () => (opened.prepare('SELECT count(*) AS n FROM memories').get() as { n: number }).n,
      items: async function* (): AsyncGenerator<SourceItem> {
        for (const row of opened.prepare('SELECT rowid AS _rowid, * FROM memories ORDER BY rowid').iterate() as IterableIterator<OriginalRow>) {
          yield fromOriginalRow(row, importedAt);
        }
      },
      close: () => {
        if (opened.open) opened.close();
      },
    };
  }
}

function importError(err: unknown): string {
  if (err instanceof ImportRecordError) return err.message;
  const e = err as { code?: unknown; message?: unknown };
  if (e?.code === 'SQLITE_CONSTRAINT_UNIQUE') return 'another memory of this API key already uses the key';
  return typeof e?.message === 'string' ? e.message : String(err);
}
