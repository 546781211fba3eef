import crypto from 'node:crypto';
import { z } from 'zod';
import { MEMORY_TYPES, memoryTypeSchema, type Memory, type MemoryType } from './types';

/** A record as read from a file, before its owner is mapped to an Engram key. */
export type SourceRecord = Omit<Memory, 'apiKeyId'> & { owner: string };

/** One record of a file: where it is (line or row number), and either the record or why it cannot be imported. */
export type SourceItem = { at: number; record: SourceRecord; warnings: string[] } | { at: number; error: string };

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/** A UUID (RFC 9562 version 8 layout) derived from text: the same input always gives the same id. */
export function derivedUuid(text: string): string {
  const h = crypto.createHash('sha256').update(text).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${((parseInt(h[16], 16) & 0x3) | 0x8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/**
 * The id a record keeps: its own when it is a UUID, else one derived from it (or, without any id,
 * from owner, key and content) so that importing the same file twice finds the same rows.
 */
export function recordId(given: unknown, owner: string, key: string, content: string): { id: string; derivedFrom?: string } {
  if (typeof given === 'string' && UUID_RE.test(given)) return { id: given.toLowerCase() };
  if (typeof given === 'string' && given.length > 0) return { id: derivedUuid(`id\n${given}`), derivedFrom: given };
  return { id: derivedUuid(`content\n${owner}\n${key}\n${content}`) };
}

const SQLITE_DATETIME = /^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)$/;

/**
 * Any timestamp an import meets → Engram's one format (ISO-8601 UTC with milliseconds), or null:
 * ISO with Z or an offset, SQLite's `datetime('now')` text (UTC without a zone), a bare date, epoch
 * seconds or milliseconds (numbers or digit strings).
 */
export function normalizeTimestamp(v: unknown): string | null {
  if (v === null || v === undefined || v === '') return null;
  let d: Date;
  if (typeof v === 'number' || (typeof v === 'string' && /^\d{9,14}(\.\d+)?$/.test(v.trim()))) {
    const n = Number(v);
    d = new Date(n < 1e11 ? n * 1000 : n);
  } else if (typeof v === 'string') {
    const s = v.trim();
    const m = SQLITE_DATETIME.exec(s);
    if (m) d = new Date(`${m[1]}T${m[2]}Z`);
    else if (/^\d{4}-\d{2}-\d{2}$/.test(s)) d = new Date(`${s}T00:00:00Z`);
    else if (/^\d{4}-\d{2}-\d{2}T/.test(s)) d = new Date(s);
    else return null;
  } else return null;
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}

const timestamp = z.union([z.string(), z.number()]).transform((v, ctx) => {
  const t = normalizeTimestamp(v);
  if (t === null) {
    ctx.addIssue({ code: 'custom', message: 'expected an ISO-8601 timestamp or epoch time' });
    return z.NEVER;
  }
  return t;
});

/** One line of an NDJSON import: Engram's export format (unknown fields are ignored). */
export const ndjsonRecordSchema = z.object({
  id: z.string().min(1).max(128).optional(),
  apiKeyId: z.string().max(128),
  sessionId: z.string().max(256).nullable().optional(),
  type: memoryTypeSchema.default('factual'),
  key: z.string().max(512).nullable().optional(),
  content: z.string().min(1).max(65_536),
  metadata: z.record(z.string(), z.unknown()).default({}),
  createdAt: timestamp.optional(),
  updatedAt: timestamp.optional(),
  expiresAt: timestamp.nullable().optional(),
  accessCount: z.number().int().min(0).default(0),
  lastAccessedAt: timestamp.nullable().optional(),
});

/** Parses one NDJSON line (line numbers count from 1); an error names the zod path. */
export function parseNdjsonLine(line: string, at: number, importedAt: string): SourceItem {
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch (err) {
    return { at, error: `invalid JSON: ${(err as Error).message}` };
  }
  const r = ndjsonRecordSchema.safeParse(raw);
  if (!r.success) return { at, error: r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ') };
  const v = r.data;
  const key = v.key ?? '';
  const { id, derivedFrom } = recordId(v.id, v.apiKeyId, key, v.content);
  const createdAt = v.createdAt ?? v.updatedAt ?? importedAt;
  return {
    at,
    record: {
      id,
      owner: v.apiKeyId,
      sessionId: v.sessionId ?? '',
      type: v.type,
      key,
      content: v.content,
      metadata: derivedFrom ? { ...v.metadata, importedId: derivedFrom } : v.metadata,
      createdAt,
      updatedAt: v.updatedAt ?? createdAt,
      expiresAt: v.expiresAt ?? null,
      accessCount: v.accessCount,
      lastAccessedAt: v.lastAccessedAt ?? null,
    },
    warnings: derivedFrom ? [`id ${JSON.stringify(derivedFrom.slice(0, 64))} is not a UUID; imported as ${id}`] : [],
  };
}

/** A row of the original product's `memories` table (digest §1.1); later columns may be missing. */
export interface OriginalRow {
  _rowid: number;
  id?: unknown;
  api_key_id?: unknown;
  session_id?: unknown;
  type?: unknown;
  key?: unknown;
  content?: unknown;
  metadata?: unknown;
  created_at?: unknown;
  updated_at?: unknown;
  expires_at?: unknown;
  access_count?: unknown;
  last_accessed_at?: unknown;
}

const str = (v: unknown): string => (typeof v === 'string' ? v : v === null || v === undefined ? '' : String(v));

/**
 * A row of the original product's database → a record, tolerating what that schema allowed:
 * NULL memory_id (ignored: Engram assigns its own integer key), metadata that is not JSON (kept
 * as text under `legacyMetadata`), mixed timestamp formats, a type outside the four (imported as
 * factual, the original type kept under `originalType`).
 */
export function fromOriginalRow(row: OriginalRow, importedAt: string): SourceItem {
  const at = row._rowid;
  const content = str(row.content);
  if (content.trim() === '') return { at, error: 'content is empty' };
  if (content.length > 65_536) return { at, error: 'content longer than 65536 characters' };
  const warnings: string[] = [];
  const owner = str(row.api_key_id);
  const key = str(row.key).slice(0, 512);
  let metadata: Record<string, unknown> = {};
  if (typeof row.metadata === 'string' && row.metadata.trim() !== '') {
    try {
      const parsed: unknown = JSON.parse(row.metadata);
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) metadata = parsed as Record<string, unknown>;
      else {
        metadata = { legacyMetadata: row.metadata.slice(0, 16_384) };
        warnings.push('metadata is not a JSON object; kept as text in metadata.legacyMetadata');
      }
    } catch {
      metadata = { legacyMetadata: row.metadata.slice(0, 16_384) };
      warnings.push('metadata is not valid JSON; kept as text in metadata.legacyMetadata');
    }
  }
  let type: MemoryType = 'factual';
  if ((MEMORY_TYPES as readonly string[]).includes(str(row.type))) type = str(row.type) as MemoryType;
  else {
    metadata = { ...metadata, originalType: str(row.type).slice(0, 64) };
    warnings.push(`unknown type ${JSON.stringify(str(row.type).slice(0, 64))}; imported as factual`);
  }
  const { id, derivedFrom } = recordId(row.id, owner, key, content);
  if (derivedFrom) {
    metadata = { ...metadata, importedId: derivedFrom };
    warnings.push(`id is not a UUID; imported as ${id}`);
  } else if (!(typeof row.id === 'string' && row.id)) warnings.push(`no id; imported as ${id}`);
  const ts = (field: 'created_at' | 'updated_at' | 'expires_at' | 'last_accessed_at'): string | null => {
    const v = row[field];
    const t = normalizeTimestamp(v);
    if (t === null && v !== null && v !== undefined && v !== '') warnings.push(`${field} ${JSON.stringify(str(v).slice(0, 40))} is not a timestamp; ignored`);
    return t;
  };
  const created = ts('created_at');
  const updated = ts('updated_at');
  const createdAt = created ?? updated ?? importedAt;
  const accessCount = Number(row.access_count);
  return {
    at,
    record: {
      id,
      owner,
      sessionId: str(row.session_id),
      type,
      key,
      content,
      metadata,
      createdAt,
      updatedAt: updated ?? createdAt,
      expiresAt: ts('expires_at'),
      accessCount: Number.isInteger(accessCount) && accessCount >= 0 ? accessCount : 0,
      lastAccessedAt: ts('last_accessed_at'),
    },
    warnings,
  };
}
