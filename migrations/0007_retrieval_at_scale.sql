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

-- Tenant restriction inside the keyword index (issue #14). FTS5 intersected each query term's
-- doclist across ALL tenants before the join dropped other keys' rows, so a small key's keyword
-- query cost grew with everyone's data. Each row now also indexes one token naming its tenant (a
-- third column, fed from a virtual generated column of memories: 't' + hex of api_key_id, a
-- single unicode61 token), and the keyword tier matches `fts_tenant : <token> AND {content key} :
-- (terms)`, so FTS5 skips other tenants' rows inside the index. bm25 gets weight 0 for that column.
-- Backfill: the index is recreated and rebuilt from memories (the 'rebuild' command reads every
-- row once); the triggers are recreated with the new column.
ALTER TABLE memories ADD COLUMN fts_tenant TEXT GENERATED ALWAYS AS ('t' || lower(hex(api_key_id))) VIRTUAL;

DROP TRIGGER IF EXISTS memory_fts_ai;
DROP TRIGGER IF EXISTS memory_fts_ad;
DROP TRIGGER IF EXISTS memory_fts_au;
DROP TABLE IF EXISTS memory_fts_vocab;
DROP TABLE IF EXISTS memory_fts;

CREATE VIRTUAL TABLE memory_fts USING fts5(
  content, key, fts_tenant,
  content = 'memories',
  content_rowid = 'memory_id',
  tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER memory_fts_ai AFTER INSERT ON memories BEGIN
  INSERT INTO memory_fts(rowid, content, key, fts_tenant) VALUES (new.memory_id, new.content, new.key, new.fts_tenant);
END;

CREATE TRIGGER memory_fts_ad AFTER DELETE ON memories BEGIN
  INSERT INTO memory_fts(memory_fts, rowid, content, key, fts_tenant) VALUES ('delete', old.memory_id, old.content, old.key, old.fts_tenant);
END;

-- Only content/key/tenant feed the index, so access-count updates do not churn it.
CREATE TRIGGER memory_fts_au AFTER UPDATE OF content, key, api_key_id ON memories BEGIN
  INSERT INTO memory_fts(memory_fts, rowid, content, key, fts_tenant) VALUES ('delete', old.memory_id, old.content, old.key, old.fts_tenant);
  INSERT INTO memory_fts(rowid, content, key, fts_tenant) VALUES (new.memory_id, new.content, new.key, new.fts_tenant);
END;

INSERT INTO memory_fts(memory_fts) VALUES ('rebuild');

CREATE VIRTUAL TABLE memory_fts_vocab USING fts5vocab('memory_fts', 'row');
