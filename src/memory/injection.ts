/**
 * Memory injection into chat requests (DESIGN §5, the original's format and placement) and the
 * per-request header switches. Pure: requests are copied, never mutated.
 */

import { duplicateKey } from './row-memo';

/** One chat message; other fields (name, tool_calls, cache_control…) pass through untouched. */
export interface ChatMessage {
  role: string;
  content?: unknown;
  [field: string]: unknown;
}

/** A chat request body; only `messages` is read or replaced. */
export interface ChatRequest {
  messages?: ChatMessage[];
  [field: string]: unknown;
}

/** Anything with a content string can be injected (a Memory, a preview item's memory…). */
export interface InjectableMemory {
  content: unknown;
}

/** Where the request is going and how to place memory. */
export interface InjectOptions {
  /** Provider id (e.g. `openai`, `glm`, `xiaomi-mimo`). */
  provider?: string | null;
  /** Model id; defaults to the request's own `model`. */
  model?: string | null;
  /** Place memory just before the last user turn; defaults to `detectCacheControl(request)`. */
  cacheSafe?: boolean;
  /** Force (or disable) the system-must-be-first merge; defaults to detection from provider/model. */
  systemMessageMustBeFirst?: boolean;
  /** The memories' contents are already distinct (retrieval's `distinctContent`): the duplicate check is skipped. */
  distinctContent?: boolean;
}

/** The compatible injection format: "Memory context: " + trimmed contents joined by "\n", blanks and repeats (case and whitespace aside) skipped; "" when nothing is left. */
export function formatMemoryContext(memories: readonly InjectableMemory[] | null | undefined, opts: { distinctContent?: boolean } = {}): string {
  if (!Array.isArray(memories)) return '';
  const lines: string[] = [];
  const seen = new Set<string>();
  for (const m of memories) {
    const c = m && typeof m.content === 'string' ? m.content.trim() : '';
    if (!c) continue;
    if (opts.distinctContent) {
      lines.push(c);
      continue;
    }
    // A repeated text adds tokens, not information (114 memories once injected 58 distinct texts); the first, best-ranked, stays.
    const norm = duplicateKey(m.content as string);
    if (seen.has(norm)) continue;
    seen.add(norm);
    lines.push(c);
  }
  return lines.length ? `Memory context: ${lines.join('\n')}` : '';
}

// The original's provider ids that reject the system role (#1701, o1 family).
const NO_SYSTEM_IDS: ReadonlySet<string> = new Set(['o1', 'o1-mini', 'o1-preview', 'glm', 'glmt', 'glm-cn', 'zai', 'qianfan']);
// Model families matched by prefix, so `o1-mini-2024-09-12`, `openai/o1-preview`, `glm-4.5`, `z-ai/GLM-4.6` count too.
const NO_SYSTEM_FAMILY = /^(?:o1|glmt?)(?:$|[-_.:@])|^glm\d/;
const SYSTEM_FIRST_IDS: ReadonlySet<string> = new Set(['xiaomi-mimo', 'mimo']);
const SYSTEM_FIRST_FAMILY = /^mimo(?:$|[-_.:@])/;

/** Lower-cased id and its last path segment (`openai/o1-mini` → `o1-mini`). */
function idForms(value: string | null | undefined): [string, string] | null {
  if (typeof value !== 'string') return null;
  const id = value.trim().toLowerCase();
  if (!id) return null;
  return [id, id.slice(id.lastIndexOf('/') + 1)];
}

/**
 * Whether a provider id or model id accepts a `system` message: false for the original's list
 * (o1, o1-mini, o1-preview, glm, glmt, glm-cn, zai, qianfan; case-insensitive, trimmed) and — an
 * Engram extension — for any o1-family or glm-family model name, also behind a `vendor/` prefix.
 */
export function providerSupportsSystemMessage(providerOrModel: string | null | undefined): boolean {
  const forms = idForms(providerOrModel);
  if (!forms) return true;
  const [id, last] = forms;
  // A false "no" only costs the role (user works everywhere); a false "yes" costs a provider 400.
  return !(NO_SYSTEM_IDS.has(id) || NO_SYSTEM_IDS.has(last) || NO_SYSTEM_FAMILY.test(last));
}

/** Whether a provider id or model id requires the system message to be the first message (`xiaomi-mimo`, `mimo`, and mimo* model names; #6135). */
export function requiresSystemFirst(providerOrModel: string | null | undefined): boolean {
  const forms = idForms(providerOrModel);
  if (!forms) return false;
  const [id, last] = forms;
  return SYSTEM_FIRST_IDS.has(id) || SYSTEM_FIRST_IDS.has(last) || id.startsWith('xiaomi-mimo/') || SYSTEM_FIRST_FAMILY.test(last);
}

const MAX_SCAN_DEPTH = 8;
const MAX_SCAN_NODES = 20_000;

/** Whether the request carries prompt-cache markers (`cache_control` on a message, a content part or the top-level `system`). */
export function detectCacheControl(body: unknown): boolean {
  if (typeof body !== 'object' || body === null) return false;
  const b = body as Record<string, unknown>;
  let budget = MAX_SCAN_NODES;
  // Bounded walk: a hostile body cannot make the request path spin.
  const scan = (v: unknown, depth: number): boolean => {
    if (typeof v !== 'object' || v === null || depth > MAX_SCAN_DEPTH || --budget < 0) return false;
    if (Array.isArray(v)) return v.some((x) => scan(x, depth + 1));
    const o = v as Record<string, unknown>;
    if (Object.prototype.hasOwnProperty.call(o, 'cache_control') && o.cache_control != null) return true;
    return Object.values(o).some((x) => scan(x, depth + 1));
  };
  return scan(b.messages, 0) || scan(b.system, 0);
}

