-- Outbox quarantine: a row that can never be added (unknown job name, unparseable or invalid
-- payload, impossible job id) is set aside with its error instead of failing every flush. It is
-- never retried automatically; an operator sees it in GET /api/jobs and deletes it.
ALTER TABLE outbox ADD COLUMN quarantined_at TEXT;
ALTER TABLE outbox ADD COLUMN quarantine_error TEXT;

-- The one-row-per-job rule applies to pending rows only: a quarantined row must not swallow a
-- later, valid enqueue of the same job id.
DROP INDEX idx_outbox_job_id;
CREATE UNIQUE INDEX idx_outbox_pending_job_id ON outbox(job_name, job_id) WHERE job_id IS NOT NULL AND quarantined_at IS NULL;

-- Re-assertions: a fact stated again without any change is counted here instead of writing a
-- history row each time (updated_at still moves, so the retention window follows it).
ALTER TABLE memories ADD COLUMN reassert_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memories ADD COLUMN last_asserted_at TEXT;
