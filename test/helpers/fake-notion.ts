import crypto from 'node:crypto';
import http from 'node:http';
import { listenLoopback } from './loopback';

type Page = { object: 'page'; id: string; created_time: string; last_edited_time: string; archived: boolean; parent: unknown; properties: Record<string, unknown> };

export interface FakeNotion {
  baseUrl: string;
  token: string;
  databaseId: string;
  pages: Map<string, Page>;
  requests: { method: string; path: string; version: string | undefined; authorization: string | undefined }[];
  close(): Promise<void>;
}

const text = (prop: unknown): string => {
  const p = prop as { rich_text?: { text?: { content?: string } }[]; title?: { text?: { content?: string } }[] } | undefined;
  return (p?.rich_text ?? p?.title ?? []).map((t) => t.text?.content ?? '').join('');
};
/** Notion fills plain_text on every rich-text object it returns. */
const withPlainText = (props: Record<string, unknown>) =>
  Object.fromEntries(
    Object.entries(props).map(([k, v]) => {
      const p = v as { rich_text?: { text: { content: string } }[]; title?: { text: { content: string } }[] };
      if (p.rich_text) return [k, { type: 'rich_text', rich_text: p.rich_text.map((t) => ({ ...t, plain_text: t.text.content })) }];
      if (p.title) return [k, { type: 'title', title: p.title.map((t) => ({ ...t, plain_text: t.text.content })) }];
      return [k, v];
    }),
  );

function matches(page: Page, f: Record<string, unknown>): boolean {
  if (Array.isArray(f.and)) return (f.and as Record<string, unknown>[]).every((x) => matches(page, x));
  if (Array.isArray(f.or)) return (f.or as Record<string, unknown>[]).some((x) => matches(page, x));
  const prop = page.properties[f.property as string];
  const cond = (f.rich_text ?? f.title ?? f.select) as Record<string, unknown>;
  const value = f.select ? ((prop as { select?: { name?: string } } | undefined)?.select?.name ?? '') : text(prop);
  if ('equals' in cond) return value === cond.equals;
  if ('contains' in cond) return value.toLowerCase().includes(String(cond.contains).toLowerCase());
  if ('is_not_empty' in cond) return value !== '';
  throw new Error('unsupported filter');
}

/** Notion's API on 127.0.0.1: POST /v1/pages, PATCH /v1/pages/{id}, POST /v1/databases/{id}/query (filters, cursors), GET /v1/databases/{id}. */
export async function startFakeNotion(): Promise<FakeNotion> {
  const state: FakeNotion = { baseUrl: '', token: 'secret_notion_test_token', databaseId: crypto.randomUUID(), pages: new Map(), requests: [], close: async () => undefined };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      const path = url.pathname;
      state.requests.push({ method: req.method ?? '', path, version: req.headers['notion-version'] as string | undefined, authorization: req.headers.authorization });
      const json = (status: number, payload: unknown) => {
        const t = JSON.stringify(payload);
        res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(t) });
        res.end(t);
      };
      if (req.headers.authorization !== `Bearer ${state.token}`) return json(401, { object: 'error', status: 401, code: 'unauthorized', message: 'API token is invalid.' });
      if (!req.headers['notion-version']) return json(400, { object: 'error', status: 400, code: 'missing_version', message: 'Notion-Version header failed validation' });
      const body = chunks.length ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>) : {};
      const out = (p: Page) => ({ ...p, properties: withPlainText(p.properties) });
      if (req.method === 'GET' && path === `/v1/databases/${state.databaseId}`) return json(200, { object: 'database', id: state.databaseId, title: [] });
      if (req.method === 'POST' && path === '/v1/pages') {
        const now = new Date().toISOString();
        const page: Page = { object: 'page', id: crypto.randomUUID(), created_time: now, last_edited_time: now, archived: false, parent: body.parent, properties: body.properties as Record<string, unknown> };
        state.pages.set(page.id, page);
        return json(200, out(page));
      }
      const pageMatch = /^\/v1\/pages\/([^/]+)$/.exec(path);
      if (pageMatch && req.method === 'PATCH') {
        const page = state.pages.get(pageMatch[1]);
        if (!page) return json(404, { object: 'error', status: 404, code: 'object_not_found', message: 'Could not find page' });
        if (body.properties) Object.assign(page.properties, body.properties);
        if (typeof body.archived === 'boolean') page.archived = body.archived;
        page.last_edited_time = new Date().toISOString();
        return json(200, out(page));
      }
      if (req.method === 'POST' && path === `/v1/databases/${state.databaseId}/query`) {
        const all = [...state.pages.values()].filter((p) => !p.archived && (!body.filter || matches(p, body.filter as Record<string, unknown>)));
        const start = Number(body.start_cursor ?? 0);
        const size = Number(body.page_size ?? 100);
        const slice = all.slice(start, start + size);
        const more = start + size < all.length;
        return json(200, { object: 'list', results: slice.map(out), has_more: more, next_cursor: more ? String(start + size) : null });
      }
      json(404, { object: 'error', status: 404, code: 'object_not_found', message: 'Not found' });
    });
  });
  const { port, close } = await listenLoopback(server);
  state.baseUrl = `http://127.0.0.1:${port}`;
  state.close = close;
  return state;
}
