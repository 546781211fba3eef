import { z } from 'zod';
import { MEMORY_TYPES, type ChangeContext, type CreateMemoryInput, type ListFilter, type Memory, type MemoryType, type UpdateMemoryInput } from '../memory/types';

/** Search arguments (the original's `search({query, apiKeyId, limit?, maxTokens?, strategy?})`). */
export interface BackendSearch {
  query: string;
  apiKeyId: string;
  limit?: number;
  maxTokens?: number;
  strategy?: 'exact' | 'semantic' | 'hybrid';
  retentionDays?: number;
}

export interface BackendListResult {
  data: Memory[];
  total: number;
  byType: Record<string, number>;
}

export interface BackendHealth {
  ok: boolean;
  latencyMs: number;
  error?: string;
}

/** A memory to create; `id` is kept by backends that can store it (fallback copies keep the primary's id). */
export type BackendCreateInput = CreateMemoryInput & { id?: string };

/**
 * Where memories live (digest §8.1). Every method is async: a backend may be a remote service.
 * `get`/`update`/`delete` answer null/false for a memory that does not exist; anything else that
 * goes wrong throws.
 */
export interface MemoryBackend {
  readonly id: string;
  readonly displayName: string;
  create(input: BackendCreateInput, ctx: ChangeContext): Promise<{ memory: Memory; created: boolean }>;
  get(id: string): Promise<Memory | null>;
  update(id: string, patch: UpdateMemoryInput, ctx: ChangeContext): Promise<Memory | null>;
  delete(id: string, ctx: ChangeContext): Promise<boolean>;
  list(filter: ListFilter, limit: number, offset: number): Promise<BackendListResult>;
  search(q: BackendSearch): Promise<Memory[]>;
  health(): Promise<BackendHealth>;
  initialize?(): Promise<void>;
  shutdown?(): Promise<void>;
}

/** A thrown backend failure whose message is safe to show (never a URL, header or secret). */
export class BackendError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'BackendError';
  }
}

const memoryType = z.enum(MEMORY_TYPES).catch('factual');
const str = z.string().catch('');
const isoOrNull = z
  .union([z.string(), z.number()])
  .nullable()
  .optional()
  .catch(null)
  .transform((v) => (v === null || v === undefined ? null : safeIso(v)));

function safeIso(v: string | number): string | null {
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}

/** A memory as a remote backend sent it: checked and completed into Engram's shape (remote data is never trusted as-is). */
export const remoteMemorySchema = z
  .object({
    id: z.union([z.string().min(1).max(256), z.number()]).transform(String),
    apiKeyId: str.default(''),
    sessionId: z.string().nullable().catch('').default('').transform((v) => v ?? ''),
    type: memoryType.default('factual'),
    key: z.string().nullable().catch('').default('').transform((v) => v ?? ''),
    content: z.string().max(1_048_576),
    metadata: z.record(z.string(), z.unknown()).catch({}).default({}),
    createdAt: isoOrNull,
    updatedAt: isoOrNull,
    expiresAt: isoOrNull,
    accessCount: z.number().int().nonnegative().catch(0).default(0),
    lastAccessedAt: isoOrNull,
  })
  .transform((m): Memory => {
    const created = m.createdAt ?? new Date(0).toISOString();
    return {
      id: m.id,
      apiKeyId: m.apiKeyId,
      sessionId: m.sessionId,
      type: m.type as MemoryType,
      key: m.key,
      content: m.content,
      metadata: m.metadata,
      createdAt: created,
      updatedAt: m.updatedAt ?? created,
      expiresAt: m.expiresAt,
      accessCount: m.accessCount,
      lastAccessedAt: m.lastAccessedAt,
    };
  });

/** Parses one remote memory; throws a BackendError naming the backend when it is not one. */
export function parseRemoteMemory(backendId: string, raw: unknown): Memory {
  const r = remoteMemorySchema.safeParse(raw);
  if (!r.success) throw new BackendError(`backend ${backendId} answered with something that is not a memory (${r.error.issues[0]?.path.join('.') || 'root'}: ${r.error.issues[0]?.message})`);
  return r.data;
}

/** Counts per type of a list of memories. */
export function countByType(memories: readonly Memory[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of memories) out[m.type] = (out[m.type] ?? 0) + 1;
  return out;
}

/** Applies a listing filter to memories a backend could not filter itself. */
export function matchesFilter(m: Memory, f: ListFilter): boolean {
  if (f.apiKeyId !== undefined && m.apiKeyId !== f.apiKeyId) return false;
  if (f.type !== undefined && m.type !== f.type) return false;
  if (f.sessionId !== undefined && m.sessionId !== f.sessionId) return false;
  if (f.q) {
    const q = f.q.toLowerCase();
    if (!m.content.toLowerCase().includes(q) && !m.key.toLowerCase().includes(q)) return false;
  }
  return true;
}
