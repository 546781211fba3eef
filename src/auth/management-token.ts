import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Env } from '../config/env';
import type { Logger } from '../logger';

/** Constant-time string equality (hashes first so lengths never leak). */
export function safeEqual(a: string, b: string): boolean {
  const ha = crypto.createHash('sha256').update(a).digest();
  const hb = crypto.createHash('sha256').update(b).digest();
  return crypto.timingSafeEqual(ha, hb);
}

/**
 * The management token: MANAGEMENT_TOKEN, else (outside production) one generated once into
 * DATA_DIR/management-token (mode 0600). Production without it is refused.
 */
export function resolveManagementToken(env: Env, log: Logger): string {
  if (env.MANAGEMENT_TOKEN) return env.MANAGEMENT_TOKEN;
  if (env.NODE_ENV === 'production') {
    throw new Error('MANAGEMENT_TOKEN must be set when NODE_ENV=production (at least 16 characters)');
  }
  const file = path.join(env.DATA_DIR, 'management-token');
  fs.mkdirSync(env.DATA_DIR, { recursive: true });
  try {
    const existing = fs.readFileSync(file, 'utf8').trim();
    if (existing.length >= 16) {
      log.info({ file }, 'using the management token stored in this file');
      return existing;
    }
  } catch {
    // not there yet
  }
  const token = crypto.randomBytes(32).toString('base64url');
  try {
    fs.writeFileSync(file, token + '\n', { mode: 0o600, flag: 'wx' });
    log.info({ file }, 'MANAGEMENT_TOKEN was not set: generated one into this file (mode 0600)');
    return token;
  } catch (err) {
    // Another process (api and worker starting together) wrote it first.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return fs.readFileSync(file, 'utf8').trim();
    throw err;
  }
}
