import type { HybridFusion } from './settings';
import type { Memory } from './types';
import type { RetrievalExtras } from './retrieval-extras';

/** Retrieval strategies (settings' `recent` maps to `exact`). */
export type RetrievalStrategy = 'exact' | 'semantic' | 'hybrid';

/** Which tier produced an item (the original's names). */
export type RetrievalTier = 'fts5' | 'vector' | 'hybrid-rrf' | 'hybrid-convex' | 'qdrant' | 'recent';

/** How hybrid fuses its two rankings (settings `hybridFusion` / `hybridFtsWeight` / `hybridVectorWeight`, or a preview's overrides). */
export interface FusionChoice {
  method: HybridFusion;
  ftsWeight: number;
  vectorWeight: number;
}

export interface RetrieveOptions {
  /** The text to match (the last user message); empty/null means recency only. */
  query?: string | null;
  strategy: RetrievalStrategy;
  /** Token budget, 1–16000. */
  maxTokens: number;
  /** Only memories created (or updated) within this many days. */
  retentionDays: number;
  sessionId?: string | null;
  /** `session` restricts to sessionId; `apiKey` (default) searches all of the key's memories. */
  scope?: 'apiKey' | 'session';
  /** Cap on returned items (preview). */
  limit?: number;
  /** Overrides of the settings' fusion for this call (retrieve-preview); unset fields come from settings. */
  fusion?: Partial<FusionChoice>;
  /** Overrides of the settings' item-4 extras for this call (retrieve-preview; retrieval-extras.ts). */
  extras?: Partial<RetrievalExtras>;
}

export interface RetrievedItem {
  memory: Memory;
  score: number;
  tokens: number;
  tier: RetrievalTier;
  vecScore: number | null;
  ftsScore: number | null;
  /** The single oversize best item, cut to fit the budget. */
  truncated: boolean;
}

export interface RetrievalResolution {
  embeddingSource: string | null;
  embeddingModel: string | null;
  vectorStore: 'sqlite-vec' | 'qdrant' | 'none';
  strategyUsed: RetrievalStrategy;
  rerankApplied: boolean;
  /** Why rerank was not applied (null when it was, or was not asked for). */
  rerankReason: string | null;
  /** Why a vector strategy fell back to keywords (null when it did not). */
  fallbackReason: string | null;
  /** The fusion hybrid used (null when no fusion ran: exact, semantic, or a keyword fallback). */
  fusion: FusionChoice | null;
}

export interface RetrievalResult {
  items: RetrievedItem[];
  resolution: RetrievalResolution;
  totalTokens: number;
  budgetMaxTokens: number;
  /** True when no two items have the same content (case and whitespace aside): injection can skip its own duplicate check. */
  distinctContent?: boolean;
}

/** How a retrieval runs (not what it looks for). */
export interface RetrieveMode {
  /** Skip side effects (no access counts): the management preview. */
  preview?: boolean;
  requestId?: string;
  /**
   * Aborts the retrieval's outbound calls (embedding, vector search, rerank) and rejects it with the
   * signal's reason: the memory phase fires it when it stops waiting (timeout, client gone).
   */
  signal?: AbortSignal;
  /**
   * The caller reads only the items' content (the chat's injection): the access count and last
   * access of the items are then as the record cache holds them (they may lag) instead of re-read.
   */
  contentOnly?: boolean;
}

/** Retrieves a key's relevant memories within a token budget (request path: reads only). */
export interface Retriever {
  /** `apiKeyId` null searches every tenant (management preview only). */
  retrieve(apiKeyId: string | null, opts: RetrieveOptions, mode?: RetrieveMode): Promise<RetrievalResult>;
  /** Finishes background bookkeeping (pending access counts); call before the queues close. */
  close?(): Promise<void>;
}
