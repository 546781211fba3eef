import IORedis, { type RedisOptions } from 'ioredis';
import type { Logger } from '../logger';

export type Redis = IORedis;
export type RedisRole = 'api' | 'worker';

/**
 * A Redis connection for a role. The api's fails fast (no offline queue, short timeouts: a
 * request never waits on Redis); the worker's waits (`maxRetriesPerRequest: null`). Errors are
 * logged once per outage, and recovery once.
 */
export function createRedis(url: string, role: RedisRole, log: Logger, opts: { commandTimeoutMs?: number; name?: string } = {}): Redis {
  const base: RedisOptions = {
    connectionName: `engram-${role}${opts.name ? `-${opts.name}` : ''}`,
    retryStrategy: (times) => Math.min(100 * 2 ** Math.min(times, 5), 2000),
    reconnectOnError: () => true,
  };
  const options: RedisOptions =
    role === 'api'
      ? { ...base, enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2000, commandTimeout: opts.commandTimeoutMs ?? 500 }
      : { ...base, maxRetriesPerRequest: null, enableReadyCheck: true, connectTimeout: 5000 };
  const client = new IORedis(url, options);
  watchOutages(client, log.child({ redis: options.connectionName }));
  return client;
}

/** Logs a connection's first error of an outage and its recovery, nothing in between. */
export function watchOutages(client: IORedis, log: Logger): void {
  let down = false;
  client.on('error', (err: Error) => {
    if (down) return;
    down = true;
    log.warn({ err: { message: err.message, code: (err as NodeJS.ErrnoException).code } }, 'redis unreachable; retrying in the background');
  });
  client.on('ready', () => {
    if (!down) return;
    down = false;
    log.info('redis connection restored');
  });
}

/** Connection options for BullMQ-owned connections (Workers, QueueEvents): BullMQ closes what it creates, even mid-connect. */
export function bullConnectionOptions(url: string, name: string): RedisOptions & { url: string } {
  return { url, connectionName: `engram-${name}`, maxRetriesPerRequest: null, retryStrategy: (times) => Math.min(100 * 2 ** Math.min(times, 5), 2000) };
}

/** Warns when Redis may evict BullMQ keys (maxmemory-policy other than noeviction). */
export async function checkEvictionPolicy(client: IORedis, log: Logger): Promise<string | null> {
  try {
    const res = (await client.config('GET', 'maxmemory-policy')) as string[];
    const policy = res?.[1] ?? null;
    if (policy && policy !== 'noeviction') {
      log.warn({ policy }, 'redis maxmemory-policy is not noeviction: queued jobs can be silently evicted; set maxmemory-policy noeviction');
    }
    return policy;
  } catch {
    return null; // CONFIG may be disabled on managed Redis
  }
}
