import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { Redis } from './redis';

type Snapshot = MetricObjectWithValues<MetricValue<string>>[];
const STALE_MS = 5 * 60_000;

const key = (prefix: string) => `${prefix}:metrics:workers`;

/** Worker side: stores this process' metrics snapshot (workers never serve HTTP). */
export async function pushWorkerMetrics(redis: Redis, prefix: string, workerId: string, snapshot: Snapshot): Promise<void> {
  await redis.hset(key(prefix), workerId, JSON.stringify({ at: Date.now(), metrics: snapshot }));
}

/** Worker side: removes this process' snapshot at shutdown. */
export async function dropWorkerMetrics(redis: Redis, prefix: string, workerId: string): Promise<void> {
  await redis.hdel(key(prefix), workerId);
}

/** Api side: the fresh snapshots of live workers; stale ones are pruned. */
export async function readWorkerMetrics(redis: Redis, prefix: string): Promise<Snapshot[]> {
  const all = await redis.hgetall(key(prefix));
  const out: Snapshot[] = [];
  const stale: string[] = [];
  for (const [id, raw] of Object.entries(all)) {
    try {
      const v = JSON.parse(raw) as { at: number; metrics: Snapshot };
      if (Date.now() - v.at > STALE_MS) stale.push(id);
      else out.push(v.metrics);
    } catch {
      stale.push(id);
    }
  }
  if (stale.length) await redis.hdel(key(prefix), ...stale).catch(() => undefined);
  return out;
}
