import type { Db } from '../db/connection';
import { StatementCache } from '../db/statement-cache';
import type { EventOp, EventSource, ListFilter, Memory, MemoryEvent, MemoryRecord, MemoryType } from './types';

interface Row {
  memory_id: number;
  id: string;
  api_key_id: string;
  session_id: string | null;
  type: MemoryType;
  key: string | null;
  content: string;
  metadata: string;
  created_at: string;
  updated_at: string;
  expires_at: string | null;
  content_hash: string;
  needs_reindex: number;
  access_count: number;
  last_accessed_at: string | null;
}

function parseMetadata(raw: string | null): Record<string, unknown> {
  if (!raw) return {};
  try {
    const v = JSON.parse(raw);
    return v && typeof v === 'object' && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
}

/** Row → record; malformed metadata JSON reads as {} (as the original). */
export function rowToRecord(r: Row): MemoryRecord {
  return {
    rowId: r.memory_id,
    id: r.id,
    apiKeyId: r.api_key_id,
    sessionId: r.session_id ?? '',
    type: r.type,
    key: r.key ?? '',
    content: r.content,
    metadata: parseMetadata(r.metadata),
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    expiresAt: r.expires_at,
    contentHash: r.content_hash,
    needsReindex: r.needs_reindex === 1,
    accessCount: r.access_count,
    lastAccessedAt: r.last_accessed_at,
  };
}

export interface NewRow {
  id: string;
  apiKeyId: string;
  sessionId: string | null;
  type: MemoryType;
  key: string | null;
  content: string;
  metadata: Record<string, unknown>;
  createdAt: string;
  expiresAt: string | null;
  contentHash: string;
}

/** A row with every field given (import, restore): id and timestamps are kept as they were. */
export interface FullRow extends NewRow {
  updatedAt: string;
  accessCount: number;
  lastAccessedAt: string | null;
}

export interface RowPatch {
  sessionId?: string | null;
  type?: MemoryType;
  key?: string | null;
  content?: string;
  metadata?: Record<string, unknown>;
  expiresAt?: string | null;
  contentHash?: string;
  needsReindex?: boolean;
  updatedAt: string;
}

const COLS: Record<keyof Omit<RowPatch, 'updatedAt'>, string> = {
  sessionId: 'session_id',
  type: 'type',
  key: 'key',
  content: 'content',
  metadata: 'metadata',
  expiresAt: 'expires_at',
  contentHash: 'content_hash',
  needsReindex: 'needs_reindex',
};

/** Rows that are not summaries Engram wrote (their keys start with `summary:`). */
const NOT_SUMMARY = "NOT (key IS NOT NULL AND substr(key, 1, 8) = 'summary:')";

/** Escapes LIKE wildcards so `%` and `_` in a search are literal. */
function likePattern(q: string): string {
  return `%${q.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

function where(f: ListFilter): { sql: string; params: unknown[] } {
  const parts: string[] = [];
  const params: unknown[] = [];
  if (f.apiKeyId !== undefined) {
    parts.push('api_key_id = ?');
    params.push(f.apiKeyId);
  }
  if (f.type !== undefined) {
    parts.push('type = ?');
    params.push(f.type);
  }
  if (f.sessionId !== undefined) {
    if (f.sessionId === '') parts.push("(session_id IS NULL OR session_id = '')");
    else {
      parts.push('session_id = ?');
      params.push(f.sessionId);
    }
  }
  if (f.q !== undefined && f.q.trim() !== '') {
    parts.push("(lower(content) LIKE ? ESCAPE '\\' OR lower(coalesce(key, '')) LIKE ? ESCAPE '\\')");
    const p = likePattern(f.q.trim());
    params.push(p, p);
  }
  return { sql: parts.length ? `WHERE ${parts.join(' AND ')}` : '', params };
}

/** The only SQL over `memories` and `memory_events`. */
export class MemoryRepository {
  private readonly stmts: StatementCache;

  constructor(private readonly db: Db) {
    this.stmts = new StatementCache(db);
  }

  private stmt(sql: string) {
    return this.stmts.get(sql);
  }

  insert(r: NewRow): number {
    const info = this.stmt(
        `INSERT INTO memories (id, api_key_id, session_id, type, key, content, metadata, created_at, updated_at, expires_at, content_hash, needs_reindex)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)`,
      )
      .run(r.id, r.apiKeyId, r.sessionId, r.type, r.key, r.content, JSON.stringify(r.metadata), r.createdAt, r.createdAt, r.expiresAt, r.contentHash);
    return Number(info.lastInsertRowid);
  }

  /** Inserts a row keeping its id, timestamps and access counters (needs_reindex set: it gets embedded). */
  insertFull(r: FullRow): number {
    const info = this.stmt(
        `INSERT INTO memories (id, api_key_id, session_id, type, key, content, metadata, created_at, updated_at, expires_at, content_hash, needs_reindex, access_count, last_accessed_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`,
      )
      .run(r.id, r.apiKeyId, r.sessionId, r.type, r.key, r.content, JSON.stringify(r.metadata), r.createdAt, r.updatedAt, r.expiresAt, r.contentHash, r.accessCount, r.lastAccessedAt);
    return Number(info.lastInsertRowid);
  }

  /**
   * Memories created before the cutoff, oldest first (summarize-older-than candidates of one key).
   * Engram's own summaries (key `summary:…`) are left out: summarising a summary again would only
   * truncate it further.
   */
  createdBefore(apiKeyId: string, cutoffIso: string, sessionId?: string): MemoryRecord[] {
    const rows = (
      sessionId === undefined
        ? this.stmt(`SELECT * FROM memories WHERE api_key_id = ? AND created_at < ? AND ${NOT_SUMMARY} ORDER BY created_at, memory_id`).all(apiKeyId, cutoffIso)
        : this.stmt(`SELECT * FROM memories WHERE api_key_id = ? AND created_at < ? AND ${NOT_SUMMARY} AND coalesce(session_id, '') = ? ORDER BY created_at, memory_id`).all(apiKeyId, cutoffIso, sessionId)
    ) as Row[];
    return rows.map(rowToRecord);
  }

  /** The API keys that own memories created before the cutoff (optionally in one session). */
  ownersCreatedBefore(cutoffIso: string, sessionId?: string): string[] {
    const rows = (
      sessionId === undefined
        ? this.stmt(`SELECT DISTINCT api_key_id FROM memories WHERE created_at < ? AND ${NOT_SUMMARY} ORDER BY api_key_id`).all(cutoffIso)
        : this.stmt(`SELECT DISTINCT api_key_id FROM memories WHERE created_at < ? AND ${NOT_SUMMARY} AND coalesce(session_id, '') = ? ORDER BY api_key_id`).all(cutoffIso, sessionId)
    ) as { api_key_id: string }[];
    return rows.map((r) => r.api_key_id);
  }

  /** API keys whose memories' token footprint exceeds the threshold. */
  ownersOverTokens(threshold: number): { apiKeyId: string; tokens: number }[] {
    return (
      this.stmt('SELECT api_key_id, SUM((LENGTH(content) + 3) / 4) AS t FROM memories GROUP BY api_key_id HAVING t > ? ORDER BY api_key_id').all(threshold) as {
        api_key_id: string;
        t: number;
      }[]
    ).map((r) => ({ apiKeyId: r.api_key_id, tokens: r.t }));
  }

  /** A key's memories, most worth keeping first (most accessed, then most recently used or created). Summaries are left out. */
  byKeepPriority(apiKeyId: string): MemoryRecord[] {
    return (
      this.stmt(
        `SELECT * FROM memories WHERE api_key_id = ? AND ${NOT_SUMMARY}
         ORDER BY access_count DESC, coalesce(last_accessed_at, updated_at) DESC, memory_id DESC`,
      ).all(apiKeyId) as Row[]
    ).map(rowToRecord);
  }

  update(rowId: number, p: RowPatch): void {
    const sets = ['updated_at = ?'];
    const params: unknown[] = [p.updatedAt];
    for (const [field, col] of Object.entries(COLS) as [keyof typeof COLS, string][]) {
      const v = p[field];
      if (v === undefined) continue;
      sets.push(`${col} = ?`);
      params.push(field === 'metadata' ? JSON.stringify(v) : field === 'needsReindex' ? (v ? 1 : 0) : v);
    }
    params.push(rowId);
    this.stmt(`UPDATE memories SET ${sets.join(', ')} WHERE memory_id = ?`).run(...params);
  }

  /** A re-assertion without change: counted, and updated_at refreshed (retention follows it). */
  reassert(rowId: number, now: string): void {
    this.stmt('UPDATE memories SET updated_at = ?, last_asserted_at = ?, reassert_count = reassert_count + 1 WHERE memory_id = ?').run(now, now, rowId);
  }

  delete(rowId: number): boolean {
    return this.stmt('DELETE FROM memories WHERE memory_id = ?').run(rowId).changes > 0;
  }

  findById(id: string): MemoryRecord | null {
    const r = this.stmt('SELECT * FROM memories WHERE id = ?').get(id) as Row | undefined;
    return r ? rowToRecord(r) : null;
  }

  findByRowId(rowId: number): MemoryRecord | null {
    const r = this.stmt('SELECT * FROM memories WHERE memory_id = ?').get(rowId) as Row | undefined;
    return r ? rowToRecord(r) : null;
  }

  findByKey(apiKeyId: string, key: string): MemoryRecord | null {
    // The key terms repeat the partial index's WHERE so SQLite can use it (else: a scan per upsert).
    const r = this.stmt("SELECT * FROM memories WHERE api_key_id = ? AND key = ? AND key IS NOT NULL AND key <> ''").get(apiKeyId, key) as Row | undefined;
    return r ? rowToRecord(r) : null;
  }

  list(f: ListFilter, limit: number, offset: number): MemoryRecord[] {
    const w = where(f);
    const rows = this.stmt(`SELECT * FROM memories ${w.sql} ORDER BY created_at DESC, memory_id DESC LIMIT ? OFFSET ?`)
      .all(...w.params, limit, offset) as Row[];
    return rows.map(rowToRecord);
  }

  countByType(f: ListFilter): Record<string, number> {
    const w = where(f);
    const rows = this.stmt(`SELECT type, COUNT(*) AS n FROM memories ${w.sql} GROUP BY type`).all(...w.params) as {
      type: string;
      n: number;
    }[];
    return Object.fromEntries(rows.map((r) => [r.type, r.n]));
  }

  /** Σ ceil(len/4) over a key's memories (or all). */
  tokensUsed(apiKeyId?: string): number {
    const row = (
      apiKeyId === undefined
        ? this.stmt('SELECT COALESCE(SUM((LENGTH(content) + 3) / 4), 0) AS t FROM memories').get()
        : this.stmt('SELECT COALESCE(SUM((LENGTH(content) + 3) / 4), 0) AS t FROM memories WHERE api_key_id = ?').get(apiKeyId)
    ) as { t: number };
    return row.t;
  }

  /** Σ ceil(len/4) over the rows a listing filter selects (the same WHERE as list and countByType). */
  tokensUsedBy(f: ListFilter): number {
    const w = where(f);
    return (this.stmt(`SELECT COALESCE(SUM((LENGTH(content) + 3) / 4), 0) AS t FROM memories ${w.sql}`).get(...w.params) as { t: number }).t;
  }

  count(): number {
    return (this.stmt('SELECT count(*) AS n FROM memories').get() as { n: number }).n;
  }

  /**
   * Bumps access counters by `counts[i]` (default 1 each; an id listed twice counts twice); not a content change, so no
   * history row. With `claim`, only when it returns true inside the same transaction (null otherwise: nothing written).
   */
  recordAccess(ids: string[], nowIso: string, counts?: readonly number[], claim?: () => boolean): number | null {
    const stmt = this.stmt('UPDATE memories SET access_count = access_count + ?, last_accessed_at = ? WHERE id = ?');
    return this.db
      .transaction(() => {
        if (claim && !claim()) return null;
        return ids.reduce((n, id, i) => n + stmt.run(counts?.[i] ?? 1, nowIso, id).changes, 0);
      })
      .immediate();
  }

  /** Ids of rows past their expiry, oldest expiry first. */
  expiredIds(nowIso: string, limit: number): string[] {
    return (
      this.stmt('SELECT id FROM memories WHERE expires_at IS NOT NULL AND expires_at <= ? ORDER BY expires_at LIMIT ?')
        .all(nowIso, limit) as { id: string }[]
    ).map((r) => r.id);
  }

  insertEvent(e: {
    rowId: number;
    memoryUuid: string;
    apiKeyId: string;
    op: EventOp;
    before: Memory | null;
    after: Memory | null;
    source: EventSource;
    jobId: string | null;
    requestId: string | null;
    createdAt: string;
  }): void {
    this.stmt(
        `INSERT INTO memory_events (memory_id, memory_uuid, api_key_id, op, before, after, source, job_id, request_id, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        e.rowId,
        e.memoryUuid,
        e.apiKeyId,
        e.op,
        e.before ? JSON.stringify(e.before) : null,
        e.after ? JSON.stringify(e.after) : null,
        e.source,
        e.jobId,
        e.requestId,
        e.createdAt,
      );
  }

  /** Whether the history of this memory id names another API key (a deleted memory's id stays its owner's). */
  historyOfOtherKey(memoryUuid: string, apiKeyId: string): boolean {
    return this.stmt('SELECT 1 FROM memory_events WHERE memory_uuid = ? AND api_key_id <> ? LIMIT 1').get(memoryUuid, apiKeyId) !== undefined;
  }

  events(memoryUuid: string): MemoryEvent[] {
    const rows = this.stmt('SELECT * FROM memory_events WHERE memory_uuid = ? ORDER BY event_id')
      .all(memoryUuid) as {
      event_id: number;
      memory_uuid: string;
      api_key_id: string;
      op: EventOp;
      before: string | null;
      after: string | null;
      source: EventSource;
      job_id: string | null;
      request_id: string | null;
      created_at: string;
    }[];
    return rows.map((r) => ({
      eventId: r.event_id,
      memoryId: r.memory_uuid,
      apiKeyId: r.api_key_id,
      op: r.op,
      before: r.before ? JSON.parse(r.before) : null,
      after: r.after ? JSON.parse(r.after) : null,
      source: r.source,
      jobId: r.job_id,
      requestId: r.request_id,
      createdAt: r.created_at,
    }));
  }

  /** SQLite's data_version: changes when another connection commits (cross-process cache coherence). */
  dataVersion(): number {
    return this.db.pragma('data_version', { simple: true }) as number;
  }
}
