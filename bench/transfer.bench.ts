import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { pipeline } from 'node:stream/promises';
import { loadEnv, type Env } from '../src/config/env';
import { ExportService } from '../src/memory/export.service';
import { silentLog, tempDir, testEnv, testPrefix } from '../test/helpers/env';

// The services and the worker are loaded only by the children that use them, so the export child's
// peak RSS is the export's, not that of modules it never runs (embedding sources, BullMQ, …).
const services = () => import('../src/services');

/**
 * Import/export at scale (issue #12): the import-memories job over a 50,000-line NDJSON upload
 * run by a real worker (rows/s, progress reports, peak RSS of the worker process), beside a plain
 * baseline in the same run (readline + JSON.parse + bare INSERTs, no validation, history or
 * upsert); and the NDJSON export of 200,000 rows (peak RSS), beside the naive export that loads
 * all rows first. Each figure comes from a child process of its own, so peak RSS is that work's.
 */
const IMPORT_ROWS = 50_000;
const EXPORT_ROWS = 200_000;
const CHILD_ENV = 'ENGRAM_TRANSFER_BENCH_CHILD';

type Figures = Record<string, string | number>;

function line(i: number, apiKeyId: string): string {
  const at = new Date(Date.UTC(2025, 0, 1) + i * 60_000).toISOString();
  return JSON.stringify({
    id: crypto.randomUUID(),
    apiKeyId,
    sessionId: i % 7 === 0 ? `s${i % 50}` : '',
    type: (['factual', 'episodic', 'procedural', 'semantic'] as const)[i % 4],
    key: `fact:${i}`,
    content: `Memory ${i}: the user mentioned topic ${i % 997} while talking about project ${i % 89}. It matters for later.`,
    metadata: { category: 'bench', n: i },
    createdAt: at,
    updatedAt: at,
    expiresAt: null,
    accessCount: i % 5,
    lastAccessedAt: null,
  });
}

async function writeNdjson(file: string, rows: number, apiKeyId: string): Promise<void> {
  const out = fs.createWriteStream(file);
  for (let i = 0; i < rows; i++) if (!out.write(`${line(i, apiKeyId)}\n`)) await new Promise<void>((r) => out.once('drain', () => r()));
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
}

const peakRssMb = () => Math.round((process.resourceUsage().maxRSS / 1024) * 10) / 10;

/** Runs one measurement in a child process (this file, compiled) and returns what it printed as JSON. */
function child(mode: string, args: Record<string, string>): Promise<Figures> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [__filename], { env: { ...process.env, [CHILD_ENV]: JSON.stringify({ mode, ...args }) }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
    p.on('error', reject);
    p.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`${mode} child exited ${code}: ${err}`));
      try {
        resolve(JSON.parse(out.trim().split('\n').pop() ?? '{}') as Figures);
      } catch (e) {
        reject(e);
      }
    });
  });
}

