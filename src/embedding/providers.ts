import type { Env } from '../config/env';

/** The env variables the provider registry reads. */
export type ProviderEnv = Pick<
  Env,
  | 'OPENAI_API_KEY'
  | 'MISTRAL_API_KEY'
  | 'TOGETHER_API_KEY'
  | 'JINA_API_KEY'
  | 'VOYAGE_API_KEY'
  | 'NVIDIA_API_KEY'
  | 'OPENROUTER_API_KEY'
  | 'COHERE_API_KEY'
  | 'OLLAMA_BASE_URL'
>;

type KeyVar = Exclude<keyof ProviderEnv, 'OLLAMA_BASE_URL'>;

export interface ProviderModel {
  /** Model id as settings name it after `provider/`. */
  id: string;
  name: string;
  /** Documented default width; a hint until the first vector is measured. */
  dimensions: number | null;
  /** Model name sent on the wire when it differs from `id`. */
  apiModel?: string;
}

export interface EmbeddingProvider {
  id: string;
  name: string;
  aliases?: string[];
  /** OpenAI-compatible base URL (the request goes to `<base>/embeddings`). */
  baseUrl: (env: ProviderEnv) => string;
  /** Env variable holding the key; null when the provider needs none (a local server). */
  keyVar: KeyVar | null;
  models: ProviderModel[];
  /** Extra body fields some providers require. */
  extraBody?: Record<string, unknown>;
}

/** Every provider Engram can call for embeddings; keys come from env only. */
export const EMBEDDING_PROVIDERS: readonly EmbeddingProvider[] = [
  {
    id: 'openai',
    name: 'OpenAI',
    baseUrl: () => 'https://api.openai.com/v1',
    keyVar: 'OPENAI_API_KEY',
    models: [
      { id: 'text-embedding-3-small', name: 'text-embedding-3-small', dimensions: 1536 },
      { id: 'text-embedding-3-large', name: 'text-embedding-3-large', dimensions: 3072 },
      { id: 'text-embedding-ada-002', name: 'text-embedding-ada-002', dimensions: 1536 },
    ],
  },
  {
    id: 'mistral',
    name: 'Mistral',
    baseUrl: () => 'https://api.mistral.ai/v1',
    keyVar: 'MISTRAL_API_KEY',
    models: [{ id: 'mistral-embed', name: 'Mistral Embed', dimensions: 1024 }],
  },
  {
    id: 'together',
    name: 'Together AI',
    baseUrl: () => 'https://api.together.xyz/v1',
    keyVar: 'TOGETHER_API_KEY',
    models: [
      { id: 'BAAI/bge-large-en-v1.5', name: 'BGE Large EN v1.5', dimensions: 1024 },
      { id: 'BAAI/bge-base-en-v1.5', name: 'BGE Base EN v1.5', dimensions: 768 },
      { id: 'intfloat/multilingual-e5-large-instruct', name: 'Multilingual E5 Large Instruct', dimensions: 1024 },
    ],
  },
  {
    id: 'jina',
    name: 'Jina AI',
    baseUrl: () => 'https://api.jina.ai/v1',
    keyVar: 'JINA_API_KEY',
    models: [
      { id: 'jina-embeddings-v3', name: 'Jina Embeddings v3', dimensions: 1024 },
      { id: 'jina-embeddings-v2-base-en', name: 'Jina Embeddings v2 Base EN', dimensions: 768 },
    ],
  },
  {
    id: 'voyage',
    name: 'Voyage AI',
    baseUrl: () => 'https://api.voyageai.com/v1',
    keyVar: 'VOYAGE_API_KEY',
    models: [
      { id: 'voyage-3', name: 'Voyage 3', dimensions: 1024 },
      { id: 'voyage-3-large', name: 'Voyage 3 Large', dimensions: 1024 },
      { id: 'voyage-3-lite', name: 'Voyage 3 Lite', dimensions: 512 },
      { id: 'voyage-code-3', name: 'Voyage Code 3', dimensions: 1024 },
    ],
  },
  {
    id: 'nvidia',
    name: 'NVIDIA NIM',
    baseUrl: () => 'https://integrate.api.nvidia.com/v1',
    keyVar: 'NVIDIA_API_KEY',
    models: [
      { id: 'nv-embedqa-e5-v5', name: 'NV-EmbedQA E5 v5', dimensions: 1024, apiModel: 'nvidia/nv-embedqa-e5-v5' },
      { id: 'nv-embedqa-mistral-7b-v2', name: 'NV-EmbedQA Mistral 7B v2', dimensions: 4096, apiModel: 'nvidia/nv-embedqa-mistral-7b-v2' },
      { id: 'llama-3.2-nv-embedqa-1b-v2', name: 'Llama 3.2 NV-EmbedQA 1B v2', dimensions: 2048, apiModel: 'nvidia/llama-3.2-nv-embedqa-1b-v2' },
      { id: 'bge-m3', name: 'BGE-M3', dimensions: 1024, apiModel: 'baai/bge-m3' },
    ],
    // The retrieval models refuse a request without input_type; memories and queries share one space here.
    extraBody: { input_type: 'passage', truncate: 'END' },
  },
  {
    id: 'openrouter',
    name: 'OpenRouter',
    baseUrl: () => 'https://openrouter.ai/api/v1',
    keyVar: 'OPENROUTER_API_KEY',
    models: [
      { id: 'openai/text-embedding-3-small', name: 'OpenAI text-embedding-3-small', dimensions: 1536 },
      { id: 'openai/text-embedding-3-large', name: 'OpenAI text-embedding-3-large', dimensions: 3072 },
      { id: 'mistralai/mistral-embed-2312', name: 'Mistral Embed', dimensions: 1024 },
    ],
  },
  {
    id: 'cohere',
    name: 'Cohere',
    // Cohere's OpenAI compatibility API.
    baseUrl: () => 'https://api.cohere.ai/compatibility/v1',
    keyVar: 'COHERE_API_KEY',
    models: [
      { id: 'embed-english-v3.0', name: 'Embed English v3', dimensions: 1024 },
      { id: 'embed-multilingual-v3.0', name: 'Embed Multilingual v3', dimensions: 1024 },
    ],
  },
  {
    id: 'ollama',
    name: 'Ollama (local)',
    aliases: ['local'],
    baseUrl: (env) => `${env.OLLAMA_BASE_URL.replace(/\/+$/, '')}/v1`,
    keyVar: null,
    models: [
      { id: 'nomic-embed-text', name: 'nomic-embed-text', dimensions: 768 },
      { id: 'mxbai-embed-large', name: 'mxbai-embed-large', dimensions: 1024 },
      { id: 'all-minilm', name: 'all-minilm', dimensions: 384 },
    ],
  },
];

