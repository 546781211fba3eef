#!/usr/bin/env node
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Command } from 'commander';
import pino from 'pino';
import { SingleBar, Presets } from 'cli-progress';
import { ApiKeyService } from './auth/api-keys.service';
import { resolveManagementToken } from './auth/management-token';
import { EnvError, loadEnv, redisUrl, type Env } from './config/env';
import { openServices, openStorage } from './services';
import { ExportService } from './memory/export.service';
import { openDatabase } from './db/connection';
import { migrate } from './db/migrate';
import { createLogger } from './logger';
import { childMemoryEnv } from './heap-growth';
import { JobEventsHub } from './queue/job-events';
import { readJob } from './queue/job-state';
import { QUEUE_NAMES, type QueueName } from './config/queue-names';
import { QueueLayer } from './queue/queues';

function env(): Env {
  try {
    return loadEnv();
  } catch (err) {
    if (err instanceof EnvError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
}

function ports(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname || '127.0.0.1', port: Number(u.port || 6379) };
}

function answers(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(timeoutMs, () => done(false));
    s.once('connect', () => {
      s.write('PING\r\n');
    });
    s.once('data', (d) => done(d.toString().startsWith('+PONG') || d.toString().startsWith('-NOAUTH')));
    s.once('error', () => done(false));
  });
}

