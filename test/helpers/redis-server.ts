import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import IORedis from 'ioredis';
import { tempDir } from './env';

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

async function waitFor(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('timed out');
}

/** A redis-server of the test's own, on its own port, with AOF so a restart keeps its data. */
export class TestRedis {
  private proc: ChildProcess | null = null;
  readonly dir = tempDir('redis');
  constructor(readonly port: number) {}

  static async start(): Promise<TestRedis> {
    const r = new TestRedis(await freePort());
    await r.start();
    return r;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    this.proc = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--appendonly', 'yes', '--appendfsync', 'always', '--save', '', '--maxmemory-policy', 'noeviction'],
      { stdio: 'ignore' },
    );
    await waitFor(async () => {
      const c = new IORedis(this.url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      try {
        await c.connect();
        return (await c.ping()) === 'PONG';
      } catch {
        return false;
      } finally {
        c.disconnect();
      }
    }, 10_000);
  }

  /** Stops the server (SIGKILL when hard, as a crash would). */
  async stop(hard = false): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      p.once('exit', () => resolve());
      p.kill(hard ? 'SIGKILL' : 'SIGTERM');
    });
    this.proc = null;
  }
}
