import http from 'node:http';
import { listenLoopback, onJsonBody } from './loopback';

export interface RecordedEmbeddingsRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  /** The client closed the connection before this server answered (an aborted or timed-out call). */
  closedEarly: boolean;
  body: { model?: string; input?: string[]; [k: string]: unknown };
}

/** How the next requests are answered. */
export type FakeEmbeddingsBehaviour =
  | { kind: 'ok' }
  | { kind: 'status'; status: number }
  | { kind: 'delay'; ms: number }
  | { kind: 'bad_json' }
  | { kind: 'wrong_count' }
  | { kind: 'shuffled' };

export interface FakeEmbeddingsServer {
  /** Base URL without `/embeddings`, e.g. `http://127.0.0.1:1234/v1`. */
  baseUrl: string;
  requests: RecordedEmbeddingsRequest[];
  behave(b: FakeEmbeddingsBehaviour): void;
  close(): Promise<void>;
}

/** A deterministic bag-of-words vector: texts sharing words get similar vectors. */
export function fakeEmbedding(text: string, dim: number): number[] {
  const v = new Array(dim).fill(0);
  for (const word of text.toLowerCase().split(/\W+/).filter(Boolean)) {
    let h = 2166136261;
    for (let i = 0; i < word.length; i++) h = Math.imul(h ^ word.charCodeAt(i), 16777619);
    v[(h >>> 0) % dim] += 1;
  }
  v[0] += 0.01; // never all-zero, like a real model
  return v;
}

/** An OpenAI-compatible `POST /v1/embeddings` on 127.0.0.1 that records requests and can misbehave on demand. */
export async function startFakeEmbeddingsServer(opts: { dim?: number } = {}): Promise<FakeEmbeddingsServer> {
  const dim = opts.dim ?? 12;
  const requests: RecordedEmbeddingsRequest[] = [];
  let behaviour: FakeEmbeddingsBehaviour = { kind: 'ok' };
  const server = http.createServer((req, res) => {
    onJsonBody<RecordedEmbeddingsRequest['body']>(req, (body) => {
      const rec: RecordedEmbeddingsRequest = { method: req.method ?? '', path: req.url ?? '', authorization: req.headers.authorization, closedEarly: req.socket.destroyed, body };
      requests.push(rec);
      // 'close' before the response finished means the caller hung up: the only way a `delay` ends early.
      res.on('close', () => {
        if (!res.writableFinished) rec.closedEarly = true;
      });
      const send = (status: number, payload: string) => {
        res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) });
        res.end(payload);
      };
      if (req.method !== 'POST' || !req.url?.endsWith('/embeddings')) return send(404, JSON.stringify({ error: { message: 'not found' } }));
      const b = behaviour;
      if (b.kind === 'status') return send(b.status, JSON.stringify({ error: { message: 'Incorrect API key provided: sk-live-SECRET' } }));
      if (b.kind === 'bad_json') return send(200, '{"data": [');
      const input = Array.isArray(body.input) ? body.input : [];
      let data = input.map((text, index) => ({ object: 'embedding', index, embedding: fakeEmbedding(String(text), dim) }));
      if (b.kind === 'wrong_count') data = data.slice(1);
      if (b.kind === 'shuffled') data = [...data].reverse();
      const payload = JSON.stringify({ object: 'list', model: body.model, data, usage: { prompt_tokens: 0, total_tokens: 0 } });
      if (b.kind === 'delay') setTimeout(() => !res.destroyed && send(200, payload), b.ms).unref();
      else send(200, payload);
    });
  });
  const { port, close } = await listenLoopback(server);
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    behave: (b) => {
      behaviour = b;
    },
    close,
  };
}