function onPath(bin: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${bin}`], { stdio: 'ignore' }).status === 0;
}

/** `engram up`: Redis if needed (DESIGN §1), then api + one worker as child processes. */
async function up(): Promise<void> {
  const e = env();
  const log = createLogger(e.LOG_LEVEL, 'engram-up');
  // Generate the token (and apply migrations) once, before the children race for it.
  resolveManagementToken(e, log);
  openStorage(e, log).db.close();

  const children: ChildProcess[] = [];
  let redisChild: ChildProcess | null = null;
  if (!e.REDIS_URL) {
    const { host, port } = ports(redisUrl(e));
    if (!(await answers(host, port))) {
      if (!onPath('redis-server')) {
        console.error(
          'Engram needs Redis. Nothing answers on 127.0.0.1:6379 and redis-server is not installed.\n' +
            'Install it (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis), or set REDIS_URL, or use docker compose up.',
        );
        process.exit(1);
      }
      const dir = path.join(e.DATA_DIR, 'redis');
      fs.mkdirSync(dir, { recursive: true });
      redisChild = spawn(
        'redis-server',
        ['--bind', '127.0.0.1', '--port', String(port), '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'everysec', '--maxmemory-policy', 'noeviction', '--save', ''],
        { stdio: ['ignore', 'ignore', 'inherit'] },
      );
      redisChild.on('error', (err) => log.error({ err: { message: err.message } }, 'could not run redis-server'));
      log.info({ dir, port }, 'no Redis answered: started redis-server with its data (AOF) under DATA_DIR/redis');
      for (let i = 0; i < 50 && !(await answers(host, port)); i++) await new Promise((r) => setTimeout(r, 100));
    }
  }
  const self = process.argv[1];
  for (const role of ['api', 'worker']) {
    const child = spawn(process.execPath, [self, role], { stdio: 'inherit', env: childMemoryEnv(process.env) });
    children.push(child);
    child.on('error', (err) => {
      log.error({ role, err: { message: err.message } }, 'could not start child process; stopping engram');
      void stop(1);
    });
    child.on('exit', (code, signal) => {
      if (stopping) return;
      log.error({ role, code, signal }, 'child process exited; stopping engram');
      void stop(code ?? 1);
    });
  }
  let stopping = false;
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    await Promise.all(
      children.map(
        (c) =>
          new Promise<void>((r) => {
            if (c.exitCode !== null || c.signalCode !== null) return r();
            c.once('exit', () => r());
            c.kill('SIGTERM');
          }),
      ),
    );
    if (redisChild) {
      await new Promise<void>((r) => {
        redisChild!.once('exit', () => r());
        redisChild!.kill('SIGTERM');
      });
    }
    process.exit(code);
  };
  process.on('SIGTERM', () => void stop(0));
  process.on('SIGINT', () => void stop(0));
}

const program = new Command().name('engram').description('Engram: self-hosted memory for LLM applications');

program.command('up').description('run api + one worker (and Redis if none answers and redis-server is installed)').action(up);
program
  .command('api')
  .description('run the api process')
  .action(async () => (await import('./api')).runApiProcess());
program
  .command('worker')
  .description('run a worker process (WORKER_QUEUES selects queues)')
  .action(async () => (await import('../workers/main')).runWorkerProcess());
program
  .command('mcp')
  .description('serve MCP (the memory tools) over stdio, acting with the management token (tools need apiKeyId)')
  .action(async () => {
    const e = env();
    // stdout carries the protocol: logs go to stderr.
    const log = createLogger(e.LOG_LEVEL, 'engram-mcp', pino.destination(2));
    const { buildApiContext, contextSteps } = await import('./api');
    const { serveStdio } = await import('./mcp/stdio');
    const ctx = buildApiContext(e, log);
    const { server, closed } = await serveStdio({ backends: ctx.backends, settings: ctx.settings, retrieval: ctx.retrieval, log });
    let done = false;
    const stop = async (code: number) => {
      if (done) return;
      done = true;
      await server.close().catch(() => undefined);
      // What the api's shutdown closes, in its order; one that fails does not keep the others open.
      for (const [, run] of contextSteps(ctx)) await Promise.resolve().then(run).catch(() => undefined);
      process.exit(code);
    };
    process.on('SIGTERM', () => void stop(0));
    process.on('SIGINT', () => void stop(0));
    await closed;
    await stop(0);
  });
program
  .command('migrate')
  .description('apply pending database migrations')
  .action(() => {
    const e = env();
    const log = createLogger(e.LOG_LEVEL === 'info' ? 'warn' : e.LOG_LEVEL);
    const db = openDatabase({ dataDir: e.DATA_DIR, busyTimeoutMs: e.SQLITE_BUSY_TIMEOUT_MS, disableVec: true, log });
    try {
      const { applied } = migrate(db.db, log);
      console.log(applied.length ? `applied: ${applied.join(', ')}` : 'database is up to date');
    } finally {
      db.close();
    }
  });

const keys = program.command('keys').description('manage client API keys (local database)');
const keyService = () => {
  const e = env();
  const s = openStorage(e, createLogger('warn'));
  return { svc: new ApiKeyService(s.db.db), close: () => s.db.close() };
};
keys
  .command('create')
  .argument('[name]', 'a label for the key', 'default')
  .action((name: string) => {
    const { svc, close } = keyService();
    const k = svc.create(name);
    close();
    console.log(`id:     ${k.id}\nname:   ${k.name}\nkey:    ${k.key}\n(the key is shown once; store it now)`);
  });
keys.command('list').action(() => {
  const { svc, close } = keyService();
  for (const k of svc.list()) console.log(`${k.id}  ${k.prefix}…  ${k.name}  created ${k.createdAt}${k.revokedAt ? `  REVOKED ${k.revokedAt}` : ''}`);
  close();
});
keys
  .command('revoke')
  .argument('<id>')
  .action((id: string) => {
    const { svc, close } = keyService();
    const ok = svc.revoke(id);
    close();
    console.log(ok ? `revoked ${id}` : `no active key ${id}`);
    if (!ok) process.exitCode = 1;
  });

const jobs = program
  .command('jobs')
  .description('job counts per queue')
  .action(async () => {
    const e = env();
    const log = createLogger('silent');
    const s = openStorage(e, log);
    const q = new QueueLayer(e, log, s.db.db, 'worker');
    try {
      const rows = await Promise.all(QUEUE_NAMES.map(async (n) => [n, await q.queue(n).getJobCounts()] as const));
      console.table(Object.fromEntries(rows));
      console.log(`outbox: ${q.outboxCount()}`);
    } finally {
      await q.close();
      s.db.close();
    }
  });
/** Follows one job with a progress bar (on stderr) until it ends; exits 0 when it completed, 1 when it failed. */
async function watchJob(queue: QueueName, id: string, describe: (result: unknown) => string = (r) => `completed: ${JSON.stringify(r)}`): Promise<void> {
  const e = env();
  const log = createLogger('silent');
  const s = openStorage(e, log);
  const q = new QueueLayer(e, log, s.db.db, 'worker');
  const hub = new JobEventsHub(e, log, q);
  const bar = new SingleBar({ format: ' {bar} {percentage}% | {value}/{total} | {phase}', hideCursor: true, stream: process.stderr }, Presets.shades_classic);
  let started = false;
  const show = (p: unknown) => {
    const o = (typeof p === 'object' && p ? p : { done: Number(p) || 0, total: 100 }) as { done?: number; total?: number; phase?: string };
    const total = Math.max(1, o.total ?? 100);
    if (!started) {
      bar.start(total, o.done ?? 0, { phase: o.phase ?? '' });
      started = true;
    }
    bar.setTotal(total);
    bar.update(o.done ?? 0, { phase: o.phase ?? '' });
  };
  // The end can arrive twice (as an event and in the state read after subscribing): it is reported once.
  let finishing = false;
  const finish = async (code: number, msg: string) => {
    if (finishing) return;
    finishing = true;
    if (started) bar.stop();
    (code === 0 ? console.log : console.error)(msg);
    await hub.close();
    await q.close();
    s.db.close();
    process.exit(code);
  };
  await hub.subscribe(queue, id, (ev) => {
    if (ev.type === 'progress') show(ev.data);
    else if (ev.type === 'completed') void finish(0, describe(ev.returnvalue));
    else void finish(1, `failed: ${ev.failedReason}`);
  });
  const found = await readJob(q.queue(queue), id);
  if (!found) return finish(1, `no job ${id} on ${queue}`);
  const { job, state } = found;
  if (state === 'completed') return finish(0, describe(job.returnvalue));
  if (state === 'failed') return finish(1, `failed: ${job.failedReason}`);
  show(job.progress);
}

jobs
  .command('watch')
  .argument('<queue>', QUEUE_NAMES.join('|'))
  .argument('<id>')
  .description('follow one job with a progress bar until it ends')
  .action(async (queue: string, id: string) => {
    if (!(QUEUE_NAMES as readonly string[]).includes(queue)) {
      console.error(`unknown queue ${queue}; expected ${QUEUE_NAMES.join(', ')}`);
      process.exit(2);
    }
    await watchJob(queue as QueueName, id);
  });

program
  .command('export')
  .description("write one API key's memories as NDJSON (stdout, or --out), with a progress bar on stderr")
  .requiredOption('--key <apiKeyId>', 'the API key id whose memories to export')
  .option('--session <sessionId>', 'only this session')
  .option('--out <file>', 'write to this file instead of stdout')
  .action(async (opts: { key: string; session?: string; out?: string }) => {
    const e = env();
    const s = openStorage(e, createLogger('silent'));
    const exporter = new ExportService(s.db.file, e.SQLITE_BUSY_TIMEOUT_MS);
    s.db.close();
    const filter = { apiKeyId: opts.key, sessionId: opts.session };
    const total = exporter.count(filter);
    const bar = new SingleBar({ format: ' {bar} {percentage}% | {value}/{total} memories', hideCursor: true, stream: process.stderr }, Presets.shades_classic);
    bar.start(total, 0);
    const out = opts.out ? fs.createWriteStream(opts.out, { mode: 0o600 }) : process.stdout;
    try {
      await pipeline(
        exporter.stream(filter, (n) => bar.update(n)),
        out,
      );
    } finally {
      bar.stop();
    }
    console.error(`exported ${total} memories of ${opts.key}${opts.out ? ` to ${opts.out}` : ''}`);
  });

program
  .command('import')
  .description('import an Engram NDJSON export or an original-product database file (a worker does the work; its progress is shown)')
  .argument('<file>', 'the .ndjson export or the SQLite database file')
  .option('--map <old=new...>', 'owner id in the file → Engram API key id (repeatable)', (v: string, prev: string[] = []) => [...prev, v])
  .action(async (file: string, opts: { map?: string[] }) => {
    const keyMap: Record<string, string> = {};
    for (const m of opts.map ?? []) {
      const i = m.indexOf('=');
      if (i < 0 || i === m.length - 1) {
        console.error(`--map expects old=new, got ${JSON.stringify(m)}`);
        process.exit(2);
      }
      keyMap[m.slice(0, i)] = m.slice(i + 1);
    }
    const e = env();
    const log = createLogger('silent');
    const s = openServices(e, log, 'worker');
    let jobId: string;
    try {
      const size = fs.statSync(file).size;
      const upload = await s.importer.storeUpload(fs.createReadStream(file), size);
      const job = await s.queues.enqueue('import-memories', { uploadId: upload.uploadId, format: upload.format, keyMap });
      jobId = job.jobId;
      console.error(`uploaded ${upload.bytes} bytes (${upload.format}); job ${job.jobId} on queue import`);
    } finally {
      await s.queues.close();
      s.db.close();
    }
    await watchJob('import', jobId, (r) => {
      const x = r as { created: number; updated: number; unchanged: number; failed: number; errors: { line: number; error: string }[]; keysFile: string | null };
      const lines = [`imported: ${x.created} created, ${x.updated} updated, ${x.unchanged} unchanged, ${x.failed} failed`];
      for (const err of x.errors.slice(0, 20)) lines.push(`  line ${err.line}: ${err.error}`);
      if (x.keysFile) lines.push(`new API keys for unmapped owners (secrets): ${x.keysFile}`);
      return lines.join('\n');
    });
  });

program.parseAsync(process.argv).catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
