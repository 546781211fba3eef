import type { Env } from '../config/env';

/** The env variables that hold rerank keys. */
export type RerankKeyEnv = Pick<Env, 'COHERE_API_KEY' | 'JINA_API_KEY' | 'VOYAGE_API_KEY'>;

type KeyVar = keyof RerankKeyEnv;

export type RerankProviderId = 'cohere' | 'jina' | 'voyage' | 'custom';

export interface RerankProvider {
  id: RerankProviderId;
  name: string;
  /** Hosted endpoint; null for `custom`, whose URL only the operator supplies. */
  defaultUrl: string | null;
  /** Env variable holding the key; null for `custom`, whose key is optional (self-hosted servers often need none). */
  keyVar: KeyVar | null;
  /** Body field for "how many results": Voyage names it `top_k`, the others `top_n`. */
  topField: 'top_n' | 'top_k';
  /** Extra body fields: Jina echoes every document back unless told not to. */
  extraBody?: Record<string, unknown>;
  /** Suggestions for pickers; any model id the provider accepts works. */
  models: string[];
}

/** Every reranker Engram can call; `custom` is any Cohere/Jina-compatible `/rerank` (Infinity, vLLM, llama.cpp server, LocalAI). */
export const RERANK_PROVIDERS: readonly RerankProvider[] = [
  {
    id: 'cohere',
    name: 'Cohere',
    defaultUrl: 'https://api.cohere.com/v2/rerank',
    keyVar: 'COHERE_API_KEY',
    topField: 'top_n',
    models: ['rerank-v3.5', 'rerank-english-v3.0', 'rerank-multilingual-v3.0'],
  },
  {
    id: 'jina',
    name: 'Jina AI',
    defaultUrl: 'https://api.jina.ai/v1/rerank',
    keyVar: 'JINA_API_KEY',
    topField: 'top_n',
    extraBody: { return_documents: false },
    models: ['jina-reranker-v2-base-multilingual', 'jina-reranker-m0', 'jina-reranker-v1-base-en'],
  },
  {
    id: 'voyage',
    name: 'Voyage AI',
    defaultUrl: 'https://api.voyageai.com/v1/rerank',
    keyVar: 'VOYAGE_API_KEY',
    topField: 'top_k',
    models: ['rerank-2.5', 'rerank-2.5-lite', 'rerank-2', 'rerank-2-lite'],
  },
  {
    id: 'custom',
    name: 'Self-hosted (Cohere/Jina-compatible)',
    defaultUrl: null,
    keyVar: null,
    topField: 'top_n',
    models: [],
  },
];

export interface RerankProviderListing {
  provider: RerankProviderId;
  name: string;
  /** A key is configured (for `custom`: the optional key was given). */
  hasKey: boolean;
  keyRequired: boolean;
  /** An endpoint is known: always for hosted providers, for `custom` only when the operator set one. */
  configured: boolean;
  /** A call would be attempted. */
  available: boolean;
  /** Suggested `provider/model` values. */
  models: string[];
}

