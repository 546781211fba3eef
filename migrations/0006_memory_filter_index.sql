-- A covering index of the columns every retrieval filter reads (tenant, retention, expiry, session),
-- keyed by memory_id (issue #14). The keyword tier joins each FTS5 match to memories by memory_id
-- only to filter it before the bm25 ranking; through this narrow index that lookup no longer reads
-- the wide table row (content, metadata). At 100k memories per key a common query word matches
-- thousands of rows: the keyword tier's p50 fell by ~45% (bench/README.md, issue #14).
CREATE INDEX IF NOT EXISTS idx_memories_filter_cover ON memories(memory_id, api_key_id, updated_at, expires_at, session_id);
