import type { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import { type Dispatcher, errors, Pool, util } from 'undici';
import type { Env } from '../config/env';
import { AppError } from '../errors';

/** An upstream answer whose body has not been read yet (the caller relays it). */
export interface UpstreamResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: AsyncIterable<Buffer> & { destroy(err?: Error): unknown };
}

/**
 * What cuts an upstream call: an AbortSignal, or an EventEmitter with `aborted` that emits `abort` (undici takes
 * both; the proxy passes its ClientGone, so a chat without memory makes no AbortController).
 */
export type UpstreamSignal = AbortSignal | (EventEmitter & { readonly aborted: boolean });

type UpstreamEnv = Pick<Env, 'UPSTREAM_BASE_URL' | 'UPSTREAM_API_KEY' | 'UPSTREAM_TIMEOUT_MS'>;

const TIMEOUT_CODES: ReadonlySet<string> = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT']);

/** Response headers of the upstream that reach the client: framing and hop-by-hop headers are ours, these are the provider's word. */
const PASS_THROUGH = new Set(['content-type', 'content-encoding', 'retry-after', 'retry-after-ms']);

/** The client-facing subset of an upstream's response headers: content-type, rate limits (`x-ratelimit-*`, `retry-after`) and the provider's request id as `x-upstream-request-id`. */
export function passThroughHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const n = name.toLowerCase();
    if (PASS_THROUGH.has(n) || n.startsWith('x-ratelimit-')) out[n] = value;
    // Our own x-request-id names the Engram request; the provider's is still worth keeping for support tickets.
    else if (n === 'x-request-id') out['x-upstream-request-id'] = value;
  }
  return out;
}

/** Whether an upstream content-type is a server-sent event stream. */
export function isEventStream(headers: IncomingHttpHeaders): boolean {
  const ct = headers['content-type'];
  return typeof ct === 'string' && ct.toLowerCase().startsWith('text/event-stream');
}

/** Maps a failed upstream call to the one error shape: 504 when it timed out, 502 when it could not be reached or broke. */
export function upstreamFailure(err: unknown): AppError {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && TIMEOUT_CODES.has(code)) return new AppError(504, 'upstream_timeout', 'The upstream LLM did not answer in time');
  return new AppError(502, 'upstream_unreachable', 'The upstream LLM could not be reached');
}

/** The error code of an upstream failure, safe to log (never a URL, header or body). */
export function upstreamErrorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : err instanceof Error ? err.name : 'unknown';
}

/** The OpenAI-compatible upstream: `POST /chat/completions`, `GET /models` and `GET /models/:id` under UPSTREAM_BASE_URL, with the upstream key (never the client's). */
export class UpstreamClient {
  /** Path of UPSTREAM_BASE_URL (`/v1`), without a trailing slash; requests go to `${basePath}/chat/completions`. */
  private readonly basePath: string;
  /**
   * Keep-alive connections to the upstream's origin, owned here: a request goes straight to the pool, without the
   * global dispatcher's URL parse, origin lookup and redirect interceptor on every chat. Idle sockets are unref'd.
   */
  private readonly pool: Pool;
  private readonly headers: { json: Record<string, string>; sse: Record<string, string>; get: Record<string, string> };

  constructor(private readonly env: UpstreamEnv) {
    const url = new URL(env.UPSTREAM_BASE_URL);
    this.basePath = url.pathname.replace(/\/+$/, '');
    this.pool = new Pool(url.origin);
    const base: Record<string, string> = {
      // Bodies are relayed byte for byte and parsed for extraction, so they must not arrive compressed.
      'accept-encoding': 'identity',
      'user-agent': 'engram-proxy',
    };
    // A local upstream (Ollama, vLLM) may need no key; the client's Engram key is never forwarded.
    if (env.UPSTREAM_API_KEY) base.authorization = `Bearer ${env.UPSTREAM_API_KEY}`;
    this.headers = {
      json: { accept: 'application/json', ...base, 'content-type': 'application/json' },
      sse: { accept: 'text/event-stream', ...base, 'content-type': 'application/json' },
      get: { accept: 'application/json', ...base },
    };
  }

  /** Sends a chat request (a JSON value, or JSON text already encoded as UTF-8 bytes, sent as is); resolves when the upstream's status and headers arrive. */
  chatCompletions(body: unknown, opts: { signal: UpstreamSignal; stream: boolean }): Promise<UpstreamResponse> {
    return this.call('POST', '/chat/completions', opts.signal, Buffer.isBuffer(body) ? body : JSON.stringify(body), opts.stream ? this.headers.sse : this.headers.json);
  }

  /** Lists the upstream's models; resolves when the status and headers arrive. */
  models(opts: { signal: UpstreamSignal }): Promise<UpstreamResponse> {
    return this.call('GET', '/models', opts.signal, undefined, this.headers.get);
  }

  /** One model of the upstream (`GET /models/:id`); resolves when the status and headers arrive. */
  model(id: string, opts: { signal: UpstreamSignal }): Promise<UpstreamResponse> {
    return this.call('GET', `/models/${encodeURIComponent(id)}`, opts.signal, undefined, this.headers.get);
  }

