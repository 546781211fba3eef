import { z } from 'zod';
import type { OutboundPolicy } from '../net/url-policy';
import { HttpBackend } from './http.backend';
import { NotionBackend } from './notion.backend';
import { ObsidianBackend } from './obsidian.backend';
import type { MemoryBackend } from './types';

/** Backend ids usable in settings (and in job ids): short, no separators. */
export const backendIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'backend ids are 1–64 letters, digits, "_" or "-"');

/** Presets: an id with no `type` in its config means this kind (digest §8.2 KNOWN_BACKENDS). */
const PRESETS: Record<string, 'obsidian' | 'notion'> = { obsidian: 'obsidian', notion: 'notion' };

function describe(err: unknown): string {
  if (err instanceof z.ZodError) return err.issues.map((i) => `${i.path.join('.') || '(config)'}: ${i.message}`).join('; ');
  return (err as Error).message;
}

/**
 * A remote backend from its `memoryBackendConfigs` entry: `type` "http" (generic), "obsidian" or
 * "notion" (the ids `obsidian` and `notion` default to their preset). Throws with the config path on a bad config.
 */
export function buildBackend(id: string, config: Record<string, unknown> | undefined, policy: OutboundPolicy): MemoryBackend {
  const okId = backendIdSchema.safeParse(id);
  if (!okId.success) throw new Error(okId.error.issues[0].message);
  if (!config) throw new Error(`no entry for "${id}" in backendConfigs`);
  const type = typeof config.type === 'string' ? config.type : (PRESETS[id] ?? 'http');
  try {
    if (type === 'http') return new HttpBackend(id, config as never, policy);
    if (type === 'obsidian') return new ObsidianBackend(id, config, policy);
    if (type === 'notion') return new NotionBackend(id, config, policy);
  } catch (err) {
    throw new Error(`backendConfigs.${id}: ${describe(err)}`);
  }
  throw new Error(`backendConfigs.${id}.type: unknown backend type (expected http, obsidian or notion)`);
}

const MASK = '***';

function maskValue(v: string): string {
  return v.length >= 12 ? `${MASK}${v.slice(-4)}` : MASK;
}

function isMasked(v: unknown, stored: unknown): boolean {
  return typeof v === 'string' && typeof stored === 'string' && v === maskValue(stored);
}

/**
 * backendConfigs as settings responses show them: `apiKey` as "***" + its last 4 characters (the
 * Qdrant settings' rule) and every custom header value as "***", so no secret is echoed.
 */
export function maskBackendConfigs(configs: Record<string, Record<string, unknown>>): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  for (const [id, c] of Object.entries(configs)) {
    const copy: Record<string, unknown> = { ...c };
    if (typeof copy.apiKey === 'string') copy.apiKey = maskValue(copy.apiKey);
    if (copy.headers && typeof copy.headers === 'object' && !Array.isArray(copy.headers)) {
      copy.headers = Object.fromEntries(Object.keys(copy.headers as object).map((h) => [h, MASK]));
    }
    out[id] = copy;
  }
  return out;
}

/** A PUT that sends back a masked secret keeps the stored one (a settings round trip never overwrites a key with its mask). */
export function restoreMaskedSecrets(incoming: Record<string, Record<string, unknown>>, stored: Record<string, Record<string, unknown>>): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  for (const [id, c] of Object.entries(incoming)) {
    const prev = stored[id] ?? {};
    const copy: Record<string, unknown> = { ...c };
    if (isMasked(copy.apiKey, prev.apiKey) || (copy.apiKey === MASK && typeof prev.apiKey === 'string')) copy.apiKey = prev.apiKey;
    if (copy.headers && typeof copy.headers === 'object' && prev.headers && typeof prev.headers === 'object') {
      const ph = prev.headers as Record<string, unknown>;
      copy.headers = Object.fromEntries(Object.entries(copy.headers as Record<string, unknown>).map(([h, v]) => [h, v === MASK && typeof ph[h] === 'string' ? ph[h] : v]));
    }
    out[id] = copy;
  }
  return out;
}

/** Why the backend settings cannot be used, as `{path, message}` (empty when they can): every backend they name is built once. */
export function checkBackendSettings(
  s: { primaryBackend: string; fallbackBackends: string[]; backendConfigs: Record<string, Record<string, unknown>> },
  policy: OutboundPolicy,
): { path: string; message: string }[] {
  const problems: { path: string; message: string }[] = [];
  const check = (id: string, path: string) => {
    if (id === 'sqlite') return;
    try {
      buildBackend(id, s.backendConfigs[id], policy);
    } catch (err) {
      const message = (err as Error).message;
      const m = /^backendConfigs\.([^:]+): (.*)$/.exec(message);
      problems.push(m ? { path: `body.backendConfigs.${m[1]}`, message: m[2] } : { path, message });
    }
  };
  check(s.primaryBackend, 'body.primaryBackend');
  s.fallbackBackends.forEach((id, i) => check(id, `body.fallbackBackends.${i}`));
  return problems;
}
