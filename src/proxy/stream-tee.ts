import { StringDecoder } from 'node:string_decoder';
import { MAX_TEXT_CHARS, streamDeltaText, tailChars } from '../memory/chat-text';

/** What ended a relay: the upstream finished, the upstream broke, or the client went away. */
export type RelayEnd = 'complete' | 'upstream-failed' | 'client-gone';

/** The SSE event that ends a client stream whose upstream broke; official OpenAI clients raise it as an APIError. */
export const UPSTREAM_STREAM_ERROR = { error: { message: 'upstream stream ended unexpectedly', type: 'upstream_error' } } as const;

/** The longest partial line held back before it is forwarded anyway (bounds memory on a stream without line breaks). */
const MAX_HELD_BYTES = 1_048_576;
const EMPTY = Buffer.alloc(0);

/** The sink of a relay: an express/Node response. */
export interface RelaySink {
  write(chunk: Buffer): boolean;
  end(): unknown;
  destroy(): unknown;
  readonly destroyed: boolean;
  /** The status line is out (a non-SSE relay writes it with its first chunk). */
  readonly headersSent: boolean;
  on(event: 'drain' | 'close', fn: () => void): unknown;
  off(event: 'drain' | 'close', fn: () => void): unknown;
}

/** Parses an OpenAI-style SSE stream as it passes (lines and UTF-8 characters may be split across chunks) and keeps the newest 64 KiB of the assistant's delta text. */
export class SseDeltaCollector {
  private readonly decoder = new StringDecoder('utf8');
  private partial = '';
  private overlong = false;
  private lastWasCR = false;
  private data: string[] = [];
  private parts: string[] = [];
  private partsLength = 0;
  /** The upstream sent `data: [DONE]`. */
  sawDone = false;
  /** The upstream sent an in-band error event (some providers do, with status 200). */
  sawError = false;

  /** Feeds bytes as they were forwarded. */
  push(chunk: Buffer): void {
    this.feed(this.decoder.write(chunk));
  }

  /** Flushes what is left once the upstream ended. */
  end(): void {
    this.feed(this.decoder.end());
    if (this.partial && !this.overlong) this.line(this.partial);
    this.partial = '';
    this.dispatch();
  }

  /** The collected assistant text (newest 64 KiB), trimmed. */
  text(): string {
    return tailChars(this.parts.join('').trim()).trim();
  }

  private feed(s: string): void {
    let start = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      // "\r\n" split across two chunks is one line break, not two.
      if (c === 10 && i === 0 && this.lastWasCR && this.partial === '') {
        start = 1;
        this.lastWasCR = false;
        continue;
      }
      // The tail of a dropped overlong line is not a line of its own.
      if (!this.overlong) this.line(this.partial + s.slice(start, i));
      this.partial = '';
      this.overlong = false;
      this.lastWasCR = false;
      if (c === 13) {
        if (s.charCodeAt(i + 1) === 10) i++;
        else this.lastWasCR = i === s.length - 1;
      }
      start = i + 1;
    }
    if (start < s.length) {
      this.lastWasCR = false;
      if (this.overlong) return;
      this.partial += s.slice(start);
      if (this.partial.length > MAX_HELD_BYTES) {
        // A line this long is not a chat delta; dropping it keeps the collector bounded.
        this.partial = '';
        this.overlong = true;
      }
    }
  }

  private line(l: string): void {
    if (l === '') return this.dispatch();
    if (!l.startsWith('data:')) return; // event:, id:, retry: and ":" comments carry no text
    this.data.push(l.charCodeAt(5) === 32 ? l.slice(6) : l.slice(5));
  }

  private dispatch(): void {
    if (this.data.length === 0) return;
    const payload = this.data.join('\n').trim();
    this.data = [];
    if (payload === '[DONE]') {
      this.sawDone = true;
      return;
    }
    if (!payload.startsWith('{')) return;
    let json: unknown;
    try {
      json = JSON.parse(payload);
    } catch {
      return;
    }
    if (json && typeof json === 'object' && (json as { error?: unknown }).error) {
      this.sawError = true;
      return;
    }
    const t = streamDeltaText(json);
    if (!t) return;
    this.parts.push(t);
    this.partsLength += t.length;
    // Only the newest 64 KiB is ever enqueued, so older text is dropped as the stream grows.
    if (this.partsLength > 2 * MAX_TEXT_CHARS) {
      const kept = tailChars(this.parts.join(''), MAX_TEXT_CHARS);
      this.parts = [kept];
      this.partsLength = kept.length;
    }
  }
}