/** The provider for an id or alias (case-insensitive), if registered. */
export function findProvider(id: string): EmbeddingProvider | undefined {
  const k = id.toLowerCase();
  return EMBEDDING_PROVIDERS.find((p) => p.id === k || p.aliases?.includes(k));
}

/** The key configured for a provider: a non-empty string, null when it needs none, undefined when missing. */
export function providerKey(provider: EmbeddingProvider, env: ProviderEnv): string | null | undefined {
  if (!provider.keyVar) return null;
  const v = env[provider.keyVar];
  return typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined;
}

/** A parsed `provider/model` setting. */
export interface ProviderModelRef {
  provider: EmbeddingProvider;
  /** The model part, as typed after the first slash. */
  modelId: string;
  /** What goes in the request body. */
  apiModel: string;
  /** Canonical `provider/model`. */
  fullId: string;
  dimensions: number | null;
}

/** Parses `provider/model` (the model part may itself contain slashes); null when the provider is unknown or the model empty. */
export function parseProviderModel(value: string): ProviderModelRef | null {
  const slash = value.indexOf('/');
  if (slash <= 0) return null;
  const provider = findProvider(value.slice(0, slash).trim());
  const modelId = value.slice(slash + 1).trim();
  if (!provider || !modelId) return null;
  const known = provider.models.find((m) => m.id === modelId || m.apiModel === modelId);
  return {
    provider,
    modelId: known?.id ?? modelId,
    apiModel: known?.apiModel ?? known?.id ?? modelId,
    fullId: `${provider.id}/${known?.id ?? modelId}`,
    dimensions: known?.dimensions ?? null,
  };
}

export interface ProviderListing {
  provider: string;
  hasKey: boolean;
  models: Array<{ id: string; name: string; dimensions: number | null }>;
}

/** Every registered provider with whether a key is configured (GET /api/memory/embedding-providers). */
export function listEmbeddingProviders(env: ProviderEnv): ProviderListing[] {
  return EMBEDDING_PROVIDERS.map((p) => ({
    provider: p.id,
    hasKey: providerKey(p, env) !== undefined,
    models: p.models.map((m) => ({ id: `${p.id}/${m.id}`, name: m.name, dimensions: m.dimensions })),
  }));
}
