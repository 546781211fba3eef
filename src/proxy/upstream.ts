import type { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { Pool } from 'undici';
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

/**
 * How far a reader (the client the answer is relayed to) may fall behind an upstream answer before the call is cut:
 * bytes read from the upstream and not yet taken by the reader. A chat answer is far smaller.
 */
export const UPSTREAM_MAX_HELD_BYTES = 16 * 1024 * 1024;

/** Thrown from a body's iteration when its reader fell more than the held-bytes bound behind; the upstream call is cut. */
export class UpstreamReaderBehindError extends Error {
  readonly code = 'ENGRAM_READER_BEHIND';
  constructor(maxHeld: number) {
    super(`the reader fell more than ${maxHeld} bytes behind the upstream answer`);
    this.name = 'UpstreamReaderBehindError';
  }
}

/**
 * Reads undici's body as fast as it arrives and holds what the reader has not taken yet, so undici's HTTP/1 parser is
 * never paused for a reader that fell behind. undici 6 and 7 throw an AssertionError that no caller can catch when the
 * socket ends (the upstream's FIN: `Connection: close`, an answer without a length, HTTP/1.0, an idle keep-alive socket
 * the upstream closes) while its parser is paused (nodejs/undici#5360, fixed in undici 8, which needs Node 22), and the
 * process guards then shut the api down: any client reading a long answer slowly could stop it for everyone.
 * The iteration yields what has arrived since the last step (as a Readable's iterator does), throws the body's
 * error (held bytes dropped, as a destroyed Readable drops them), and cuts the call when the reader stops early or
 * falls more than `maxHeld` bytes behind.
 */
export function readEagerly(src: Readable, maxHeld: number): UpstreamResponse['body'] {
  const st: EagerBody = { src, queue: [], held: 0, ended: false, failure: null, wake: null };
  src.on('data', (chunk: Buffer) => {
    st.queue.push(chunk);
    st.held += chunk.length;
    if (st.held > maxHeld) src.destroy(new UpstreamReaderBehindError(maxHeld));
    wakeReader(st);
  });
  src.on('end', () => {
    st.ended = true;
    wakeReader(st);
  });
  // Also what keeps an error of a body nobody reads (client gone) from ever being unhandled.
  src.on('error', (err: unknown) => {
    st.failure ??= { err };
    wakeReader(st);
  });
  src.on('close', () => {
    if (!st.ended) st.failure ??= { err: new Error('the upstream body was closed before its end') };
    wakeReader(st);
  });
  return { [Symbol.asyncIterator]: () => drainEager(st), destroy: (err?: Error) => src.destroy(err) };
}

/** What readEagerly's listeners and its reader share: a plain object, so the reader's generator is no closure over the listeners' scope. */
interface EagerBody {
  src: Readable;
  queue: Buffer[];
  held: number;
  ended: boolean;
  failure: { err: unknown } | null;
  wake: (() => void) | null;
}

function wakeReader(st: EagerBody): void {
  const w = st.wake;
  st.wake = null;
  w?.();
}

/**
 * The reader of readEagerly's body. A module-level generator on purpose: written as a generator closure inside
 * readEagerly, sharing one scope with the stream's listeners, it made V8's scavenger keep whole finished requests
 * alive (their req, res, parser and undici objects) until the next full collection: ~5 KB promoted to the old space
 * per memory-off chat against ~0.1 KB for a bare proxy, a mark-compact every ~1,600 chats, scavenges of ~5 ms
 * instead of ~1.5 ms, and ~0.1 ms more CPU per chat (bench/README.md, "Fifteenth pass"). The same code with this
 * shape promotes what a bare proxy does under a steady load (after an idle gap the api's Set of open responses did
 * the same until src/http/open-responses.ts replaced it).
 */
async function* drainEager(st: EagerBody): AsyncGenerator<Buffer> {
  let complete = false;
  try {
    for (;;) {
      if (st.failure) throw st.failure.err;
      if (st.queue.length) {
        const out = st.queue.length === 1 ? st.queue[0]! : Buffer.concat(st.queue, st.held);
        st.queue.length = 0;
        st.held = 0;
        yield out;
        continue;
      }
      if (st.ended) {
        complete = true;
        return;
      }
      await new Promise<void>((r) => (st.wake = r));
    }
  } finally {
    // A reader that stopped early or failed: cut the call (a no-op on a body already ended or destroyed).
    if (!complete) st.src.destroy();
  }
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

  constructor(
    private readonly env: UpstreamEnv,
    private readonly maxHeldBytes = UPSTREAM_MAX_HELD_BYTES,
  ) {
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

  /** Closes the pool's connections to the upstream, cutting any call still running (the api's shutdown, after its http server). */
  async close(): Promise<void> {
    await this.pool.destroy();
  }

  private async call(method: 'GET' | 'POST', path: string, signal: UpstreamSignal, body: string | Buffer | undefined, headers: Record<string, string>): Promise<UpstreamResponse> {
    const r = await this.pool.request({
      path: `${this.basePath}${path}`,
      method,
      headers,
      body,
      signal,
      // Time to the status line, and the longest silence between body chunks (a stream may run for minutes).
      headersTimeout: this.env.UPSTREAM_TIMEOUT_MS,
      bodyTimeout: this.env.UPSTREAM_TIMEOUT_MS,
    });
    return { status: r.statusCode, headers: r.headers, body: readEagerly(r.body, this.maxHeldBytes) };
  }
}
