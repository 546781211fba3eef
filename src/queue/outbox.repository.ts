import type { Statement, Transaction } from 'better-sqlite3';
import type { Db } from '../db/connection';

/** A pending row; the payload is the stored JSON text (parsed, and judged, by the flush). */
export interface OutboxRow {
  outboxId: number;
  jobName: string;
  jobId: string | null;
  payload: string;
  attempts: number;
  /** A durable job's record that Redis took once (it may have lost the job since). */
  tracked: boolean;
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

/**
 * SQL over `outbox`: jobs acknowledged while Redis was unreachable, and the durable records of
 * jobs Redis alone must not hold (extract-facts: the user's stated facts), kept until done.
 */
export class OutboxRepository {
  private insertTracked: Statement | undefined;
  private markAppliedStmt: Statement | undefined;
  private dropQuarantinedStmt: Statement | undefined;
  private addTrackedBatch: Transaction<(batch: ReadonlyArray<{ jobName: string; jobId: string; payload: unknown; now: string }>) => void> | undefined;

  constructor(private readonly db: Db) {}

  /** Stores a job; a second pending row for the same (name, id) collapses into the first. Returns the new row's id (0: collapsed). */
  add(jobName: string, jobId: string, payload: unknown, now: string): number {
    const r = this.db
      .prepare('INSERT INTO outbox (job_name, job_id, payload, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING')
      .run(jobName, jobId, JSON.stringify(payload), now);
    return r.changes === 1 ? Number(r.lastInsertRowid) : 0;
  }

