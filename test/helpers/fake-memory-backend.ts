import crypto from 'node:crypto';
import http from 'node:http';
import { listenLoopback } from './loopback';

export interface RecordedBackendRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  headers: http.IncomingHttpHeaders;
  body: unknown;
}

type Stored = Record<string, unknown> & { id: string; apiKeyId: string; content: string; key: string; type: string };

/**
 * Paths of the generic HTTP memory protocol a fake speaks: `default` is the original's
 * (`/memories`, `/memories/search`, `/memories/{id}`, `/health`, params by our names); `renamed` is
 * a service with its own names (`/v2/items/{ref}`, `/v2/find`, `/v2/health`; `tenant`, `text`, `max`, `skip`, `kind`).
 */
export type Dialect = 'default' | 'renamed';

export interface FakeMemoryBackend {
  baseUrl: string;
  requests: RecordedBackendRequest[];
  store: Map<string, Stored>;
  /** Every request answers 500 while set (a primary that is down). */
  down: boolean;
  /** The next N requests answer 503. */
  failNext: number;
  /** Answers are held this long. */
  delayMs: number;
  /** List answers carry this many bytes of padding (response-size limit). */
  padBytes: number;
  /** List answers are a bare array of the page (no total), as the generic protocol allows. */
  listAsArray: boolean;
  close(): Promise<void>;
}

/** A remote memory service on 127.0.0.1 speaking the generic backend protocol (JSON over HTTP). */
export async function startFakeMemoryBackend(dialect: Dialect = 'default'): Promise<FakeMemoryBackend> {
  const n = dialect === 'default' ? { items: '/memories', search: '/memories/search', health: '/health', tenant: 'apiKeyId', text: 'query', max: 'limit', skip: 'offset', kind: 'type', q: 'q' } : { items: '/v2/items', search: '/v2/find', health: '/v2/health', tenant: 'tenant', text: 'text', max: 'max', skip: 'skip', kind: 'kind', q: 'text' };
  const state: FakeMemoryBackend = { baseUrl: '', requests: [], store: new Map(), down: false, failNext: 0, delayMs: 0, padBytes: 0, listAsArray: false, close: async () => undefined };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      let body: unknown = undefined;
      try {
        body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
      } catch {
        body = undefined;
      }
      state.requests.push({ method: req.method ?? '', path: url.pathname, query: Object.fromEntries(url.searchParams), headers: req.headers, body });
      const send = (status: number, payload?: unknown) => {
        const text = payload === undefined ? '' : JSON.stringify(payload);
        res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      };
      const answer = () => {
        if (state.down) return send(500, { error: 'primary is down' });
        if (state.failNext > 0) {
          state.failNext--;
          return send(503, { error: 'try later' });
        }
        const p = url.pathname;
        const qp = (k: string) => url.searchParams.get(k) ?? undefined;
        if (req.method === 'GET' && p === n.health) return send(200, { ok: true });
        if (req.method === 'GET' && p === n.search) {
          const text = (qp(n.text) ?? '').toLowerCase();
          const words = text.split(/\W+/).filter(Boolean);
          const hits = [...state.store.values()].filter((m) => m.apiKeyId === qp(n.tenant) && (words.length === 0 || words.some((w) => m.content.toLowerCase().includes(w))));
          // A careless service: it also returns another tenant's memory (the client must drop it).
          const leak = [...state.store.values()].find((m) => m.apiKeyId !== qp(n.tenant));
          return send(200, dialect === 'renamed' ? { memories: [...hits, ...(leak ? [leak] : [])].slice(0, Number(qp(n.max) ?? 100)) } : [...hits, ...(leak ? [leak] : [])]);
        }
        if (req.method === 'GET' && p === n.items) {
          const all = [...state.store.values()].filter((m) => (qp(n.tenant) === undefined || m.apiKeyId === qp(n.tenant)) && (qp(n.kind) === undefined || m.type === qp(n.kind)));
          const skip = Number(qp(n.skip) ?? 0);
          const max = Number(qp(n.max) ?? 50);
          if (state.listAsArray) return send(200, all.slice(skip, skip + max));
          return send(200, { data: all.slice(skip, skip + max), total: all.length, padding: 'x'.repeat(state.padBytes) });
        }
        if (req.method === 'POST' && p === n.items) {
          const b = body as Partial<Stored>;
          const existing = [...state.store.values()].find((m) => b.key && m.apiKeyId === b.apiKeyId && m.key === b.key);
          const now = new Date().toISOString();
          if (existing) {
            Object.assign(existing, { content: b.content, type: b.type, updatedAt: now });
            return send(200, { memory: existing, created: false });
          }
          const m = { ...b, id: b.id ?? crypto.randomUUID(), createdAt: now, updatedAt: now } as Stored;
          state.store.set(m.id, m);
          return send(201, { memory: m, created: true });
        }
        const idMatch = p.startsWith(`${n.items}/`) ? decodeURIComponent(p.slice(n.items.length + 1)) : null;
        if (idMatch !== null) {
          const m = state.store.get(idMatch);
          if (!m) return send(404, { error: 'not found' });
          if (req.method === 'GET') return send(200, { memory: m });
          if (req.method === 'PATCH') {
            Object.assign(m, body as object, { updatedAt: new Date().toISOString() });
            return send(200, { memory: m });
          }
          if (req.method === 'DELETE') {
            state.store.delete(idMatch);
            return send(204);
          }
        }
        send(404, { error: 'no route' });
      };
      if (state.delayMs > 0) setTimeout(answer, state.delayMs);
      else answer();
    });
  });
  const { port, close } = await listenLoopback(server);
  state.baseUrl = `http://127.0.0.1:${port}`;
  state.close = close;
  return state;
}
