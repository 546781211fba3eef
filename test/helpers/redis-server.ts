import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import IORedis from 'ioredis';

// Self-contained (no src/ imports): the jest globalSetup uses this file too.

/** A free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
    s.once('error', reject);
  });
}

/** True when `cmd` is an executable file in one of PATH's directories. */
export function onPath(cmd: string): boolean {
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => {
    try {
      fs.accessSync(path.join(dir || '.', cmd), fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** True when a Redis at `url` answers PING within `timeoutMs`; never retries, never leaves a connection open. */
export async function redisAnswers(url: string, timeoutMs = 1000): Promise<boolean> {
  const c = new IORedis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: timeoutMs, enableOfflineQueue: false });
  c.on('error', () => {});
  try {
    await c.connect();
    return (await c.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    c.disconnect();
  }
}

export interface TestRedisOptions {
  /** AOF with fsync on every write, so a restart (even after SIGKILL) keeps the data. Default true. */
  persist?: boolean;
}

const live = new Set<TestRedis>();
// Last resort outside jest's sandbox (where 'exit' never reaches a test's `process`): no redis-server left behind.
process.once('exit', () => {
  for (const r of live) r.killNow();
});

/** A redis-server of the test's own, on its own port and temp dir (removed at stop(true)/remove() or at exit). */
export class TestRedis {
  private proc: ChildProcess | null = null;
  private output = '';
  readonly dir = fs.mkdtempSync(path.join(process.env.ENGRAM_TEST_TMPDIR ?? os.tmpdir(), 'redis-'));

  constructor(
    readonly port: number,
    private readonly options: TestRedisOptions = {},
  ) {
    live.add(this);
  }

  /** Starts a server on a free port (retrying when another process grabs the port first). */
  static async start(options: TestRedisOptions = {}): Promise<TestRedis> {
    let lastError: unknown;
    for (let attempt = 0; attempt < 3; attempt++) {
      const r = new TestRedis(await freePort(), options);
      try {
        await r.start();
        return r;
      } catch (err) {
        lastError = err;
        await r.remove();
      }
    }
    throw lastError;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  async start(): Promise<void> {
    const persistence = this.options.persist === false ? ['--appendonly', 'no'] : ['--appendonly', 'yes', '--appendfsync', 'always'];
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--save', '', ...persistence, '--maxmemory-policy', 'noeviction'];
    const proc = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc = proc;
    this.output = '';
    const collect = (d: Buffer) => {
      if (this.output.length < 20_000) this.output += d.toString();
    };
    proc.stdout!.on('data', collect);
    proc.stderr!.on('data', collect);
    let failed: Error | null = null;
    proc.once('error', (err) => (failed = err));
    proc.once('exit', (code, signal) => (failed ??= new Error(`redis-server exited (code ${code}, signal ${signal})`)));

    const until = Date.now() + 10_000;
    while (Date.now() < until && !failed) {
      if (await redisAnswers(this.url, 500)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    const why = failed ? (failed as Error).message : 'no PONG within 10 s';
    this.killNow(false);
    throw new Error(`redis-server on port ${this.port} did not start: ${why}\n${this.output.trim()}`);
  }

  /** Stops the server (SIGKILL when hard, as a crash would); the data dir stays for a restart. */
  async stop(hard = false): Promise<void> {
    const p = this.proc;
    this.proc = null;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => p.kill('SIGKILL'), 5000);
      p.once('exit', () => {
        clearTimeout(force);
        resolve();
      });
      p.kill(hard ? 'SIGKILL' : 'SIGTERM');
    });
  }

  /** Stops the server and removes its data dir. */
  async remove(): Promise<void> {
    await this.stop();
    fs.rmSync(this.dir, { recursive: true, force: true });
    live.delete(this);
  }

  /** Synchronous kill (for exit handlers); removes the dir unless keepDir. */
  killNow(removeDir = true): void {
    const p = this.proc;
    if (p && p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    this.proc = null;
    if (removeDir) {
      fs.rmSync(this.dir, { recursive: true, force: true });
      live.delete(this);
    }
  }
}