  /**
   * Appends a string to an array field of a pending row's payload (in SQLite: no re-serialising of
   * what it holds); false when there is no such row (gone, relayed, rolled back). Matched by job id
   * too: a rolled-back row's outbox_id may be reused.
   */
  appendToPending(outboxId: number, jobName: string, jobId: string, field: string, value: string): boolean {
    if (!/^[A-Za-z]+$/.test(field)) throw new Error(`not a payload field name: ${field}`);
    return (
      this.db
        .prepare(
          `UPDATE outbox SET payload = json_insert(payload, '$.${field}[#]', ?)
           WHERE outbox_id = ? AND job_name = ? AND job_id = ? AND queued_at IS NULL AND done_at IS NULL AND quarantined_at IS NULL`,
        )
        .run(value, outboxId, jobName, jobId).changes === 1
    );
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
          .prepare('SELECT job_id FROM outbox WHERE job_name = ? AND quarantined_at IS NULL AND done_at IS NULL AND job_id IS NOT NULL ORDER BY outbox_id LIMIT 1')
          .get(jobName) as { job_id: string } | undefined;
        if (have) return have.job_id;
        this.add(jobName, jobId, payload, now);
        return jobId;
      })
      .immediate();
  }

  /**
   * A durable job's record, written before the job is offered to Redis (so Redis never holds a job
   * SQLite does not know about): `queued_at` says Redis is assumed to have it. A second write of the
   * same id (a retried request) keeps the first row, and a done tombstone keeps it done.
   */
  addTracked(jobName: string, jobId: string, payload: unknown, now: string): void {
    // Once per chat on the api's request path: prepared once.
    this.insertTracked ??= this.db.prepare('INSERT INTO outbox (job_name, job_id, payload, created_at, queued_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING');
    this.insertTracked.run(jobName, jobId, JSON.stringify(payload), now, now);
  }

  /** Several durable jobs' records (addTracked each) in one write transaction: one commit for all of them. */
  addTrackedMany(rows: ReadonlyArray<{ jobName: string; jobId: string; payload: unknown; now: string }>): void {
    if (rows.length === 1) return this.addTracked(rows[0].jobName, rows[0].jobId, rows[0].payload, rows[0].now);
    this.addTrackedBatch ??= this.db.transaction((batch: ReadonlyArray<{ jobName: string; jobId: string; payload: unknown; now: string }>) => {
      for (const r of batch) this.addTracked(r.jobName, r.jobId, r.payload, r.now);
    });
    this.addTrackedBatch.immediate(rows);
  }

  /** Redis did not take a tracked job: the relay moves it at once, like any outbox row. */
  markUnqueued(jobName: string, jobId: string): void {
    this.db.prepare('UPDATE outbox SET queued_at = NULL WHERE job_name = ? AND job_id = ? AND quarantined_at IS NULL AND done_at IS NULL').run(jobName, jobId);
  }

  /**
   * The worker's claim, called inside the transaction that writes the job's effects: 'claimed' (the
   * row is now a done tombstone without payload), 'done' (an earlier run committed: do nothing) or
   * 'untracked' (no row: a job added before rows were written, or by hand — run it).
   * A job whose row was quarantined (it failed for good) runs again only when an operator retries it: its
   * quarantined row goes, and a tombstone takes its place, so GET /api/jobs no longer lists as lost a job that
   * has now done its work, and a re-delivery of the retried job writes nothing.
   */
  claim(jobName: string, jobId: string, now: string): 'claimed' | 'done' | 'untracked' {
    const row = this.db
      .prepare('SELECT outbox_id, done_at FROM outbox WHERE job_name = ? AND job_id = ? AND quarantined_at IS NULL')
      .get(jobName, jobId) as { outbox_id: number; done_at: string | null } | undefined;
    if (row?.done_at != null) return 'done';
    const wasQuarantined = this.dropQuarantined(jobName, jobId) > 0;
    if (row) {
      this.db.prepare("UPDATE outbox SET done_at = ?, payload = '' WHERE outbox_id = ?").run(now, row.outbox_id);
      return 'claimed';
    }
    if (!wasQuarantined) return 'untracked';
    this.markApplied(jobName, jobId, now);
    return 'claimed';
  }

  /** Deletes the quarantined rows of a job that is now doing its work (claim, markApplied); how many there were. */
  private dropQuarantined(jobName: string, jobId: string): number {
    this.dropQuarantinedStmt ??= this.db.prepare('DELETE FROM outbox WHERE job_name = ? AND job_id = ? AND quarantined_at IS NOT NULL');
    return this.dropQuarantinedStmt.run(jobName, jobId).changes;
  }

  /**
   * For a job that is not durable but whose effect must not repeat (record-access), called inside the
   * transaction that writes that effect: leaves a done tombstone under its id and says whether this is the
   * first run to commit. False: an earlier run committed (a re-delivery after a crash before the ack).
   * A pending row of the same id (the job waited in the outbox) becomes that tombstone: the work is done, the
   * relay must not add it again. A quarantined one goes (the job did its work after all: claim says why).
   * Tombstones are pruned (QueueLayer.pruneOutbox).
   */
  markApplied(jobName: string, jobId: string, now: string): boolean {
    this.markAppliedStmt ??= this.db.prepare(
      `INSERT INTO outbox (job_name, job_id, payload, created_at, done_at) VALUES (?, ?, '', ?, ?)
       ON CONFLICT (job_name, job_id) WHERE job_id IS NOT NULL AND quarantined_at IS NULL
       DO UPDATE SET done_at = excluded.done_at, payload = '' WHERE outbox.done_at IS NULL`,
    );
    const first = this.markAppliedStmt.run(jobName, jobId, now, now).changes === 1;
    if (first) this.dropQuarantined(jobName, jobId);
    return first;
  }

  /** A tracked job failed for good: its row is quarantined with why (visible beside failed jobs, never relayed). */
  quarantineJob(jobName: string, jobId: string, error: string, now: string): void {
    this.db
      .prepare('UPDATE outbox SET quarantined_at = ?, quarantine_error = ? WHERE job_name = ? AND job_id = ? AND quarantined_at IS NULL AND done_at IS NULL')
      .run(now, error.slice(0, 500), jobName, jobId);
  }

  /** Redis took these rows (again): they stay as records until the worker marks them done. */
  markQueued(ids: number[], now: string): void {
    if (ids.length === 0) return;
    const stmt = this.db.prepare('UPDATE outbox SET queued_at = ? WHERE outbox_id = ?');
    this.db.transaction(() => ids.forEach((id) => stmt.run(now, id))).immediate();
  }

  /** Deletes the done tombstones of `jobName` older than `before`. */
  pruneDone(jobName: string, before: string): number {
    return this.db.prepare('DELETE FROM outbox WHERE job_name = ? AND done_at IS NOT NULL AND done_at < ?').run(jobName, before).changes;
  }

  /** Deletes done tombstones older than `doneBefore` and quarantined rows of `jobNames` older than `quarantinedBefore`. */
  prune(jobNames: string[], doneBefore: string, quarantinedBefore: string): { done: number; quarantined: number } {
    const done = this.db.prepare('DELETE FROM outbox WHERE done_at IS NOT NULL AND done_at < ?').run(doneBefore).changes;
    let quarantined = 0;
    const q = this.db.prepare('DELETE FROM outbox WHERE job_name = ? AND quarantined_at IS NOT NULL AND quarantined_at < ?');
    for (const n of jobNames) quarantined += q.run(n, quarantinedBefore).changes;
    return { done, quarantined };
  }

  /**
   * Oldest rows the relay should move, after a cursor (outbox_id): never added (queued_at NULL), or
   * tracked rows Redis took before `requeueBefore` that are still not done (the job may be lost).
   */
  oldest(limit: number, afterId = 0, requeueBefore = ''): OutboxRow[] {
    const rows = this.db
      .prepare(
        `SELECT outbox_id, job_name, job_id, payload, attempts, queued_at FROM outbox
         WHERE outbox_id > ? AND quarantined_at IS NULL AND done_at IS NULL AND (queued_at IS NULL OR queued_at < ?)
         ORDER BY outbox_id LIMIT ?`,
      )
      .all(afterId, requeueBefore, limit) as {
      outbox_id: number;
      job_name: string;
      job_id: string | null;
      payload: string;
      attempts: number;
      queued_at: string | null;
    }[];
    return rows.map((r) => ({ outboxId: r.outbox_id, jobName: r.job_name, jobId: r.job_id, payload: r.payload, attempts: r.attempts, tracked: r.queued_at !== null }));
  }

  /** Deletes rows by id, each only while it still holds this job (ids of rolled-back rows may be reused). */
  removeJobs(rows: { outboxId: number; jobName: string; jobId: string }[]): void {
    if (rows.length === 0) return;
    const stmt = this.db.prepare('DELETE FROM outbox WHERE outbox_id = ? AND job_name = ? AND job_id = ?');
    this.db.transaction(() => rows.forEach((r) => stmt.run(r.outboxId, r.jobName, r.jobId))).immediate();
  }

  /**
   * Deletes rows the relay moved to Redis. One a worker already ran and marked done meanwhile (markApplied: the job
   * was that quick) stays: it is now that job's tombstone.
   */
  remove(ids: number[]): void {
    if (ids.length === 0) return;
    const stmt = this.db.prepare('DELETE FROM outbox WHERE outbox_id = ? AND done_at IS NULL');
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

  /** Pending rows: never taken by Redis (a flush moves them at once). */
  count(): number {
    return (this.db.prepare('SELECT COUNT(*) AS n FROM outbox WHERE quarantined_at IS NULL AND done_at IS NULL AND queued_at IS NULL').get() as { n: number }).n;
  }

  /** Durable records Redis took and the worker has not finished yet. */
  trackedCount(): number {
    return (this.db.prepare('SELECT COUNT(*) AS n FROM outbox WHERE quarantined_at IS NULL AND done_at IS NULL AND queued_at IS NOT NULL').get() as { n: number }).n;
  }

  quarantinedCount(): number {
    return (this.db.prepare('SELECT COUNT(*) AS n FROM outbox WHERE quarantined_at IS NOT NULL').get() as { n: number }).n;
  }
}