function childEnv(dataDir: string, prefix: string): Env {
  return loadEnv({ ...process.env, NODE_ENV: 'production', LOG_LEVEL: 'silent', DATA_DIR: dataDir, QUEUE_PREFIX: prefix, REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0', COMPACT_EVERY_MS: '0', WORKER_QUEUES: 'import', IMPORT_MAX_BYTES: String(1024 * 1_048_576), REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
}

/** Child: the import-memories job, through a real BullMQ worker in this process (only the import queue served). */
async function childImport(a: { dataDir: string; prefix: string; file: string }): Promise<Figures> {
  const env = childEnv(a.dataDir, a.prefix);
  const { startWorker } = await import('../workers/main');
  const w = await startWorker(env, silentLog());
  const rssBefore = peakRssMb();
  try {
    const upload = await w.ctx.importer.storeUpload(fs.createReadStream(a.file), fs.statSync(a.file).size);
    const t0 = performance.now();
    const job = await w.ctx.queues.enqueue('import-memories', { uploadId: upload.uploadId, format: upload.format, keyMap: {} });
    const q = w.ctx.queues.queue('import');
    let progressReports = 0;
    let lastProgress = '';
    for (;;) {
      const j = await q.getJob(job.jobId);
      const state = await j?.getState();
      const p = JSON.stringify(j?.progress ?? '');
      if (p !== lastProgress) {
        progressReports++;
        lastProgress = p;
      }
      if (state === 'failed') throw new Error(`import failed: ${j?.failedReason}`);
      if (state === 'completed') {
        const s = (performance.now() - t0) / 1000;
        const r = j!.returnvalue as { created: number; failed: number; embedsQueued: number };
        return { rows: r.created, failed: r.failed, seconds: Number(s.toFixed(2)), rowsPerS: Math.round(r.created / s), progressSeen: progressReports, embedsQueued: r.embedsQueued, rssAtStartMb: rssBefore, peakRssMb: peakRssMb() };
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    for (const qn of ['import', 'embedding'] as const) await w.ctx.queues.queue(qn).obliterate({ force: true }).catch(() => undefined);
    await w.stop();
  }
}

/** Child: the plain baseline — readline, JSON.parse and bare INSERTs in transactions of 500, nothing else. */
async function childBaseline(a: { dataDir: string; file: string }): Promise<Figures> {
  const env = childEnv(a.dataDir, testPrefix('bench-base'));
  const { openStorage } = await services();
  const { contentHash } = await import('../src/memory/memory.service');
  const s = openStorage(env, silentLog());
  const rssBefore = peakRssMb();
  const ins = s.db.db.prepare(
    `INSERT INTO memories (id, api_key_id, session_id, type, key, content, metadata, created_at, updated_at, expires_at, content_hash, access_count)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const flush = s.db.db.transaction((rows: Record<string, unknown>[]) => {
    for (const r of rows) ins.run(r.id, r.apiKeyId, r.sessionId || null, r.type, r.key, r.content, JSON.stringify(r.metadata), r.createdAt, r.updatedAt, r.expiresAt, contentHash(String(r.content)), r.accessCount);
  });
  const t0 = performance.now();
  let batch: Record<string, unknown>[] = [];
  let n = 0;
  for await (const l of readline.createInterface({ input: fs.createReadStream(a.file), crlfDelay: Infinity })) {
    batch.push(JSON.parse(l));
    if (batch.length === 500) {
      flush.immediate(batch);
      n += batch.length;
      batch = [];
    }
  }
  flush.immediate(batch);
  n += batch.length;
  const sec = (performance.now() - t0) / 1000;
  s.db.close();
  return { rows: n, seconds: Number(sec.toFixed(2)), rowsPerS: Math.round(n / sec), rssAtStartMb: rssBefore, peakRssMb: peakRssMb() };
}

/** Child: the export stream (ExportService: what GET /api/memory/export and `engram export` send) of every row into a file, in a process that loads nothing else. */
async function childExport(a: { dataDir: string; apiKeyId: string; out: string }): Promise<Figures> {
  const exporter = new ExportService(path.join(a.dataDir, 'engram.db'), 5000);
  const rssBefore = peakRssMb();
  let rows = 0;
  const t0 = performance.now();
  await pipeline(
    exporter.stream({ apiKeyId: a.apiKeyId }, (n) => (rows = n)),
    fs.createWriteStream(a.out),
  );
  const sec = (performance.now() - t0) / 1000;
  return { rows, seconds: Number(sec.toFixed(2)), rowsPerS: Math.round(rows / sec), fileMb: Math.round(fs.statSync(a.out).size / 1_048_576), rssAtStartMb: rssBefore, peakRssMb: peakRssMb() };
}

/** Child: the naive export — every row loaded with .all(), then written. */
async function childNaiveExport(a: { dataDir: string; apiKeyId: string; out: string }): Promise<Figures> {
  const Database = (await import('better-sqlite3')).default;
  const db = new Database(path.join(a.dataDir, 'engram.db'), { readonly: true });
  const rssBefore = peakRssMb();
  const t0 = performance.now();
  const all = db.prepare('SELECT * FROM memories WHERE api_key_id = ? ORDER BY memory_id').all(a.apiKeyId);
  fs.writeFileSync(a.out, all.map((r) => JSON.stringify(r)).join('\n'));
  const sec = (performance.now() - t0) / 1000;
  db.close();
  return { rows: all.length, seconds: Number(sec.toFixed(2)), rowsPerS: Math.round(all.length / sec), rssAtStartMb: rssBefore, peakRssMb: peakRssMb() };
}

/** Seeds the export data dir: 200k rows of one key through the import path of the store (history included), in transactions of 5,000. */
async function seedExport(dataDir: string, apiKeyId: string): Promise<void> {
  const env = childEnv(dataDir, testPrefix('bench-seed'));
  const { openStorage } = await services();
  const s = openStorage(env, silentLog());
  for (let i = 0; i < EXPORT_ROWS; i += 5000) {
    s.memory.transaction(() => {
      for (let j = i; j < Math.min(EXPORT_ROWS, i + 5000); j++) {
        const r = JSON.parse(line(j, apiKeyId));
        s.memory.importInTx({ ...r, sessionId: r.sessionId }, { source: 'import' });
      }
    });
  }
  s.db.close();
}

/** `npm run bench transfer` */
export async function runTransferBench(): Promise<void> {
  // A parsed env only to fail early on a bad REDIS_URL; children get their own.
  testEnv();
  const dir = tempDir('bench-transfer');
  const file = path.join(dir, 'import.ndjson');
  await writeNdjson(file, IMPORT_ROWS, 'bench-import');
  console.log(`import file: ${IMPORT_ROWS} lines, ${(fs.statSync(file).size / 1_048_576).toFixed(1)} MB`);

  const imp = await child('import', { dataDir: path.join(dir, 'import-job'), prefix: testPrefix('bench-import'), file });
  const base = await child('baseline', { dataDir: path.join(dir, 'import-base'), file });
  console.table({ 'import-memories job (worker)': imp, 'baseline: readline + bare INSERT': base });

  const expDir = path.join(dir, 'export');
  const t0 = performance.now();
  await seedExport(expDir, 'bench-export');
  console.log(`seeded ${EXPORT_ROWS} rows for the export in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const exp = await child('export', { dataDir: expDir, apiKeyId: 'bench-export', out: path.join(dir, 'export.ndjson') });
  const naive = await child('naive-export', { dataDir: expDir, apiKeyId: 'bench-export', out: path.join(dir, 'naive.ndjson') });
  console.table({ 'export stream (ExportService)': exp, 'baseline: naive .all() export': naive });
}

if (process.env[CHILD_ENV]) {
  // Each child reads the fields its mode needs (the parent wrote them).
  const a = JSON.parse(process.env[CHILD_ENV]) as { mode: string; dataDir: string; prefix: string; file: string; apiKeyId: string; out: string };
  const modes: Record<string, (x: typeof a) => Promise<Figures>> = { import: childImport, baseline: childBaseline, export: childExport, 'naive-export': childNaiveExport };
  modes[a.mode](a).then(
    (f) => {
      console.log(JSON.stringify(f));
      process.exit(0);
    },
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
