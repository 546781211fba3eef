import type { Db } from '../db/connection';

/** A pending row; the payload is the stored JSON text (parsed, and judged, by the flush). */
export interface OutboxRow {
  outboxId: number;
  jobName: string;
  jobId: string | null;
  payload: string;
  attempts: number;
}

/** A row set aside because it can never be added; it waits for an operator. */
export interface QuarantinedOutboxRow {
  outboxId: number;
  jobName: string;
  jobId: string | null;
  error: string;
  attempts: number;
  createdAt: string;
  quarantinedAt: string;
}

type QuarantinedRow = { outbox_id: number; job_name: string; job_id: string | null; quarantine_error: string | null; attempts: number; created_at: string; quarantined_at: string };

function toQuarantined(r: QuarantinedRow): QuarantinedOutboxRow {
  return {
    outboxId: r.outbox_id,
    jobName: r.job_name,
    jobId: r.job_id,
    error: r.quarantine_error ?? '',
    attempts: r.attempts,
    createdAt: r.created_at,
    quarantinedAt: r.quarantined_at,
  };
}

/** SQL over `outbox`: jobs acknowledged while Redis was unreachable. */
export class OutboxRepository {
  constructor(private readonly db: Db) {}

  /** Stores a job; a second pending row for the same (name, id) collapses into the first. */
  add(jobName: string, jobId: string, payload: unknown, now: string): void {
    this.db
      .prepare('INSERT INTO outbox (job_name, job_id, payload, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING')
      .run(jobName, jobId, JSON.stringify(payload), now);
  }

  /**
   * Stores a job unless a pending row of the same job name exists (a singleton such as reindex);
   * checked and written in one write transaction, so concurrent callers (any process) agree.
   * Returns the job id of the row that holds it.
   */
  addOnce(jobName: string, jobId: string, payload: unknown, now: string): string {
    return this.db
      .transaction(() => {
        const have = this.db
          .prepare('SELECT job_id FROM outbox WHERE job_name = ? AND quarantined_at IS NULL AND job_id IS NOT NULL ORDER BY outbox_id LIMIT 1')
          .get(jobName) as { job_id: string } | undefined;
        if (have) return have.job_id;
        this.add(jobName, jobId, payload, now);
        return jobId;
      })
      .immediate();
  }

  /** Oldest pending (not quarantined) rows after a cursor (outbox_id). */
  oldest(limit: number, afterId = 0): OutboxRow[] {
    const rows = this.db
      .prepare('SELECT outbox_id, job_name, job_id, payload, attempts FROM outbox WHERE outbox_id > ? AND quarantined_at IS NULL ORDER BY outbox_id LIMIT ?')
      .all(afterId, limit) as {
      outbox_id: number;
      job_name: string;
      job_id: string | null;
      payload: string;
      attempts: number;
    }[];
    return rows.map((r) => ({ outboxId: r.outbox_id, jobName: r.job_name, jobId: r.job_id, payload: r.payload, attempts: r.attempts }));
  }

  remove(ids: number[]): void {
    if (ids.length === 0) return;
    const stmt = this.db.prepare('DELETE FROM outbox WHERE outbox_id = ?');
    this.db.transaction(() => ids.forEach((id) => stmt.run(id))).immediate();
  }

  /** A transient failure (Redis): the rows stay pending and are retried by the next flush. */
  markFailed(ids: number[], error: string): void {
    if (ids.length === 0) return;
    const stmt = this.db.prepare('UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE outbox_id = ?');
    this.db.transaction(() => ids.forEach((id) => stmt.run(error.slice(0, 500), id))).immediate();
  }

  /** Sets rows aside for good, each with why; no flush reads them again. */
  quarantine(rows: { outboxId: number; error: string }[], now: string): void {
    if (rows.length === 0) return;
    const stmt = this.db.prepare('UPDATE outbox SET quarantined_at = ?, quarantine_error = ? WHERE outbox_id = ? AND quarantined_at IS NULL');
    this.db.transaction(() => rows.forEach((r) => stmt.run(now, r.error.slice(0, 500), r.outboxId))).immediate();
  }

  /** Quarantined rows, oldest first (at most `limit`). */
  quarantined(limit = 100): QuarantinedOutboxRow[] {
    const rows = this.db
      .prepare(
        `SELECT outbox_id, job_name, job_id, quarantine_error, attempts, created_at, quarantined_at
         FROM outbox WHERE quarantined_at IS NOT NULL ORDER BY outbox_id LIMIT ?`,
      )
      .all(limit) as {
      outbox_id: number;
      job_name: string;
      job_id: string | null;
      quarantine_error: string | null;
      attempts: number;
      created_at: string;
      quarantined_at: string;
    }[];
    return rows.map(toQuarantined);
  }

  /** Deletes one quarantined row: 'deleted', 'pending' (the row exists but is not quarantined) or 'absent'. */
  deleteQuarantined(outboxId: number): { outcome: 'deleted'; row: QuarantinedOutboxRow } | { outcome: 'pending' } | { outcome: 'absent' } {
    return this.db
      .transaction(() => {
        const r = this.db
          .prepare('SELECT outbox_id, job_name, job_id, quarantine_error, attempts, created_at, quarantined_at FROM outbox WHERE outbox_id = ?')
          .get(outboxId) as
          | { outbox_id: number; job_name: string; job_id: string | null; quarantine_error: string | null; attempts: number; created_at: string; quarantined_at: string | null }
          | undefined;
        if (!r) return { outcome: 'absent' as const };
        if (r.quarantined_at === null) return { outcome: 'pending' as const };
        this.db.prepare('DELETE FROM outbox WHERE outbox_id = ?').run(outboxId);
        return { outcome: 'deleted' as const, row: toQuarantined({ ...r, quarantined_at: r.quarantined_at }) };
      })
      .immediate();
  }

  /** Pending rows (the ones a flush will move). */
  count(): number {
    return (this.db.prepare('SELECT COUNT(*) AS n FROM outbox WHERE quarantined_at IS NULL').get() as { n: number }).n;
  }

  quarantinedCount(): number {
    return (this.db.prepare('SELECT COUNT(*) AS n FROM outbox WHERE quarantined_at IS NOT NULL').get() as { n: number }).n;
  }
}