function prependToSystem(message: ChatMessage, text: string): ChatMessage {
  const c = message.content;
  if (typeof c === 'string') return { ...message, content: c ? `${text}\n\n${c}` : text };
  if (Array.isArray(c)) return { ...message, content: [{ type: 'text', text }, ...c] };
  return { ...message, content: text };
}

/**
 * Returns a new request with the memories injected (the input is never mutated; it is returned
 * as is when there is nothing to inject or no `messages` array): merged into a leading system
 * message for system-must-be-first providers, else a `system` (or `user`, for providers/models
 * that reject system) message at index 0 — or just before the last user message when the
 * request carries prompt-cache markers.
 */
export function injectMemory<T extends ChatRequest>(
  request: T,
  memories: readonly InjectableMemory[] | null | undefined,
  opts: InjectOptions = {},
): T {
  if (!request || typeof request !== 'object' || !Array.isArray(request.messages)) return request;
  const text = formatMemoryContext(memories, { distinctContent: opts.distinctContent });
  if (!text) return request;

  const messages = request.messages;
  const model = opts.model !== undefined ? opts.model : typeof request.model === 'string' ? request.model : null;
  const supportsSystem = providerSupportsSystemMessage(opts.provider) && providerSupportsSystemMessage(model);
  const systemFirst = opts.systemMessageMustBeFirst ?? (requiresSystemFirst(opts.provider) || requiresSystemFirst(model));

  if (systemFirst && supportsSystem) {
    // Strict providers reject a system message anywhere but first, so cache-safe placement cannot apply.
    const first = messages[0];
    const next =
      first && first.role === 'system'
        ? [prependToSystem(first, text), ...messages.slice(1)]
        : [{ role: 'system', content: text }, ...messages];
    return { ...request, messages: next };
  }

  const injected: ChatMessage = { role: supportsSystem ? 'system' : 'user', content: text };
  const cacheSafe = opts.cacheSafe ?? detectCacheControl(request);
  let at = 0;
  if (cacheSafe) {
    // Before the last user turn, so the cached prefix (system prompt, history) stays byte-identical.
    for (let i = messages.length - 1; i >= 0; i--) {
      if (messages[i] && messages[i].role === 'user') {
        at = i;
        break;
      }
    }
  }
  return { ...request, messages: [...messages.slice(0, at), injected, ...messages.slice(at)] };
}

/** Whether memory should be injected into this request: not when disabled, and only for a non-empty `messages` array. */
export function shouldInjectMemory(request: unknown, config: { enabled?: boolean } = {}): boolean {
  if (config?.enabled === false) return false;
  if (!request || typeof request !== 'object') return false;
  const messages = (request as { messages?: unknown }).messages;
  return Array.isArray(messages) && messages.length > 0;
}

/** Request headers as Node (`IncomingHttpHeaders`, array values allowed), a plain object or a fetch `Headers`. */
export type HeaderSource =
  | { get(name: string): string | null }
  | Record<string, string | string[] | number | undefined | null>
  | null
  | undefined;

/** Every value of a header, name matched case-insensitively. */
function headerValues(headers: HeaderSource, name: string): string[] {
  if (!headers || typeof headers !== 'object') return [];
  const lower = name.toLowerCase();
  const getter = (headers as { get?: unknown }).get;
  if (typeof getter === 'function') {
    try {
      const v: unknown = getter.call(headers, name);
      return typeof v === 'string' ? [v] : [];
    } catch {
      return [];
    }
  }
  const out: string[] = [];
  for (const [k, v] of Object.entries(headers as Record<string, unknown>)) {
    if (k.trim().toLowerCase() !== lower) continue;
    if (typeof v === 'string' || typeof v === 'number') out.push(String(v));
    else if (Array.isArray(v)) for (const x of v) if (typeof x === 'string' || typeof x === 'number') out.push(String(x));
  }
  return out;
}

const NO_MEMORY_HEADERS = ['x-omniroute-no-memory', 'x-no-memory'];
const TRUTHY: ReadonlySet<string> = new Set(['true', '1', 'yes']);

/** Whether the request opts out of memory: `x-omniroute-no-memory` or `x-no-memory` ∈ {true, 1, yes} (trimmed, case-insensitive; any of repeated or comma-joined values). */
export function isNoMemoryRequested(headers: HeaderSource): boolean {
  // Opting out is the privacy-safe direction, so any truthy value among duplicates wins.
  return NO_MEMORY_HEADERS.some((name) =>
    headerValues(headers, name).some((v) => v.split(',').some((part) => TRUTHY.has(part.trim().toLowerCase()))),
  );
}

/** Longest session id accepted from a header. */
export const MAX_SESSION_ID_LENGTH = 256;
const SESSION_HEADERS = ['x-omniroute-session-id', 'x-session-id'];

/** The session id from `x-omniroute-session-id` (preferred) or `x-session-id`: trimmed, non-empty, at most 256 characters, else null. */
export function sessionIdFromHeaders(headers: HeaderSource): string | null {
  for (const name of SESSION_HEADERS) {
    for (const raw of headerValues(headers, name)) {
      const v = raw.trim();
      // Too long is rejected, not cut: a cut id could merge two clients' sessions.
      if (v && v.length <= MAX_SESSION_ID_LENGTH) return v;
    }
  }
  return null;
}
