import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';

/** How one chat request is answered (consumed in order; the default plan answers when none is queued). */
export interface FakeUpstreamPlan {
  /** Status to answer with; anything but 2xx sends `body` (default: an OpenAI error body). */
  status?: number;
  /** Extra response headers (e.g. `retry-after`, `x-ratelimit-*`). */
  headers?: Record<string, string>;
  /** JSON body for an error status, or to replace the generated chat completion. */
  body?: unknown;
  /** Wait this long before answering (status line included). */
  delayMs?: number;
  /** The assistant's reply (default `Hello from the fake upstream.`). */
  reply?: string;
  /** Streaming: number of content chunks the reply is cut into (default 3). */
  chunks?: number;
  /** Streaming: pause between content chunks. */
  chunkDelayMs?: number;
  /** Streaming: destroy the socket after this many content chunks (no final chunk, no `[DONE]`). */
  dieAfterChunks?: number;
  /** Streaming: write every SSE event in two writes cut mid-line (and mid-character when it can), 15 ms apart. */
  splitLines?: boolean;
}

/** One request as the fake saw it, with the timing of its answer (performance.now() milliseconds). */
export interface FakeUpstreamRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown> | null;
  /** The request body's bytes as received (UTF-8 text), to check what was sent byte for byte. */
  raw: string;
  receivedAt: number;
  /** When each content chunk was written (streaming). */
  chunkTimes: number[];
  /** When the answer was completely written; null if it never was. */
  finishedAt: number | null;
  /** The connection closed before the answer was completely written (the client or the proxy went away). */
  closedEarly: boolean;
  /** The fake destroyed the socket on purpose (`dieAfterChunks`). */
  died: boolean;
}

export interface FakeUpstream {
  /** Origin without a path, e.g. `http://127.0.0.1:1234` (the API lives under `/v1`). */
  url: string;
  requests: FakeUpstreamRequest[];
  /** Queues the plan for the next chat request. */
  plan(p: FakeUpstreamPlan): void;
  /** Forgets recorded requests and queued plans. */
  reset(): void;
  /** Connections open to it now (a client's keep-alive sockets included). */
  openConnections(): Promise<number>;
  close(): Promise<void>;
}

export const FAKE_REPLY = 'Hello from the fake upstream.';
export const FAKE_MODELS = ['gpt-4o-mini', 'o1-mini'];

// Unref'd: a planned delay still pending when a test ends must not keep the process alive.
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

/** Cuts a reply into `n` pieces of (nearly) equal length, never inside a surrogate pair. */
function cut(text: string, n: number): string[] {
  const chars = Array.from(text);
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(chars.slice(Math.floor((i * chars.length) / n), Math.floor(((i + 1) * chars.length) / n)).join(''));
  return out;
}

