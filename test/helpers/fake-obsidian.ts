import http from 'node:http';
import YAML from 'yaml';
import { listenLoopback } from './loopback';

export interface FakeObsidian {
  baseUrl: string;
  apiKey: string;
  /** Vault path → note text. */
  files: Map<string, string>;
  /** Every request: method, decoded path, raw path. */
  requests: { method: string; path: string; rawPath: string; authorization: string | undefined; contentType: string | undefined }[];
  close(): Promise<void>;
}

type Logic = unknown;

/** The JsonLogic subset the plugin's /search/ takes (==, !=, and, or, var). */
function evalLogic(l: Logic, data: Record<string, unknown>): unknown {
  if (l === null || typeof l !== 'object' || Array.isArray(l)) return l;
  const [op, raw] = Object.entries(l as Record<string, unknown>)[0];
  const args = (Array.isArray(raw) ? raw : [raw]) as Logic[];
  if (op === 'var') {
    let v: unknown = data;
    for (const part of String(args[0]).split('.')) v = v && typeof v === 'object' ? (v as Record<string, unknown>)[part] : undefined;
    return v ?? null;
  }
  const vals = args.map((a) => evalLogic(a, data));
  if (op === '==') return vals[0] == vals[1];
  if (op === '!=') return vals[0] != vals[1];
  if (op === 'and') return vals.every(Boolean);
  if (op === 'or') return vals.some(Boolean);
  throw new Error(`unsupported operator ${op}`);
}

function frontmatter(text: string): Record<string, unknown> {
  const m = /^---\n([\s\S]*?)\n---\n/.exec(text);
  return m ? ((YAML.parse(m[1]) ?? {}) as Record<string, unknown>) : {};
}

/** The Obsidian Local REST API plugin's wire format on 127.0.0.1: /vault/{path} (GET/PUT/DELETE), POST /search/ (JsonLogic), POST /search/simple/, GET /. */
export async function startFakeObsidian(apiKey = 'obsidian-test-key-0123456789'): Promise<FakeObsidian> {
  const state: FakeObsidian = { baseUrl: '', apiKey, files: new Map(), requests: [], close: async () => undefined };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      const rawPath = url.pathname;
      const path = decodeURIComponent(rawPath);
      state.requests.push({ method: req.method ?? '', path, rawPath, authorization: req.headers.authorization, contentType: req.headers['content-type'] });
      const json = (status: number, payload: unknown) => {
        const t = JSON.stringify(payload);
        res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(t) });
        res.end(t);
      };
      const authed = req.headers.authorization === `Bearer ${state.apiKey}`;
      if (req.method === 'GET' && path === '/') return json(200, { status: 'OK', service: 'Obsidian Local REST API', authenticated: authed, versions: { obsidian: '1.8.0', self: '3.2.0' } });
      if (!authed) return json(401, { errorCode: 40101, message: 'Authorization required. Find your API Key in the Local REST API settings.' });
      const text = Buffer.concat(chunks).toString('utf8');
      if (path.startsWith('/vault/')) {
        const file = path.slice('/vault/'.length);
        if (req.method === 'GET') {
          const note = state.files.get(file);
          if (note === undefined) return json(404, { errorCode: 40400, message: 'File not found' });
          res.writeHead(200, { 'content-type': 'text/markdown; charset=utf-8' });
          return res.end(note);
        }
        if (req.method === 'PUT') {
          state.files.set(file, text);
          res.writeHead(204);
          return res.end();
        }
        if (req.method === 'DELETE') {
          if (!state.files.delete(file)) return json(404, { errorCode: 40400, message: 'File not found' });
          res.writeHead(204);
          return res.end();
        }
      }
      if (req.method === 'POST' && path === '/search/') {
        if (req.headers['content-type'] !== 'application/vnd.olrapi.jsonlogic+json') return json(400, { errorCode: 40015, message: 'Unsupported content type' });
        const logic = JSON.parse(text) as Logic;
        const out = [...state.files.entries()].map(([filename, note]) => ({ filename, result: evalLogic(logic, { frontmatter: frontmatter(note), path: filename, content: note }) })).filter((r) => r.result);
        return json(200, out);
      }
      if (req.method === 'POST' && path === '/search/simple/') {
        const words = (url.searchParams.get('query') ?? '').toLowerCase().split(/\W+/).filter(Boolean);
        const out = [...state.files.entries()]
          .map(([filename, note]) => ({ filename, score: words.filter((w) => note.toLowerCase().includes(w)).length, matches: [] }))
          .filter((r) => r.score > 0)
          .sort((a, b) => b.score - a.score);
        return json(200, out);
      }
      json(404, { errorCode: 40400, message: 'Not found' });
    });
  });
  const { port, close } = await listenLoopback(server);
  state.baseUrl = `http://127.0.0.1:${port}`;
  state.close = close;
  return state;
}
