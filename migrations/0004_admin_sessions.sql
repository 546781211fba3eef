-- Browser sessions of operators (/admin, later /dashboard). The cookie carries a random id; only its
-- sha-256 is stored. A session ends at expires_at, at logout (revoked_at), or when the management token
-- changes: token_fingerprint is a one-way fingerprint of the token it was opened with (never the token).
CREATE TABLE admin_sessions (
  id_hash           TEXT PRIMARY KEY,
  token_fingerprint TEXT NOT NULL,
  created_at        TEXT NOT NULL,
  expires_at        TEXT NOT NULL,
  revoked_at        TEXT
);
CREATE INDEX idx_admin_sessions_expires_at ON admin_sessions(expires_at);
