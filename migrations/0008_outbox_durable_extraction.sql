-- Durable extractions (issue 15 §3): the api writes an outbox row for every extract-facts job
-- BEFORE it adds the job to Redis, and the row stays until the worker's fact transaction marks it
-- done. A Redis that restarts empty (no AOF, lost volume) with a backlog therefore loses nothing:
-- the relay (repair sweep) re-adds a tracked row whose job may be gone, under the same
-- deterministic id (BullMQ ignores the add while the job still exists).
--   queued_at: when Redis last took the job (NULL: never added, relay at once — the old meaning
--              of an outbox row). A row with queued_at set is re-added only after a grace period.
--   done_at:   set in the same SQLite transaction that writes the facts; the payload is emptied
--              then. The tombstone makes a re-delivered job (stall after commit, relay race,
--              an old Redis snapshot) a no-op; it is deleted after a retention period.
ALTER TABLE outbox ADD COLUMN queued_at TEXT;
ALTER TABLE outbox ADD COLUMN done_at TEXT;
-- The relay reads live rows only, oldest first; tombstones and quarantined rows stay out of its way.
CREATE INDEX idx_outbox_live ON outbox(outbox_id) WHERE quarantined_at IS NULL AND done_at IS NULL;
-- The sweep prunes tombstones by age.
CREATE INDEX idx_outbox_done ON outbox(done_at) WHERE done_at IS NOT NULL;