  private call(method: 'GET' | 'POST', path: string, signal: UpstreamSignal, body: string | Buffer | undefined, headers: Record<string, string>): Promise<UpstreamResponse> {
    return new Promise((resolve, reject) => {
      const call = new UpstreamCall(signal, resolve, reject);
      this.pool.dispatch(
        {
          path: `${this.basePath}${path}`,
          method,
          headers,
          body,
          // Time to the status line, and the longest silence between body chunks (a stream may run for minutes).
          headersTimeout: this.env.UPSTREAM_TIMEOUT_MS,
          bodyTimeout: this.env.UPSTREAM_TIMEOUT_MS,
        },
        call,
      );
    });
  }
}

/** Bytes of an upstream body held unread before the upstream socket is paused (what request()'s body stream held on Node 20: its default high-water mark). */
const BODY_HIGH_WATER_BYTES = 16 * 1024;

type Settle = { resolve: (r: IteratorResult<Buffer>) => void; reject: (e: unknown) => void };

/**
 * One upstream call as undici's dispatcher reports it, and the body it reads: what `request()` does, without its
 * body stream. request() wraps every answer in a Readable (BodyReadable), iterated through Node's stream async
 * iterator, plus an AsyncResource and an abort listener per call: a measurable part of a memory-off chat's CPU
 * (bench/README.md, "Seventh pass"). The proxy only ever reads the body once, chunk by chunk, so a queue does.
 * Same errors as request(): undici's own (timeouts, socket), the signal's reason or a RequestAbortedError when cut.
 */
class UpstreamCall implements Dispatcher.DispatchHandlers, AsyncIterableIterator<Buffer> {
  private abortFn: ((err?: Error) => void) | null = null;
  /** Why the call was cut before undici handed over its abort function (applied in onConnect). */
  private reason: Error | null = null;
  private removeAbortListener: (() => void) | null = null;
  private settled = false;
  private readonly queue: Buffer[] = [];
  private queued = 0;
  private resumeFn: (() => void) | null = null;
  private paused = false;
  /** The body ended (complete), failed (`error`) or was given up by its reader (`done`). */
  private ended = false;
  private error: unknown = null;
  private done = false;
  private waiter: Settle | null = null;

  constructor(
    signal: UpstreamSignal,
    private readonly resolveCall: (r: UpstreamResponse) => void,
    private readonly rejectCall: (e: unknown) => void,
  ) {
    if (signal.aborted) this.reason = abortReason(signal);
    else {
      const onAbort = (): void => this.cut(abortReason(signal));
      if ('addEventListener' in signal) {
        signal.addEventListener('abort', onAbort, { once: true });
        this.removeAbortListener = () => signal.removeEventListener('abort', onAbort);
      } else {
        signal.on('abort', onAbort);
        this.removeAbortListener = () => signal.off('abort', onAbort);
      }
    }
  }

  private cut(reason: Error): void {
    if (this.abortFn) this.abortFn(reason);
    else this.reason = reason;
  }

  private detach(): void {
    if (this.removeAbortListener) {
      this.removeAbortListener();
      this.removeAbortListener = null;
    }
  }

  onConnect(abort: (err?: Error) => void): void {
    if (this.reason) return abort(this.reason);
    this.abortFn = abort;
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    // 1xx informational answers come before the real one (request() skips them too).
    if (statusCode < 200) return true;
    this.resumeFn = resume;
    this.settled = true;
    this.resolveCall({ status: statusCode, headers: util.parseHeaders(rawHeaders) as IncomingHttpHeaders, body: this });
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.done) return true;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w.resolve({ value: chunk, done: false });
      return true;
    }
    this.queue.push(chunk);
    this.queued += chunk.length;
    if (this.queued < BODY_HIGH_WATER_BYTES) return true;
    this.paused = true;
    return false;
  }

  onComplete(): void {
    this.ended = true;
    this.detach();
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w.resolve({ value: undefined, done: true });
    }
  }

  onError(err: Error): void {
    this.detach();
    if (!this.settled) {
      this.settled = true;
      this.rejectCall(err);
      return;
    }
    if (this.ended || this.done) return;
    this.ended = true;
    this.error = err;
    // A failed body loses what it held, as a destroyed stream does: the reader sees the error next.
    this.queue.length = 0;
    this.queued = 0;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w.reject(err);
    }
  }

  next(): Promise<IteratorResult<Buffer>> {
    if (this.error !== null) return Promise.reject(this.error);
    if (this.queue.length > 0) {
      // Everything held, as one piece (what a stream's read() hands its async iterator): a slow reader writes less often.
      const chunk = this.queue.length === 1 ? this.queue[0] : Buffer.concat(this.queue, this.queued);
      this.queue.length = 0;
      this.queued = 0;
      if (this.paused) {
        this.paused = false;
        this.resumeFn?.();
      }
      return Promise.resolve({ value: chunk, done: false });
    }
    if (this.ended || this.done) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  }

  /** The reader stopped early (a `break` or a throw in `for await`): the rest is not wanted, the call is cut. */
  return(): Promise<IteratorResult<Buffer>> {
    this.destroy();
    return Promise.resolve({ value: undefined, done: true });
  }

  /** Drops the body; a call still running is aborted (its connection is not reused), as destroying request()'s body does. */
  destroy(err?: Error): void {
    if (this.done) return;
    this.done = true;
    this.queue.length = 0;
    this.queued = 0;
    if (!this.ended) this.abortFn?.(err ?? new errors.RequestAbortedError());
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<Buffer> {
    return this;
  }
}

/** What request() cuts a call with: the signal's reason, or undici's own RequestAbortedError without one (ClientGone). */
function abortReason(signal: UpstreamSignal): Error {
  return ((signal as { reason?: unknown }).reason ?? new errors.RequestAbortedError()) as Error;
}
