-- Change log of the memories the keyword tier ranks (issue #15 §2, issue #14). The api ranks a key's
-- keyword candidates in an in-memory BM25 index of THAT key's rows only (src/memory/keyword-index.ts):
-- FTS5's bm25() takes N, the average row length and each term's document frequency over every
-- key's rows, so one key's writes changed the order of another key's results (and which of its
-- query words counted as common). The index is loaded whole at the key's first query and brought
-- up to date before every query from this log. Triggers write it, so every writer (api, workers,
-- imports, expiry, a migration) is covered in its own transaction. A row moving between keys logs
-- both. Only the columns the index holds fire the update trigger (access counts do not).
-- The log prunes itself: every 4096th entry drops all but the newest 200,000 and records the cut
-- in pruned_below (an index older than that reloads its key). No backfill: indexes load from memories.
CREATE TABLE IF NOT EXISTS memory_kw_log (
  seq        INTEGER PRIMARY KEY AUTOINCREMENT,
  api_key_id TEXT NOT NULL,
  memory_id  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_memory_kw_log_tenant ON memory_kw_log(api_key_id, seq);

CREATE TABLE IF NOT EXISTS memory_kw_log_state (
  id           INTEGER PRIMARY KEY CHECK (id = 1),
  pruned_below INTEGER NOT NULL
);
INSERT OR IGNORE INTO memory_kw_log_state (id, pruned_below) VALUES (1, 0);

CREATE TRIGGER memory_kw_log_ai AFTER INSERT ON memories BEGIN
  INSERT INTO memory_kw_log (api_key_id, memory_id) VALUES (new.api_key_id, new.memory_id);
END;

CREATE TRIGGER memory_kw_log_ad AFTER DELETE ON memories BEGIN
  INSERT INTO memory_kw_log (api_key_id, memory_id) VALUES (old.api_key_id, old.memory_id);
END;

CREATE TRIGGER memory_kw_log_au AFTER UPDATE OF content, key, api_key_id, session_id, expires_at, updated_at ON memories BEGIN
  INSERT INTO memory_kw_log (api_key_id, memory_id) VALUES (old.api_key_id, old.memory_id);
  INSERT INTO memory_kw_log (api_key_id, memory_id) SELECT new.api_key_id, new.memory_id WHERE new.api_key_id IS NOT old.api_key_id;
END;

CREATE TRIGGER memory_kw_log_prune AFTER INSERT ON memory_kw_log WHEN new.seq % 4096 = 0 AND new.seq > 200000 BEGIN
  DELETE FROM memory_kw_log WHERE seq <= new.seq - 200000;
  UPDATE memory_kw_log_state SET pruned_below = max(pruned_below, new.seq - 200000) WHERE id = 1;
END;
