-- Memories: one integer key (memory_id) shared by FTS and vec0, never reused (AUTOINCREMENT);
-- the UUID `id` is the public id. Timestamps are ISO-8601 UTC with milliseconds.
CREATE TABLE memories (
  memory_id        INTEGER PRIMARY KEY AUTOINCREMENT,
  id               TEXT NOT NULL UNIQUE,
  api_key_id       TEXT NOT NULL,
  session_id       TEXT,
  type             TEXT NOT NULL CHECK (type IN ('factual','episodic','procedural','semantic')),
  key              TEXT,
  content          TEXT NOT NULL,
  metadata         TEXT NOT NULL DEFAULT '{}',
  created_at       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  updated_at       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  expires_at       TEXT,
  content_hash     TEXT NOT NULL,
  needs_reindex    INTEGER NOT NULL DEFAULT 1,
  access_count     INTEGER NOT NULL DEFAULT 0,
  last_accessed_at TEXT
);

-- The upsert key, enforced by the database (the original had none).
CREATE UNIQUE INDEX idx_memories_api_key_key ON memories(api_key_id, key) WHERE key IS NOT NULL AND key <> '';
CREATE INDEX idx_memories_api_key_created ON memories(api_key_id, created_at DESC);
CREATE INDEX idx_memories_session ON memories(session_id);
CREATE INDEX idx_memories_type ON memories(type);
CREATE INDEX idx_memories_expires ON memories(expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX idx_memories_needs_reindex ON memories(needs_reindex) WHERE needs_reindex = 1;

-- Keyword index: external content over memories, rowid = memory_id by construction.
CREATE VIRTUAL TABLE memory_fts USING fts5(
  content, key,
  content = 'memories',
  content_rowid = 'memory_id',
  tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER memory_fts_ai AFTER INSERT ON memories BEGIN
  INSERT INTO memory_fts(rowid, content, key) VALUES (new.memory_id, new.content, new.key);
END;

CREATE TRIGGER memory_fts_ad AFTER DELETE ON memories BEGIN
  INSERT INTO memory_fts(memory_fts, rowid, content, key) VALUES ('delete', old.memory_id, old.content, old.key);
END;

-- Only content/key feed the index, so access-count updates do not churn it.
CREATE TRIGGER memory_fts_au AFTER UPDATE OF content, key ON memories BEGIN
  INSERT INTO memory_fts(memory_fts, rowid, content, key) VALUES ('delete', old.memory_id, old.content, old.key);
  INSERT INTO memory_fts(rowid, content, key) VALUES (new.memory_id, new.content, new.key);
END;

-- Append-only history: every change, with before/after, so nothing is ever lost.
CREATE TABLE memory_events (
  event_id    INTEGER PRIMARY KEY AUTOINCREMENT,
  memory_id   INTEGER NOT NULL,
  memory_uuid TEXT NOT NULL,
  api_key_id  TEXT NOT NULL,
  op          TEXT NOT NULL CHECK (op IN ('create','update','delete','summarize','expire','import')),
  before      TEXT,
  after       TEXT,
  source      TEXT NOT NULL CHECK (source IN ('api','extraction','mcp','summarize','expiry','import')),
  job_id      TEXT,
  request_id  TEXT,
  created_at  TEXT NOT NULL
);
CREATE INDEX idx_memory_events_uuid ON memory_events(memory_uuid, event_id);
CREATE INDEX idx_memory_events_api_key ON memory_events(api_key_id, event_id);

-- Vector tier bookkeeping (singleton row), as in the original.
CREATE TABLE memory_vec_meta (
  id                  INTEGER PRIMARY KEY CHECK (id = 1),
  active_dim          INTEGER,
  embedding_signature TEXT,
  last_reset_at       TEXT,
  vec_loaded          INTEGER NOT NULL DEFAULT 0
);
INSERT OR IGNORE INTO memory_vec_meta (id, active_dim, embedding_signature, last_reset_at, vec_loaded) VALUES (1, NULL, NULL, NULL, 0);
