import crypto from 'node:crypto';

const WINDOWS_RESERVED = /^(con|prn|aux|nul|com[0-9]|lpt[0-9])$/i;
const MAX_NAME = 96;

/**
 * A memory key (or tenant id) as one safe path segment for a vault file name: letters, digits,
 * space, `.`, `_` and `-` only (no separators, no `..`, nothing Windows refuses such as `:`), no
 * leading dot, not a reserved device name, bounded length. When anything had to change, a short
 * hash of the original is appended so two different keys never share a file.
 */
export function safeFileSegment(raw: string, fallback = 'memory'): string {
  let s = raw.normalize('NFKC').replace(/[^\p{L}\p{N} ._-]/gu, '_');
  s = s.replace(/\.{2,}/g, '.').replace(/_{2,}/g, '_');
  s = s.replace(/^[\s._-]+|[\s._-]+$/g, '');
  if (WINDOWS_RESERVED.test(s.split('.')[0] ?? '')) s = `_${s}`;
  if (s.length > MAX_NAME) s = s.slice(0, MAX_NAME).replace(/[\s._-]+$/g, '');
  if (s === '') s = fallback;
  if (s !== raw) s = `${s}-${crypto.createHash('sha256').update(raw).digest('hex').slice(0, 8)}`;
  return s;
}