/** Writes a chunk, waiting for the client to drain when its buffer is full (a slow reader must not make us buffer the answer). */
async function write(sink: RelaySink, chunk: Buffer): Promise<void> {
  if (sink.write(chunk)) return;
  await new Promise<void>((resolve) => {
    const done = () => {
      sink.off('drain', done);
      sink.off('close', done);
      resolve();
    };
    sink.on('drain', done);
    sink.on('close', done);
  });
}

/** Index just past the last line break of a buffer (0 when it has none). */
function afterLastLineBreak(buf: Buffer): number {
  for (let i = buf.length - 1; i >= 0; i--) if (buf[i] === 10 || buf[i] === 13) return i + 1;
  return 0;
}

/** What a relay checks between chunks: the client went away (a ClientGone, or any AbortSignal). */
export interface GoneFlag {
  readonly aborted: boolean;
}

/** What relaySse feeds every relayed piece to (the SseDeltaCollector, or nothing when no extraction follows). */
export interface SseSink {
  push(chunk: Buffer): void;
  end(): void;
}

/** An SseSink that keeps nothing: memory off, the stream is relayed without being parsed. */
export const IGNORE_SSE: SseSink = { push: () => undefined, end: () => undefined };

/** Relays an SSE body to the client chunk by chunk as it arrives while feeding the collector, ending the stream with an error event if the upstream breaks (the caller ends it on `complete`). */
export async function relaySse(source: AsyncIterable<Buffer>, sink: RelaySink, collector: SseSink, signal: GoneFlag): Promise<RelayEnd> {
  // Output is cut at line boundaries (a partial line waits for the rest of itself), so a client
  // never holds half an event when the upstream breaks and the error event stands on its own.
  let held: Buffer = EMPTY;
  try {
    for await (const chunk of source) {
      if (signal.aborted || sink.destroyed) return 'client-gone';
      const buf = held.length ? Buffer.concat([held, chunk]) : chunk;
      let cut = afterLastLineBreak(buf);
      if (cut === 0 && buf.length <= MAX_HELD_BYTES) {
        held = buf;
        continue;
      }
      if (cut === 0) cut = buf.length;
      const out = buf.subarray(0, cut);
      held = cut < buf.length ? buf.subarray(cut) : EMPTY;
      collector.push(out);
      await write(sink, out);
    }
    if (signal.aborted || sink.destroyed) return 'client-gone';
    if (held.length) {
      collector.push(held);
      await write(sink, held);
    }
    collector.end();
    return 'complete';
  } catch {
    if (signal.aborted || sink.destroyed) return 'client-gone';
    // The leading blank line closes any event the upstream left open, so the error is its own event.
    sink.write(Buffer.from(`\ndata: ${JSON.stringify(UPSTREAM_STREAM_ERROR)}\n\n`));
    sink.end();
    return 'upstream-failed';
  }
}

/**
 * Relays a non-SSE body chunk by chunk, one chunk behind: the last chunk is not written but returned as `tail`
 * for the caller to end the response with (`res.end(tail)`), so a body that arrives in one piece leaves in one
 * write with its headers and a content-length instead of three (headers, chunk, chunked terminator). Keeps a copy
 * of up to `keepBytes` for extraction (`kept` is null when the body was larger).
 */
export async function relayBody(
  source: AsyncIterable<Buffer>,
  sink: RelaySink,
  signal: GoneFlag,
  keepBytes: number,
): Promise<{ end: RelayEnd; kept: Buffer | null; tail?: Buffer; error?: unknown }> {
  const kept: Buffer[] = [];
  let size = 0;
  let pending: Buffer | null = null;
  try {
    for await (const chunk of source) {
      if (signal.aborted || sink.destroyed) return { end: 'client-gone', kept: null };
      size += chunk.length;
      if (size <= keepBytes) kept.push(chunk);
      if (pending) await write(sink, pending);
      pending = chunk;
    }
    if (signal.aborted || sink.destroyed) return { end: 'client-gone', kept: null };
    return { end: 'complete', kept: size <= keepBytes ? (kept.length === 1 ? kept[0] : Buffer.concat(kept)) : null, ...(pending ? { tail: pending } : {}) };
  } catch (error) {
    if (signal.aborted || sink.destroyed) return { end: 'client-gone', kept: null };
    // Once the status line is out, cutting the connection is the only honest signal of a broken body; before
    // that (nothing written yet), the caller still answers with an error status of its own.
    if (sink.headersSent) sink.destroy();
    return { end: 'upstream-failed', kept: null, error };
  }
}
