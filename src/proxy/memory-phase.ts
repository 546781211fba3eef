import type { Logger } from '../logger';
import { lastUserText, tailChars } from '../memory/chat-text';
import { injectMemory, isNoMemoryRequested, sessionIdFromHeaders, shouldInjectMemory, type ChatRequest, type HeaderSource } from '../memory/injection';
import type { RetrievalStrategy, RetrievedItem, Retriever } from '../memory/retrieval.types';
import type { MemorySettings } from '../memory/settings';
import type { QueueLayer } from '../queue/queues';
import { TimeoutError } from '../timeout';

/** What the memory phase did for a request (the `x-memory-status` header). */
export type MemoryStatus = 'injected' | 'empty' | 'disabled' | 'opted-out' | 'degraded';

/** The memory outcome reported in the `x-memory-*` headers and the /v1/memory/inject answer. */
export interface MemoryOutcome {
  injected: number;
  tokens: number;
  strategy: RetrievalStrategy | 'none';
  status: MemoryStatus;
}

/** Whether memory runs for a request, decided once from fresh settings and the request's headers. */
export interface MemoryPlan {
  settings: MemorySettings;
  /** Retrieval and extraction both run (enabled, a budget, not opted out). */
  on: boolean;
  /** The status to report when memory is off. */
  offStatus: 'disabled' | 'opted-out' | null;
  /** The session header's id when memory is on; null when off (nothing is retrieved or extracted, so it is not read). */
  sessionId: string | null;
}

/** The longest the request path waits for retrieval before it forwards the request unmodified. */
export const MEMORY_PHASE_TIMEOUT_MS = 1500;

/** The caller (the client's connection) went away while retrieval ran. */
class CallerGoneError extends Error {
  override readonly name = 'CallerGoneError';
}

/**
 * Who may stop the work early: an AbortSignal, or an emitter with `aborted` and an `abort` event (ClientGone: the chat
 * proxy's own, so no AbortController is made for the client's side of a chat).
 */
export type CallerSignal = AbortSignal | { readonly aborted: boolean; once(event: 'abort', fn: () => void): unknown; off(event: 'abort', fn: () => void): unknown };

/** Calls `fn` once when `caller` fires; returns the undo. */
function onAbort(caller: CallerSignal, fn: () => void): () => void {
  if ('addEventListener' in caller) {
    caller.addEventListener('abort', fn, { once: true });
    return () => caller.removeEventListener('abort', fn);
  }
  caller.once('abort', fn);
  return () => void caller.off('abort', fn);
}

/**
 * Runs `work` with a signal that fires after `ms` or when `caller` fires, and settles as soon as it
 * fires: the work's outbound calls are cancelled, not left running after nobody waits for them.
 * One AbortController per call (the work's signal) and no listener on it: the race is lost by rejecting directly.
 */
async function cancellable<T>(work: (signal: AbortSignal) => Promise<T>, ms: number, caller?: CallerSignal): Promise<T> {
  const ac = new AbortController();
  let rejectStopped!: (reason: Error) => void;
  const stopped = new Promise<never>((_, reject) => (rejectStopped = reject));
  const stop = (reason: Error) => {
    if (ac.signal.aborted) return;
    ac.abort(reason);
    rejectStopped(reason);
  };
  const onCallerAbort = () => stop(new CallerGoneError('the caller went away'));
  const undo = caller ? onAbort(caller, onCallerAbort) : null;
  if (caller?.aborted) onCallerAbort();
  const timer = setTimeout(() => stop(new TimeoutError('retrieval took too long')), ms);
  timer.unref();
  const running = Promise.resolve().then(() => work(ac.signal));
  // Whichever loses the race may reject later: not an unhandled rejection.
  stopped.catch(() => undefined);
  running.catch(() => undefined);
  try {
    return await Promise.race([running, stopped]);
  } finally {
    clearTimeout(timer);
    undo?.();
  }
}

/** Decides whether memory is on for a request: settings enabled with a token budget, and no `x-omniroute-no-memory`/`x-no-memory` opt-out. */
export function memoryPlan(settings: MemorySettings, headers: HeaderSource): MemoryPlan {
  // Off: the headers are not scanned for a session id nobody reads (two walks over every header, per memory-off chat).
  if (!settings.enabled || settings.maxTokens <= 0) return { settings, on: false, offStatus: 'disabled', sessionId: null };
  if (isNoMemoryRequested(headers)) return { settings, on: false, offStatus: 'opted-out', sessionId: null };
  return { settings, on: true, offStatus: null, sessionId: sessionIdFromHeaders(headers) };
}

/**
 * Retrieves the key's memories for the last user message and returns a copy of the body with them
 * injected plus the outcome, failing open (`degraded`, body unmodified) on an error, a retrieval
 * slower than the bound, or `signal` firing (the client went away); the last two cancel the
 * retrieval's outbound calls.
 */
