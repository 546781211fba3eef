import type { Db } from '../db/connection';

export interface OutboxRow {
  outboxId: number;
  jobName: string;
  jobId: string;
  payload: unknown;
  attempts: number;
}

/** SQL over `outbox`: jobs acknowledged while Redis was unreachable. */
export class OutboxRepository {
  constructor(private readonly db: Db) {}

  /** Stores a job; a second row for the same (name, id) collapses into the first. */
  add(jobName: string, jobId: string, payload: unknown, now: string): void {
    this.db
      .prepare('INSERT INTO outbox (job_name, job_id, payload, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING')
      .run(jobName, jobId, JSON.stringify(payload), now);
  }

  /** Oldest rows after a cursor (outbox_id). */
  oldest(limit: number, afterId = 0): OutboxRow[] {
    const rows = this.db
      .prepare('SELECT outbox_id, job_name, job_id, payload, attempts FROM outbox WHERE outbox_id > ? ORDER BY outbox_id LIMIT ?')
      .all(afterId, limit) as {
      outbox_id: number;
      job_name: string;
      job_id: string;
      payload: string;
      attempts: number;
    }[];
    return rows.map((r) => ({ outboxId: r.outbox_id, jobName: r.job_name, jobId: r.job_id, payload: JSON.parse(r.payload), attempts: r.attempts }));
  }

  remove(ids: number[]): void {
    if (ids.length === 0) return;
    const stmt = this.db.prepare('DELETE FROM outbox WHERE outbox_id = ?');
    this.db.transaction(() => ids.forEach((id) => stmt.run(id))).immediate();
  }

  markFailed(ids: number[], error: string): void {
    if (ids.length === 0) return;
    const stmt = this.db.prepare('UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE outbox_id = ?');
    this.db.transaction(() => ids.forEach((id) => stmt.run(error.slice(0, 500), id))).immediate();
  }

  count(): number {
    return (this.db.prepare('SELECT COUNT(*) AS n FROM outbox').get() as { n: number }).n;
  }
}