/** An OpenAI-compatible upstream on 127.0.0.1 (`POST /v1/chat/completions`, streaming or not, `GET /v1/models` and `GET /v1/models/:id`) that records every request and misbehaves on demand. */
export async function startFakeUpstream(): Promise<FakeUpstream> {
  const requests: FakeUpstreamRequest[] = [];
  let plans: FakeUpstreamPlan[] = [];
  let seq = 0;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body: Record<string, unknown> | null = null;
      const raw = Buffer.concat(chunks).toString('utf8');
      try {
        body = chunks.length ? (JSON.parse(raw) as Record<string, unknown>) : null;
      } catch {
        body = null;
      }
      const rec: FakeUpstreamRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body,
        raw,
        receivedAt: performance.now(),
        chunkTimes: [],
        finishedAt: null,
        closedEarly: false,
        died: false,
      };
      requests.push(rec);
      res.on('close', () => {
        if (!res.writableFinished) rec.closedEarly = true;
      });
      void answer(req, res, rec).catch(() => res.destroy());
    });
  });

  const json = (res: http.ServerResponse, rec: FakeUpstreamRequest, status: number, payload: unknown, headers: Record<string, string> = {}) => {
    const text = JSON.stringify(payload);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), 'x-request-id': `req_fake_${seq}`, ...headers });
    res.end(text, () => {
      rec.finishedAt = performance.now();
    });
  };

  async function answer(req: http.IncomingMessage, res: http.ServerResponse, rec: FakeUpstreamRequest): Promise<void> {
    if (req.method === 'GET' && req.url === '/v1/models') {
      return json(res, rec, 200, { object: 'list', data: FAKE_MODELS.map((id) => ({ id, object: 'model', created: 1_700_000_000, owned_by: 'fake' })) });
    }
    const modelPath = req.method === 'GET' ? /^\/v1\/models\/([^/?]+)$/.exec(req.url ?? '') : null;
    if (modelPath) {
      const id = decodeURIComponent(modelPath[1]);
      if (FAKE_MODELS.includes(id)) return json(res, rec, 200, { id, object: 'model', created: 1_700_000_000, owned_by: 'fake' });
      return json(res, rec, 404, { error: { message: `The model '${id}' does not exist`, type: 'invalid_request_error', param: 'model', code: 'model_not_found' } });
    }
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      return json(res, rec, 404, { error: { message: 'Unknown path', type: 'invalid_request_error', param: null, code: 'not_found' } });
    }
    const p = plans.shift() ?? {};
    const id = `chatcmpl-fake-${++seq}`;
    const model = typeof rec.body?.model === 'string' ? rec.body.model : 'gpt-4o-mini';
    const created = Math.floor(Date.now() / 1000);
    const reply = p.reply ?? FAKE_REPLY;
    if (p.delayMs) await sleep(p.delayMs);
    if (res.destroyed) return;
    const status = p.status ?? 200;
    if (status < 200 || status >= 300) {
      return json(res, rec, status, p.body ?? { error: { message: `fake upstream error ${status}`, type: 'api_error', param: null, code: null } }, p.headers);
    }
    if (rec.body?.stream !== true) {
      return json(
        res,
        rec,
        status,
        p.body ?? {
          id,
          object: 'chat.completion',
          created,
          model,
          choices: [{ index: 0, message: { role: 'assistant', content: reply, refusal: null }, logprobs: null, finish_reason: 'stop' }],
          usage: { prompt_tokens: 10, completion_tokens: 7, total_tokens: 17 },
          system_fingerprint: null,
        },
        p.headers,
      );
    }

    res.writeHead(status, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-request-id': `req_fake_${seq}`, ...p.headers });
    const chunk = (delta: Record<string, unknown>, finish: string | null) =>
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, system_fingerprint: null, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
    const send = async (event: string) => {
      if (res.destroyed) return;
      if (!p.splitLines) {
        res.write(event);
        return;
      }
      // Cut inside the JSON, one byte into a multi-byte character when there is one, so the proxy must join lines and characters.
      const bytes = Buffer.from(event, 'utf8');
      const multi = bytes.findIndex((b) => b >= 0xc0);
      const at = multi > 0 ? multi + 1 : Math.floor(bytes.length / 2);
      res.write(bytes.subarray(0, at));
      await sleep(15);
      if (!res.destroyed) res.write(bytes.subarray(at));
    };
    const pieces = cut(reply, Math.max(1, p.chunks ?? 3));
    await send(chunk({ role: 'assistant', content: '', refusal: null }, null));
    for (let i = 0; i < pieces.length; i++) {
      if (i > 0 && p.chunkDelayMs) await sleep(p.chunkDelayMs);
      if (res.destroyed) return;
      await send(chunk({ content: pieces[i] }, null));
      rec.chunkTimes.push(performance.now());
      if (p.dieAfterChunks !== undefined && i + 1 >= p.dieAfterChunks) {
        rec.died = true;
        // Let the written bytes leave first, then cut the connection without ending the chunked body.
        await sleep(20);
        req.socket.destroy();
        return;
      }
    }
    await send(chunk({}, 'stop'));
    if (res.destroyed) return;
    res.end('data: [DONE]\n\n', () => {
      rec.finishedAt = performance.now();
    });
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    plan: (p) => {
      plans.push(p);
    },
    reset: () => {
      requests.length = 0;
      plans = [];
    },
    openConnections: () => new Promise<number>((resolve, reject) => server.getConnections((err, n) => (err ? reject(err) : resolve(n)))),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
