import { Router } from 'express';
import type { ApiContext } from '../api-context';
import { AppError } from '../../errors';
import { memorySettingsUpdateSchema, type MemorySettings } from '../../memory/settings';
import { OutboundUrlError, customEmbeddingsUrl } from '../../net/url-policy';
import { handle } from '../validate';
import { maskBackendConfigs, restoreMaskedSecrets } from '../../backends/factory';

/** Fields that decide which vectors are built: changing one starts a reindex job (a no-op when the signature stays). */
const EMBEDDING_FIELDS: (keyof MemorySettings)[] = ['embeddingSource', 'embeddingProviderModel', 'staticEnabled', 'transformersEnabled', 'customBaseUrl', 'customModelId'];

/** Settings as responses show them: backend secrets masked. */
const masked = (s: MemorySettings): MemorySettings => ({ ...s, backendConfigs: maskBackendConfigs(s.backendConfigs) });

/** /api/settings/memory: the original's fields, defaults and clamps, stored under its keys. */
export function settingsRoutes(ctx: ApiContext): Router {
  const r = Router();
  r.get('/memory', handle({}, () => masked(ctx.settings.memory())));
  r.put(
    '/memory',
    handle({ body: memorySettingsUpdateSchema }, async ({ body }) => {
      if (body.customBaseUrl) {
        try {
          // The same outbound policy the embedder applies at connect time; the message never echoes the URL.
          customEmbeddingsUrl(body.customBaseUrl, { allowPrivate: ctx.env.OMNIROUTE_ALLOW_PRIVATE_PROVIDER_URLS });
        } catch (err) {
          if (!(err instanceof OutboundUrlError)) throw err;
          throw new AppError(400, 'validation_failed', `Invalid body: body.customBaseUrl: ${err.message}`, [
            { path: 'body.customBaseUrl', message: err.message, code: err.code },
          ]);
        }
      }
      const before = ctx.settings.memory();
      // The schema refuses two zero fusion weights in one body; a zero already stored plus a new one is the same state.
      const ftsWeight = body.hybridFtsWeight !== undefined ? body.hybridFtsWeight : before.hybridFtsWeight;
      const vectorWeight = body.hybridVectorWeight !== undefined ? body.hybridVectorWeight : before.hybridVectorWeight;
      if (ftsWeight === 0 && vectorWeight === 0) {
        const field = body.hybridVectorWeight !== undefined ? 'hybridVectorWeight' : 'hybridFtsWeight';
        const message = 'hybridFtsWeight and hybridVectorWeight cannot both be 0 (nothing would be ranked)';
        throw new AppError(400, 'validation_failed', `Invalid body: body.${field}: ${message}`, [{ path: `body.${field}`, message, code: 'custom' }]);
      }
      if (body.backendConfigs) body.backendConfigs = restoreMaskedSecrets(body.backendConfigs, before.backendConfigs);
      if (body.primaryBackend !== undefined || body.fallbackBackends !== undefined || body.backendConfigs !== undefined) {
        // A backend the settings name must be buildable (config, URL policy) before anything is stored.
        const problems = ctx.backends.check({
          primaryBackend: body.primaryBackend ?? before.primaryBackend,
          fallbackBackends: body.fallbackBackends ?? before.fallbackBackends,
          backendConfigs: body.backendConfigs ?? before.backendConfigs,
        });
        if (problems.length) {
          throw new AppError(400, 'validation_failed', `Invalid body: ${problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`, problems.map((p) => ({ ...p, code: 'invalid_backend' })));
        }
      }
      const after = ctx.settings.updateMemory(body);
      if (EMBEDDING_FIELDS.some((f) => JSON.stringify(before[f]) !== JSON.stringify(after[f]))) {
        await ctx.reindex.request('auto');
      }
      return masked(after);
    }),
  );
  return r;
}
