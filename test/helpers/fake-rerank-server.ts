import http from 'node:http';
import { listenLoopback, onJsonBody } from './loopback';

export interface RecordedRerankRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  /** The client closed the connection before this server answered (an aborted or timed-out call). */
  closedEarly: boolean;
  body: { model?: string; query?: string; documents?: string[]; top_n?: number; top_k?: number; [k: string]: unknown };
}

/** Where the ranking goes in the response: Cohere and Jina say `results`, Voyage says `data`. */
export type RerankListField = 'results' | 'data';

/** How the next requests are answered. */
export type FakeRerankBehaviour =
  | { kind: 'ok'; field?: RerankListField }
  | { kind: 'results'; results: unknown[]; field?: RerankListField }
  | { kind: 'status'; status: number }
  | { kind: 'delay'; ms: number }
  | { kind: 'bad_json' }
  | { kind: 'redirect'; location: string };

export interface FakeRerankServer {
  /** Base URL without `/rerank`, e.g. `http://127.0.0.1:1234/v1`. */
  baseUrl: string;
  requests: RecordedRerankRequest[];
  behave(b: FakeRerankBehaviour): void;
  close(): Promise<void>;
}

/** A deterministic relevance: the share of the query's words that occur in the document. */
export function fakeRelevance(query: string, document: string): number {
  const words = (s: string) => s.toLowerCase().split(/\W+/).filter(Boolean);
  const q = [...new Set(words(query))];
  if (q.length === 0) return 0;
  const d = new Set(words(document));
  return q.filter((w) => d.has(w)).length / q.length;
}

/** A Cohere/Jina/Voyage-style `POST …/rerank` on 127.0.0.1 that records requests and can misbehave on demand. */
export async function startFakeRerankServer(): Promise<FakeRerankServer> {
  const requests: RecordedRerankRequest[] = [];
  let behaviour: FakeRerankBehaviour = { kind: 'ok' };
  const server = http.createServer((req, res) => {
    onJsonBody<RecordedRerankRequest['body']>(req, (body) => {
      const rec: RecordedRerankRequest = { method: req.method ?? '', path: req.url ?? '', authorization: req.headers.authorization, closedEarly: req.socket.destroyed, body };
      requests.push(rec);
      // 'close' before the response finished means the caller hung up: the only way a `delay` ends early.
      res.on('close', () => {
        if (!res.writableFinished) rec.closedEarly = true;
      });
      const send = (status: number, payload: string, headers: Record<string, string> = {}) => {
        res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), ...headers });
        res.end(payload);
      };
      if (req.method !== 'POST' || !req.url?.endsWith('/rerank')) return send(404, JSON.stringify({ message: 'not found' }));
      const b = behaviour;
      // Real providers echo parts of the key in 401 bodies; the client must never pass this text on.
      if (b.kind === 'status') return send(b.status, JSON.stringify({ message: 'invalid api token: sk-live-SECRET' }));
      if (b.kind === 'bad_json') return send(200, '{"results": [');
      if (b.kind === 'redirect') return send(307, '{}', { location: b.location });
      if (b.kind === 'results') return send(200, JSON.stringify({ [b.field ?? 'results']: b.results }));
      const query = typeof body.query === 'string' ? body.query : '';
      const documents = Array.isArray(body.documents) ? body.documents : [];
      const ranked = documents
        .map((doc, index) => ({ index, relevance_score: fakeRelevance(query, String(doc)) }))
        .sort((a, z) => z.relevance_score - a.relevance_score);
      const payload = JSON.stringify({ id: 'fake', [b.kind === 'ok' ? (b.field ?? 'results') : 'results']: ranked });
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
