import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';

/** A built worker process (`node <dist>/src/cli.js worker`) spawned by a bench, with the tail of its stderr. */
export interface BenchWorker {
  child: ChildProcess;
  startedAt: number;
  stderr: () => string;
}

/** Spawns `node <cli> worker` with the bench's environment on top of this one (production mode, warnings only). */
export function spawnBenchWorker(cli: string, env: NodeJS.ProcessEnv): BenchWorker {
  const child = spawn(process.execPath, [cli, 'worker'], {
    env: { ...process.env, NODE_ENV: 'production', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr?.on('data', (d: Buffer) => {
    err = (err + d.toString()).slice(-4000);
  });
  child.on('error', (e) => {
    err += `\nspawn error: ${e.message}`;
  });
  return { child, startedAt: performance.now(), stderr: () => err };
}

/** SIGTERM (graceful), then SIGKILL if it has not exited within 15 s. */
export async function stopBenchWorker(w: BenchWorker): Promise<void> {
  if (w.child.exitCode !== null || w.child.signalCode !== null) return;
  const exited = once(w.child, 'exit');
  w.child.kill('SIGTERM');
  const t = setTimeout(() => w.child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(t);
}

/** Polls `probe` until it returns non-null; fails at once if the worker exits, and after `limitMs` (a stuck worker never hangs a bench). */
export async function untilWorker<T>(what: string, w: BenchWorker, probe: () => Promise<T | null> | T | null, pollMs: number, limitMs: number): Promise<T> {
  const started = performance.now();
  for (;;) {
    const v = await probe();
    if (v !== null) return v;
    if (w.child.exitCode !== null) throw new Error(`worker exited (${w.child.exitCode}) while waiting for ${what}: ${w.stderr()}`);
    if (performance.now() - started > limitMs) throw new Error(`gave up waiting for ${what} after ${limitMs / 1000} s`);
    await new Promise((r) => setTimeout(r, pollMs));
  }
}
