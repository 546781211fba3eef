import { Queue } from 'bullmq';
import { redisUrl, type Env } from '../../src/config/env';
import type { QueueName } from '../../src/config/queue-names';
import { TEST_TOKEN } from '../helpers/env';
import { childEnv, spawnEngram, type Child } from '../helpers/processes';
import { freePort } from '../helpers/redis-server';
import { waitUntil } from '../helpers/wait';

/** A real api and N real worker processes over one DATA_DIR and one Redis, as `engram api` / `engram worker` run them. */
export interface Stack {
  base: string;
  api: Child;
  workers: Child[];
  mgmt: Record<string, string>;
  /** An API key's id and secret (created at start). */
  key: { id: string; key: string };
  /** Sends one chat; resolves with its status (and the time it took), never throws (a network error is status 0). */
  chat(content: string, opts?: { stream?: boolean; timeoutMs?: number }): Promise<{ status: number; ms: number }>;
  /** Memories of the stack's key (total and contents, up to 2000). */
  memories(): Promise<{ total: number; contents: string[] }>;
  /** All processes' output, last `n` characters each (for failure messages). */
  logs(n?: number): string;
  stop(): Promise<void>;
  extra: Record<string, string>;
  crashWorker(i?: number): Promise<void>;
  /** Stops worker `i` with SIGTERM (a clean stop) and waits for it to exit. */
  stopWorker(i?: number): Promise<void>;
  /** Starts a fresh worker in slot `i` (after stopWorker) and waits until it is ready. */
  startWorker(i?: number): Promise<void>;
}

/** Env strings for quick recovery in fault tests (short stall detection, no periodic jobs unless asked). */
export const FAST = {
  WORKER_STALLED_INTERVAL_MS: '1000',
  WORKER_LOCK_DURATION_MS: '2000',
  SHUTDOWN_GRACE_MS: '5000',
  EXPIRE_EVERY_MS: '0',
  REPAIR_SWEEP_EVERY_MS: '1000',
};

export async function startStack(env: Env, opts: { upstreamUrl: string; workers?: number; extra?: Record<string, string> }): Promise<Stack> {
  const port = await freePort();
  const extra = { PORT: String(port), UPSTREAM_BASE_URL: `${opts.upstreamUrl}/v1`, UPSTREAM_API_KEY: 'sk-upstream-test', LOG_LEVEL: 'info', ...FAST, ...opts.extra };
  const api = spawnEngram('api', childEnv(env, extra));
  const workers = Array.from({ length: opts.workers ?? 1 }, () => spawnEngram('worker', childEnv(env, extra)));
  const base = `http://127.0.0.1:${port}`;
  const mgmt = { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' };
  // Workers may be replaced (killed and started again): always the current list.
  const all = () => [api, ...workers];
  const logs = (n = 3000) => all().map((c, i) => `--- ${i === 0 ? 'api' : `worker ${i}`} ---\n${c.output().slice(-n)}`).join('\n');
  try {
    await waitUntil(async () => (await fetch(`${base}/readyz`).catch(() => null))?.status === 200, 40_000, 'api ready');
    for (const w of workers) await waitUntil(() => w.output().includes('worker ready'), 40_000, 'worker ready');
  } catch (err) {
    for (const c of all()) c.proc.kill('SIGKILL');
    throw new Error(`${(err as Error).message}\n${logs()}`);
  }
  const key = (await (await fetch(`${base}/api/keys`, { method: 'POST', headers: mgmt, body: JSON.stringify({ name: 'reliability' }) })).json()) as { id: string; key: string };
  const settings = await fetch(`${base}/api/settings/memory`, { method: 'PUT', headers: mgmt, body: JSON.stringify({ enabled: true, strategy: 'hybrid' }) });
  if (settings.status !== 200) throw new Error(`settings: ${settings.status} ${await settings.text()}`);

  const chat = async (content: string, o: { stream?: boolean; timeoutMs?: number } = {}) => {
    const started = Date.now();
    try {
      const r = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        signal: AbortSignal.timeout(o.timeoutMs ?? 15_000),
        headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-4o-mini', stream: o.stream === true, messages: [{ role: 'user', content }] }),
      });
      await r.text();
      return { status: r.status, ms: Date.now() - started };
    } catch {
      return { status: 0, ms: Date.now() - started };
    }
  };
  const memories = async () => {
    const contents: string[] = [];
    let total = 0;
    for (let offset = 0; offset < 2000; offset += 200) {
      const r = (await (await fetch(`${base}/api/memory?apiKeyId=${key.id}&limit=200&offset=${offset}`, { headers: mgmt })).json()) as { total: number; data: { content: string }[] };
      total = r.total;
      contents.push(...r.data.map((m) => m.content));
      if (contents.length >= total || r.data.length === 0) break;
    }
    return { total, contents };
  };
  const stop = async () => {
    for (const c of all()) if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGTERM');
    const force = setTimeout(() => all().forEach((c) => c.proc.exitCode === null && c.proc.kill('SIGKILL')), 15_000);
    await Promise.all(all().map((c) => c.exited));
    clearTimeout(force);
  };
  const startWorker = async (i = 0) => {
    const fresh = spawnEngram('worker', childEnv(env, extra));
    workers[i] = fresh;
    await waitUntil(() => fresh.output().includes('worker ready'), 40_000, 'restarted worker ready').catch((err: Error) => {
      throw new Error(`${err.message}\n${fresh.output().slice(-3000)}`);
    });
  };
  const stopWorker = async (i = 0) => {
    workers[i].proc.kill('SIGTERM');
    await workers[i].exited;
  };
  /** Kills worker `i` with SIGKILL (a crash: no cleanup, locks left in Redis) and starts a fresh one in its place. */
  const crashWorker = async (i = 0) => {
    const old = workers[i];
    old.proc.kill('SIGKILL');
    await old.exited;
    await startWorker(i);
  };
  return { base, api, workers, mgmt, key, chat, memories, logs, stop, extra, crashWorker, stopWorker, startWorker };
}

/** BullMQ job counts of one queue under the env's prefix (a short-lived connection of the test's own). */
export async function jobCounts(env: Env, queue: QueueName, url = redisUrl(env)): Promise<Record<string, number>> {
  const q = new Queue(queue, { connection: { url, maxRetriesPerRequest: 1 }, prefix: env.QUEUE_PREFIX });
  q.on('error', () => undefined);
  try {
    return await q.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed', 'prioritized', 'paused');
  } finally {
    await q.close();
  }
}

/**
 * Whether no job is waiting, active or delayed in any queue, apart from the next run of a job scheduler
 * (whose delayed job always exists). Returns what is left, for failure messages, or null when drained.
 */
export async function leftInQueues(env: Env, queues: readonly QueueName[], url = redisUrl(env)): Promise<string | null> {
  const left: string[] = [];
  for (const name of queues) {
    const q = new Queue(name, { connection: { url, maxRetriesPerRequest: 1 }, prefix: env.QUEUE_PREFIX });
    q.on('error', () => undefined);
    try {
      const jobs = await q.getJobs(['waiting', 'active', 'delayed', 'prioritized', 'paused']);
      for (const j of jobs) if (j && !String(j.id).startsWith('repeat:')) left.push(`${name}/${j.name}#${j.id}`);
    } finally {
      await q.close();
    }
  }
  return left.length ? left.slice(0, 20).join(', ') : null;
}
