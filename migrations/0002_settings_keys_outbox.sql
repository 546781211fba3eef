-- Runtime settings under the original's keys; value is JSON.
CREATE TABLE settings (
  key        TEXT PRIMARY KEY,
  value      TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

-- Client API keys: only the sha-256 of the secret is stored; the prefix is for display.
CREATE TABLE api_keys (
  id           TEXT PRIMARY KEY,
  name         TEXT NOT NULL,
  secret_hash  TEXT NOT NULL UNIQUE,
  prefix       TEXT NOT NULL,
  created_at   TEXT NOT NULL,
  last_used_at TEXT,
  revoked_at   TEXT
);

-- Jobs the api could not add because Redis was unreachable; repair-sweep moves them into their queues.
CREATE TABLE outbox (
  outbox_id  INTEGER PRIMARY KEY AUTOINCREMENT,
  job_name   TEXT NOT NULL,
  job_id     TEXT,
  payload    TEXT NOT NULL,
  created_at TEXT NOT NULL,
  attempts   INTEGER NOT NULL DEFAULT 0,
  last_error TEXT
);
-- One outbox row per deterministic job id: duplicates of the same logical work collapse.
CREATE UNIQUE INDEX idx_outbox_job_id ON outbox(job_name, job_id) WHERE job_id IS NOT NULL;
