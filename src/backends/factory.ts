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
