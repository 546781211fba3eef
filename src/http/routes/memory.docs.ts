import { z } from 'zod';
import { memoryTypeSchema } from '../../memory/types';
import type { RouteDoc } from '../route-doc';

/** The public memory shape (responses; documentation only — requests are validated by memory.schema.ts). */
export const memorySchema = z
  .object({
    id: z.uuid(),
    apiKeyId: z.string(),
    sessionId: z.string(),
    type: memoryTypeSchema,
    key: z.string(),
    content: z.string(),
    metadata: z.record(z.string(), z.unknown()),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
    expiresAt: z.iso.datetime().nullable(),
    accessCount: z.number().int(),
    lastAccessedAt: z.iso.datetime().nullable(),
  })
;

const EXAMPLE_MEMORY = {
  id: '0b6d7c1e-8f1a-4c55-9a0e-2f0d3f5b7a11',
  apiKeyId: 'k_3f9a2c',
  sessionId: '',
  type: 'factual',
  key: 'preferred_editor',
  content: 'The user edits code in Helix',
  metadata: { source: 'onboarding' },
  createdAt: '2026-03-01T10:00:00.000Z',
  updatedAt: '2026-03-01T10:00:00.000Z',
  expiresAt: null,
  accessCount: 0,
  lastAccessedAt: null,
};

const byType = z.record(z.string(), z.number().int());
const withMemory = z.object({ success: z.literal(true), memory: memorySchema });

export const memoryDocs = {
  list: {
    summary: 'List memories (filters, pagination, stats)',
    description: '`offset` wins over `page` (page is then derived from it), as in the original.',
    responses: {
      200: {
        description: 'One page and the stats of the filtered set',
        schema: z.object({
          data: z.array(memorySchema),
          total: z.number().int(),
          page: z.number().int(),
          limit: z.number().int(),
          totalPages: z.number().int(),
          stats: z.object({ total: z.number().int(), byType, tokensUsed: z.number().int(), hitRate: z.number(), cacheStats: z.object({ hits: z.number(), misses: z.number(), size: z.number() }) }),
        }),
      },
    },
  },
  create: {
    summary: 'Create a memory (upsert by apiKeyId + key)',
    requestExample: { content: 'The user edits code in Helix', key: 'preferred_editor', type: 'factual', apiKeyId: 'k_3f9a2c', metadata: { source: 'onboarding' } },
    responses: {
      201: { description: 'Created', schema: z.object({ success: z.literal(true), id: z.string(), created: z.boolean(), memory: memorySchema }), example: { success: true, id: EXAMPLE_MEMORY.id, created: true, memory: EXAMPLE_MEMORY } },
      200: { description: 'An existing memory with the same key was updated', schema: z.object({ success: z.literal(true), id: z.string(), created: z.boolean(), memory: memorySchema }) },
    },
  },
  health: { summary: 'Memory store self-test', responses: { 200: { description: 'Whether a write/list/delete round trip works', schema: z.object({ working: z.boolean(), latencyMs: z.number(), error: z.string().optional() }) } } },
  preview: { summary: 'Preview retrieval for a query (no side effects)', requestExample: { query: 'which editor do I use?', strategy: 'hybrid', maxTokens: 500, apiKeyId: 'k_3f9a2c' } },
  reindex: { summary: 'Start a reindex job', responses: { 202: { description: 'Job accepted', schema: z.object({ jobId: z.string(), queue: z.string(), started: z.boolean(), pending: z.number().int(), via: z.enum(['queue', 'outbox']) }) }, 409: { description: 'A reindex job is already running' } } },
  backends: { summary: 'Configured memory backends and the health of each', responses: { 200: { description: 'Primary, fallbacks, health', schema: z.object({ primary: z.string(), fallbacks: z.array(z.string()), primaryError: z.string().nullable(), health: z.record(z.string(), z.object({ ok: z.boolean(), latencyMs: z.number(), error: z.string().optional(), role: z.enum(['primary', 'fallback']) })) }) } } },
  engineStatus: { summary: 'Retrieval engine status (keyword, embeddings, vector store, rerank)' },
  embeddingProviders: { summary: 'Embedding providers and whether each has a key' },
  get: { summary: 'One memory (primary backend, then the fallbacks)', responses: { 200: { description: 'The memory', schema: z.object({ memory: memorySchema }), example: { memory: EXAMPLE_MEMORY } }, 404: { description: 'Not found' } } },
  update: { summary: 'Update a memory', responses: { 200: { description: 'Updated', schema: withMemory }, 404: { description: 'Not found' }, 409: { description: 'Another memory of this key already uses that key' } } },
  delete: { summary: 'Delete a memory (its text stays in the history)', responses: { 200: { description: 'Deleted', schema: z.object({ success: z.literal(true) }) }, 404: { description: 'Not found' } } },
  history: { summary: 'Every change of a memory', responses: { 200: { description: 'History rows, oldest first' }, 404: { description: 'Not found' } } },
} satisfies Record<string, RouteDoc>;
