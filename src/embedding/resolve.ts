import fs from 'node:fs';
import type { Env } from '../config/env';
import { customEmbeddingsUrl, OutboundUrlError } from '../net/url-policy';
import { vectorSignature } from '../vector/signature';
import { parseProviderModel, providerKey, type ProviderEnv } from './providers';
import { staticModelLocation, type StaticEnv } from './static';
import { transformersModelLocation, type TransformersEnv } from './transformers';
import type { EmbeddingErrorReason, EmbeddingSource } from './types';

/** The settings fields that choose an embedding source (a subset of the memory settings, declared here so embedding depends on nothing above it). */
export interface EmbeddingSettings {
  embeddingSource: 'remote' | 'static' | 'transformers' | 'auto';
  embeddingProviderModel: string | null;
  staticEnabled: boolean;
  transformersEnabled: boolean;
  customBaseUrl: string | null;
  customModelId: string | null;
}

export type ResolveEnv = ProviderEnv &
  StaticEnv &
  TransformersEnv &
  Pick<Env, 'MEMORY_EMBEDDING_CUSTOM_API_KEY' | 'OMNIROUTE_ALLOW_PRIVATE_PROVIDER_URLS'>;

/** Which source and model embeddings come from right now, and why. */
export interface EmbeddingResolution {
  source: EmbeddingSource | null;
  model: string | null;
  /** Known width (registry hint or measured); null until the first vector is measured. */
  dimensions: number | null;
  /** `<source>:<identity>:<dim>`; a change means stored vectors are stale. */
  signature: string;
  /** What makes vectors comparable: the model, a local folder, or `<embeddingsUrl>|<modelId>` for a custom endpoint. */
  identity: string | null;
  /** English explanation of the choice. */
  reason: string;
}

/** Where remote requests go once resolution picked `remote`. */
export interface RemoteTarget {
  kind: 'provider' | 'custom';
  model: string;
  identity: string;
  url: string;
  apiModel: string;
  /** Env variable the key comes from; null when none is needed. */
  keyVar: keyof Env | null;
  /** Provider URLs come from code or operator env; only the custom one is user-set. */
  userSet: boolean;
  dimensions: number | null;
  extraBody?: Record<string, unknown>;
}

/** A resolution plus what the service needs to act on it. */
export interface ResolutionDetail {
  resolution: EmbeddingResolution;
  /** Error reason to report when `source` is null. */
  failure: EmbeddingErrorReason | null;
  remote: RemoteTarget | null;
}

/** The signature string (the vector tier's one builder, without a storage suffix): literal `null` for unknown parts. */
export function embeddingSignature(source: EmbeddingSource | null, identity: string | null, dimensions: number | null): string {
  return vectorSignature({ source, model: null, identity, dimensions });
}

type Candidate<T> = { ok: true; value: T; note: string } | { ok: false; why: string; failure: EmbeddingErrorReason };

function remoteCandidate(settings: EmbeddingSettings, env: ResolveEnv): Candidate<RemoteTarget> {
  const base = settings.customBaseUrl?.trim();
  const modelId = settings.customModelId?.trim();
  if (base && modelId) {
    try {
      const url = customEmbeddingsUrl(base, { allowPrivate: env.OMNIROUTE_ALLOW_PRIVATE_PROVIDER_URLS });
      const hasKey = !!env.MEMORY_EMBEDDING_CUSTOM_API_KEY;
      return {
        ok: true,
        value: {
          kind: 'custom',
          model: `memory-custom/${modelId}`,
          identity: `${url}|${modelId}`,
          url,
          apiModel: modelId,
          keyVar: hasKey ? 'MEMORY_EMBEDDING_CUSTOM_API_KEY' : null,
          userSet: true,
          dimensions: null,
        },
        note: `custom embeddings endpoint${hasKey ? ' with MEMORY_EMBEDDING_CUSTOM_API_KEY' : ' without a key'}`,
      };
    } catch (err) {
      const code = err instanceof OutboundUrlError ? err.code : 'invalid_url';
      return { ok: false, why: `custom embedding endpoint is invalid or blocked (${code})`, failure: 'request_failed' };
    }
  }
  const pm = settings.embeddingProviderModel?.trim();
  if (!pm) {
    const why = base || modelId ? 'custom endpoint needs both customBaseUrl and customModelId' : 'embeddingProviderModel not configured';
    return { ok: false, why, failure: 'no_key' };
  }
  const ref = parseProviderModel(pm);
  if (!ref) return { ok: false, why: 'embeddingProviderModel is not a known provider/model', failure: 'unknown' };
  const key = providerKey(ref.provider, env);
  if (key === undefined) return { ok: false, why: `${ref.provider.keyVar} is not set`, failure: 'no_key' };
  return {
    ok: true,
    value: {
      kind: 'provider',
      model: ref.fullId,
      identity: ref.fullId,
      url: `${ref.provider.baseUrl(env).replace(/\/+$/, '')}/embeddings`,
      apiModel: ref.apiModel,
      keyVar: ref.provider.keyVar,
      userSet: false,
      dimensions: ref.dimensions,
      extraBody: ref.provider.extraBody,
    },
    note: ref.provider.keyVar ? `${ref.fullId} with ${ref.provider.keyVar}` : `${ref.fullId} (no key needed)`,
  };
}

