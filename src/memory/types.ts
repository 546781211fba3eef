import { z } from 'zod';

export const MEMORY_TYPES = ['factual', 'episodic', 'procedural', 'semantic'] as const;
export type MemoryType = (typeof MEMORY_TYPES)[number];
export const memoryTypeSchema = z.enum(MEMORY_TYPES);

/** The public memory shape, field names as in the original (sessionId/key are "" when null). */
export interface Memory {
  id: string;
  apiKeyId: string;
  sessionId: string;
  type: MemoryType;
  key: string;
  content: string;
  metadata: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
  expiresAt: string | null;
  accessCount: number;
  lastAccessedAt: string | null;
}

/** A stored row: the public memory plus the internal integer key and index bookkeeping. */
export interface MemoryRecord extends Memory {
  /** The integer key (`memories.memory_id`): FTS rowid and vec0 key; internal only. The public id is `id`. */
  rowId: number;
  contentHash: string;
  needsReindex: boolean;
}

export const EVENT_SOURCES = ['api', 'extraction', 'mcp', 'summarize', 'expiry', 'import'] as const;
export type EventSource = (typeof EVENT_SOURCES)[number];
export type EventOp = 'create' | 'update' | 'delete' | 'summarize' | 'expire' | 'import';

/** Who made a change; recorded with every history row. */
export interface ChangeContext {
  source: EventSource;
  requestId?: string | null;
  jobId?: string | null;
}

export interface MemoryEvent {
  eventId: number;
  memoryId: string;
  apiKeyId: string;
  op: EventOp;
  before: Memory | null;
  after: Memory | null;
  source: EventSource;
  jobId: string | null;
  requestId: string | null;
  createdAt: string;
}

export interface CreateMemoryInput {
  /** Used for a new row when it is a UUID (a fallback copy keeps its primary's id); otherwise one is minted. */
  id?: string;
  apiKeyId: string;
  sessionId?: string | null;
  type: MemoryType;
  key?: string | null;
  content: string;
  metadata?: Record<string, unknown>;
  /** undefined keeps an existing row's expiry on upsert; null clears it. */
  expiresAt?: string | null;
}

export interface UpdateMemoryInput {
  type?: MemoryType;
  key?: string;
  content?: string;
  metadata?: Record<string, unknown>;
  expiresAt?: string | null;
  sessionId?: string | null;
}

export interface ListFilter {
  apiKeyId?: string;
  type?: MemoryType;
  sessionId?: string;
  q?: string;
}

/** Strips internal fields (a new object; metadata is shared). */
export function toPublic(r: Memory): Memory {
  return {
    id: r.id,
    apiKeyId: r.apiKeyId,
    sessionId: r.sessionId,
    type: r.type,
    key: r.key,
    content: r.content,
    metadata: r.metadata,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
    expiresAt: r.expiresAt,
    accessCount: r.accessCount,
    lastAccessedAt: r.lastAccessedAt,
  };
}
