import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { Env } from '../../src/config/env';

export const ROOT = path.resolve(__dirname, '../..');
export const CLI = path.join(ROOT, 'dist/src/cli.js');

/** Raw env strings for a child process built from a parsed test Env plus overrides. */
export function childEnv(env: Env, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    NODE_ENV: 'test',
    DATA_DIR: env.DATA_DIR,
    QUEUE_PREFIX: env.QUEUE_PREFIX,
    REDIS_URL: env.REDIS_URL,
    MANAGEMENT_TOKEN: env.MANAGEMENT_TOKEN,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
    ...extra,
  };
}

export interface Child {
  proc: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Spawns `engram <role>` from the built output. */
export function spawnEngram(role: 'api' | 'worker', env: NodeJS.ProcessEnv): Child {
  const proc = spawn(process.execPath, [CLI, role], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (d) => (out += d));
  proc.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
  return { proc, output: () => out, exited };
}