function staticCandidate(env: ResolveEnv): Candidate<{ model: string; identity: string }> {
  const loc = staticModelLocation(env);
  if (loc.kind === 'invalid') return { ok: false, why: loc.why, failure: 'model_load_failed' };
  const model = env.MEMORY_STATIC_MODEL;
  return {
    ok: true,
    value: { model, identity: loc.kind === 'local' ? loc.folder : loc.repo },
    note: loc.kind === 'local' ? `model2vec folder` : `model2vec hub repo ${loc.repo}`,
  };
}

function transformersCandidate(env: ResolveEnv): Candidate<{ model: string; identity: string }> {
  const loc = transformersModelLocation(env);
  if (loc.kind === 'local' && !fs.existsSync(loc.folder)) return { ok: false, why: 'MEMORY_TRANSFORMERS_MODEL folder not found', failure: 'model_load_failed' };
  return {
    ok: true,
    value: { model: env.MEMORY_TRANSFORMERS_MODEL, identity: loc.kind === 'local' ? loc.folder : loc.id },
    note: loc.kind === 'local' ? 'transformers.js folder' : `transformers.js hub model ${loc.id}`,
  };
}

function chosen(source: EmbeddingSource, model: string, identity: string, dimensions: number | null, reason: string, remote: RemoteTarget | null = null): ResolutionDetail {
  return {
    resolution: { source, model, dimensions, identity, signature: embeddingSignature(source, identity, dimensions), reason },
    failure: null,
    remote,
  };
}

function none(reason: string, failure: EmbeddingErrorReason): ResolutionDetail {
  return {
    resolution: { source: null, model: null, dimensions: null, identity: null, signature: embeddingSignature(null, null, null), reason },
    failure,
    remote: null,
  };
}

/** Resolves settings to a source with the target details the service needs (sync; no network). */
export function resolveEmbeddingDetail(settings: EmbeddingSettings, env: ResolveEnv): ResolutionDetail {
  const src = settings.embeddingSource;
  if (src === 'remote') {
    const r = remoteCandidate(settings, env);
    if (!r.ok) return none(`remote selected but unusable: ${r.why}`, r.failure);
    return chosen('remote', r.value.model, r.value.identity, r.value.dimensions, `remote selected: ${r.note}`, r.value);
  }
  if (src === 'static' || src === 'transformers') {
    const enabled = src === 'static' ? settings.staticEnabled : settings.transformersEnabled;
    if (!enabled) return none(`${src} selected but ${src}Enabled is false`, 'unknown');
    const c = src === 'static' ? staticCandidate(env) : transformersCandidate(env);
    if (!c.ok) return none(`${src} selected but unusable: ${c.why}`, c.failure);
    return chosen(src, c.value.model, c.value.identity, null, `${src} selected: ${c.note}`);
  }
  const skipped: string[] = [];
  const r = remoteCandidate(settings, env);
  if (r.ok) return chosen('remote', r.value.model, r.value.identity, r.value.dimensions, `auto: remote ${r.value.kind === 'custom' ? 'via ' : ''}${r.note}`, r.value);
  let failure = r.failure;
  skipped.push(`remote skipped (${r.why})`);
  for (const s of ['static', 'transformers'] as const) {
    if (!(s === 'static' ? settings.staticEnabled : settings.transformersEnabled)) {
      skipped.push(`${s} disabled`);
      continue;
    }
    const c = s === 'static' ? staticCandidate(env) : transformersCandidate(env);
    if (c.ok) return chosen(s, c.value.model, c.value.identity, null, `auto: ${s} ${c.note}; ${skipped.join('; ')}`);
    skipped.push(`${s} unusable (${c.why})`);
    // An enabled local source that cannot load says more than "no key".
    failure = c.failure;
  }
  return none(`auto: no embedding source available; ${skipped.join('; ')}`, failure);
}

/** Resolves which source, model and signature embeddings use under these settings (DESIGN §7). */
export function resolveEmbedding(settings: EmbeddingSettings, env: ResolveEnv): EmbeddingResolution {
  return resolveEmbeddingDetail(settings, env).resolution;
}

/** A copy with the measured width when it differs from the known one (signature rebuilt); otherwise the input. */
export function withMeasuredDimensions(res: EmbeddingResolution, width: number): EmbeddingResolution {
  if (!res.source || !Number.isInteger(width) || width <= 0 || res.dimensions === width) return res;
  return {
    ...res,
    dimensions: width,
    signature: embeddingSignature(res.source, res.identity ?? res.model, width),
    reason: `${res.reason}; dim=${width} measured`,
  };
}
