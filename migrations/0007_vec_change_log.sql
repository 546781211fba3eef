-- Change log of the vector table (issue #14). The api keeps each tenant's vectors in memory and
-- scans them with WebAssembly SIMD (src/vector/vec-scan-cache.ts) instead of vec0's scan; every
-- write to vec_memories (insert, replace, delete, orphan prune) appends (tenant, memory_id) here in
-- the same transaction, so a process holding a tenant's matrix applies only what changed since
-- its last read, whichever process wrote it. The log is pruned as it grows (pruned_below: a reader
-- older than that reloads the tenant), and a table rebuild bumps `generation` (every reader
-- reloads). Existing data needs no backfill: a tenant's matrix is loaded whole from vec_memories
-- at its first search.
CREATE TABLE IF NOT EXISTS memory_vec_log (
  seq        INTEGER PRIMARY KEY AUTOINCREMENT,
  api_key_id TEXT NOT NULL,
  memory_id  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_memory_vec_log_tenant ON memory_vec_log(api_key_id, seq);

CREATE TABLE IF NOT EXISTS memory_vec_log_state (
  id           INTEGER PRIMARY KEY CHECK (id = 1),
  generation   INTEGER NOT NULL,
  pruned_below INTEGER NOT NULL
);
INSERT OR IGNORE INTO memory_vec_log_state (id, generation, pruned_below) VALUES (1, 0, 0);