export async function applyMemory(
  deps: { retrieval: Retriever; log: Logger },
  args: { apiKeyId: string; body: ChatRequest; plan: MemoryPlan; requestId: string; logRequestId?: string; timeoutMs?: number; signal?: CallerSignal },
): Promise<{ body: ChatRequest; outcome: MemoryOutcome }> {
  const { plan, body } = args;
  if (!plan.on) return { body, outcome: { injected: 0, tokens: 0, strategy: 'none', status: plan.offStatus ?? 'disabled' } };
  const s = plan.settings;
  const strategy: RetrievalStrategy = s.strategy === 'recent' ? 'exact' : s.strategy;
  if (!shouldInjectMemory(body)) return { body, outcome: { injected: 0, tokens: 0, strategy, status: 'empty' } };
  // Recency must not be relevance-filtered (the original's toMemoryRetrievalConfig passes no query for `recent`).
  const query = s.strategy === 'recent' ? null : lastUserText(body.messages) || null;
  try {
    const result = await cancellable(
      (signal) =>
        deps.retrieval.retrieve(
          args.apiKeyId,
          { query, strategy, maxTokens: s.maxTokens, retentionDays: s.retentionDays, sessionId: plan.sessionId, scope: 'apiKey' },
          // Injection reads only the content: no re-read of the items' access counts.
          { requestId: args.requestId, signal, contentOnly: true },
        ),
      args.timeoutMs ?? MEMORY_PHASE_TIMEOUT_MS,
      args.signal,
    );
    const used: RetrievedItem[] = result.items.filter((i) => typeof i.memory?.content === 'string' && i.memory.content.trim() !== '');
    const strategyUsed = result.resolution?.strategyUsed ?? strategy;
    if (used.length === 0) return { body, outcome: { injected: 0, tokens: 0, strategy: strategyUsed, status: 'empty' } };
    const injected = injectMemory(
      body,
      used.map((i) => i.memory),
      { model: typeof body.model === 'string' ? body.model : null, distinctContent: result.distinctContent === true },
    );
    const tokens = used.reduce((sum, i) => sum + (Number.isFinite(i.tokens) ? i.tokens : 0), 0);
    return { body: injected, outcome: { injected: used.length, tokens, strategy: strategyUsed, status: 'injected' } };
  } catch (err) {
    // Name and code only: a storage error message can quote the query, which is the user's text.
    const e = err as { name?: unknown; code?: unknown } | null;
    deps.log.warn(
      {
        requestId: args.logRequestId ?? args.requestId,
        reason: err instanceof TimeoutError ? 'timeout' : err instanceof CallerGoneError ? 'caller_gone' : 'error',
        errName: typeof e?.name === 'string' ? e.name : typeof err,
        errCode: typeof e?.code === 'string' ? e.code : undefined,
      },
      'memory retrieval failed; request forwarded without memory',
    );
    return { body, outcome: { injected: 0, tokens: 0, strategy: 'none', status: 'degraded' } };
  }
}

/** Sets the `x-memory-injected`, `x-memory-tokens`, `x-memory-strategy` and `x-memory-status` response headers. */
export function setMemoryHeaders(res: { setHeader(name: string, value: string): unknown }, o: MemoryOutcome): void {
  res.setHeader('x-memory-injected', String(o.injected));
  res.setHeader('x-memory-tokens', String(o.tokens));
  res.setHeader('x-memory-strategy', o.strategy);
  res.setHeader('x-memory-status', o.status);
}

/** The extract-facts payload for a finished exchange, or null when there is no user text to mine. */
export function extractionPayload(args: {
  apiKeyId: string;
  sessionId: string | null;
  messages: unknown;
  assistantText: string | null;
  settings: MemorySettings;
  requestId: string;
}): { apiKeyId: string; sessionId: string | null; userText: string; assistantText?: string; requestId: string } | null {
  const userText = tailChars(lastUserText(args.messages));
  if (!userText) return null;
  const assistant = args.settings.extractFromAssistant && args.assistantText ? tailChars(args.assistantText) : '';
  return {
    apiKeyId: args.apiKeyId,
    sessionId: args.sessionId,
    userText,
    ...(assistant ? { assistantText: assistant } : {}),
    requestId: args.requestId,
  };
}

/** Enqueues extract-facts without holding the response (Redis down: the outbox takes it); a failure is logged, never thrown. */
export function enqueueExtraction(deps: { queues: QueueLayer; log: Logger }, payload: NonNullable<ReturnType<typeof extractionPayload>>, logRequestId: string): void {
  deps.queues.enqueue('extract-facts', payload).catch((err: unknown) => {
    deps.log.warn({ requestId: logRequestId, errName: err instanceof Error ? err.name : typeof err }, 'could not enqueue extract-facts');
  });
}
