import fs from 'node:fs';
import http from 'node:http';
import Ajv, { type ValidateFunction } from 'ajv';
import { listenLoopback } from './loopback';

/**
 * A fake Qdrant on 127.0.0.1 speaking the REST calls @qdrant/js-client-rest makes for Engram
 * (collections, aliases, payload indexes, points upsert/delete/query/count/scroll, readyz).
 * Every request body is validated against Qdrant's own OpenAPI document
 * (/work/shared/reference/qdrant-openapi.json, components.schemas) and so is every JSON answer;
 * a mismatch is recorded in `schemaErrors` (tests assert it stays empty) and answered 400 as Qdrant does.
 */

const OPENAPI_PATH = process.env.QDRANT_OPENAPI_PATH ?? '/work/shared/reference/qdrant-openapi.json';

type Json = Record<string, unknown>;
type PointId = string | number;

interface Point {
  id: PointId;
  vector: number[];
  payload: Json;
}

interface Collection {
  size: number;
  distance: string;
  config: Json;
  points: Map<string, Point>;
  indexes: Map<string, unknown>;
}

export interface RecordedQdrantRequest {
  method: string;
  path: string;
  apiKey: string | undefined;
  body: unknown;
  /** Time the fake spent computing the answer (ms; benches subtract it to see the client's overhead). */
  serverMs?: number;
}

export interface FakeQdrant {
  url: string;
  port: number;
  requests: RecordedQdrantRequest[];
  /** Bodies (sent or received) that did not match Qdrant's OpenAPI schemas. */
  schemaErrors: string[];
  collections: Map<string, Collection>;
  aliases: Map<string, string>;
  /** 'up' answers; 'down' answers 503 to everything; 'hang' never answers. */
  mode: 'up' | 'down' | 'hang';
  /** Milliseconds to wait before answering every request. */
  delayMs: number;
  /** Called before each answer (test hooks: e.g. pause a query until something happened). */
  beforeAnswer: ((req: RecordedQdrantRequest) => Promise<void>) | null;
  points(collectionOrAlias: string): Point[];
  /** Requests held open by 'hang' mode that the client has not cancelled yet. */
  hangingCount(): number;
  close(): Promise<void>;
}

/** OpenAPI 3.0 → JSON schema: a bare `{nullable: true}` means "null". */
function toJsonSchema(n: unknown): unknown {
  if (Array.isArray(n)) return n.map(toJsonSchema);
  if (n && typeof n === 'object') {
    const o: Json = {};
    for (const [k, v] of Object.entries(n as Json)) o[k] = toJsonSchema(v);
    if (o.nullable === true && o.type === undefined && !o.$ref && !o.anyOf && !o.oneOf && !o.allOf) {
      delete o.nullable;
      o.type = 'null';
    }
    return o;
  }
  return n;
}

let ajvSingleton: { ajv: Ajv; doc: Json } | null = null;

function schemas(): { ajv: Ajv; doc: Json } {
  if (ajvSingleton) return ajvSingleton;
  const doc = JSON.parse(fs.readFileSync(OPENAPI_PATH, 'utf8')) as Json;
  const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: true });
  ajv.addSchema({ components: toJsonSchema(doc.components) as Json, paths: toJsonSchema(doc.paths) as Json }, 'qdrant');
  ajvSingleton = { ajv, doc };
  return ajvSingleton;
}

const jsonPointer = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

/** The validator of a named component schema. */
export function qdrantSchema(name: string): ValidateFunction {
  const v = schemas().ajv.getSchema(`qdrant#/components/schemas/${name}`);
  if (!v) throw new Error(`no schema ${name} in Qdrant's OpenAPI document`);
  return v;
}

/** The validator of an operation's 200 JSON answer. */
function responseSchema(pathTemplate: string, method: string): ValidateFunction | null {
  const { ajv, doc } = schemas();
  const op = ((doc.paths as Json)[pathTemplate] as Json | undefined)?.[method.toLowerCase()] as Json | undefined;
  const has = (op?.responses as Json | undefined)?.['200'] as Json | undefined;
  if (!has || !(has.content as Json | undefined)?.['application/json']) return null;
  return ajv.getSchema(`qdrant#/paths/${jsonPointer(pathTemplate)}/${method.toLowerCase()}/responses/200/content/application~1json/schema`) ?? null;
}

function idKey(id: PointId): string {
  return typeof id === 'number' ? `n:${id}` : `s:${id.toLowerCase()}`;
}

function cosine(a: number[], b: number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}

function getPath(payload: Json, key: string): unknown {
  let cur: unknown = payload;
  for (const part of key.split('.')) {
    if (!cur || typeof cur !== 'object') return undefined;
    cur = (cur as Json)[part];
  }
  return cur;
}

/** Qdrant's filter semantics for the conditions Engram uses (match, range, is_null, is_empty, has_id, nested filters). */
export function matchesFilter(p: Point, f: Json | null | undefined): boolean {
  if (!f) return true;
  const list = (v: unknown): Json[] => (v === undefined || v === null ? [] : Array.isArray(v) ? (v as Json[]) : [v as Json]);
  const must = list(f.must);
  const should = list(f.should);
  const mustNot = list(f.must_not);
  if (!must.every((c) => matchesCondition(p, c))) return false;
  if (should.length && !should.some((c) => matchesCondition(p, c))) return false;
  if (mustNot.some((c) => matchesCondition(p, c))) return false;
  return true;
}

function matchesCondition(p: Point, c: Json): boolean {
  if ('must' in c || 'should' in c || 'must_not' in c) return matchesFilter(p, c);
  if ('has_id' in c) return (c.has_id as PointId[]).some((id) => idKey(id) === idKey(p.id));
  if ('is_null' in c) {
    const v = getPath(p.payload, (c.is_null as Json).key as string);
    return v === null;
  }
  if ('is_empty' in c) {
    const v = getPath(p.payload, (c.is_empty as Json).key as string);
    return v === undefined || v === null || (Array.isArray(v) && v.length === 0);
  }
  const key = c.key as string;
  // A key the point does not have simply does not match (Qdrant accepts filters on any key).
  const v = getPath(p.payload, key);
  const values = Array.isArray(v) ? v : [v];
  if (c.match) {
    const m = c.match as Json;
    if ('value' in m) return values.some((x) => x === m.value);
    if ('any' in m) return values.some((x) => (m.any as unknown[]).includes(x));
    if ('except' in m) return values.every((x) => !(m.except as unknown[]).includes(x));
    return false;
  }
  if (c.range) {
    const r = c.range as { lt?: number | null; lte?: number | null; gt?: number | null; gte?: number | null };
    return values.some((x) => {
      if (typeof x !== 'number') return false;
      if (r.lt != null && !(x < r.lt)) return false;
      if (r.lte != null && !(x <= r.lte)) return false;
      if (r.gt != null && !(x > r.gt)) return false;
      if (r.gte != null && !(x >= r.gte)) return false;
      return true;
    });
  }
  return false;
}

interface Route {
  method: string;
  template: string;
  re: RegExp;
  body?: string;
}

const ROUTES: Route[] = [
  { method: 'GET', template: '/readyz', re: /^\/readyz$/ },
  { method: 'GET', template: '/aliases', re: /^\/aliases$/ },
  { method: 'POST', template: '/collections/aliases', re: /^\/collections\/aliases$/, body: 'ChangeAliasesOperation' },
  { method: 'GET', template: '/collections', re: /^\/collections$/ },
  { method: 'GET', template: '/collections/{collection_name}/exists', re: /^\/collections\/([^/]+)\/exists$/ },
  { method: 'GET', template: '/collections/{collection_name}/aliases', re: /^\/collections\/([^/]+)\/aliases$/ },
  { method: 'PUT', template: '/collections/{collection_name}/index', re: /^\/collections\/([^/]+)\/index$/, body: 'CreateFieldIndex' },
  { method: 'PUT', template: '/collections/{collection_name}/points', re: /^\/collections\/([^/]+)\/points$/, body: 'PointInsertOperations' },
  { method: 'POST', template: '/collections/{collection_name}/points/delete', re: /^\/collections\/([^/]+)\/points\/delete$/, body: 'PointsSelector' },
  { method: 'POST', template: '/collections/{collection_name}/points/query', re: /^\/collections\/([^/]+)\/points\/query$/, body: 'QueryRequest' },
  { method: 'POST', template: '/collections/{collection_name}/points/count', re: /^\/collections\/([^/]+)\/points\/count$/, body: 'CountRequest' },
  { method: 'POST', template: '/collections/{collection_name}/points/scroll', re: /^\/collections\/([^/]+)\/points\/scroll$/, body: 'ScrollRequest' },
  { method: 'GET', template: '/collections/{collection_name}', re: /^\/collections\/([^/]+)$/ },
  { method: 'PUT', template: '/collections/{collection_name}', re: /^\/collections\/([^/]+)$/, body: 'CreateCollection' },
  { method: 'DELETE', template: '/collections/{collection_name}', re: /^\/collections\/([^/]+)$/ },
];

class QdrantHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** `validate: false` skips the schema checks (benches measure the client, not ajv); tests always validate. */
export async function startFakeQdrant(opts: { apiKey?: string; validate?: boolean } = {}): Promise<FakeQdrant> {
  const validating = opts.validate !== false;
  // Compile every validator up front, so the first requests are not slowed by schema compilation.
  for (const r of ROUTES) {
    if (r.body) qdrantSchema(r.body);
    responseSchema(r.template, r.method);
  }
  const collections = new Map<string, Collection>();
  const aliases = new Map<string, string>();
  const requests: RecordedQdrantRequest[] = [];
  const schemaErrors: string[] = [];
  const hanging = new Set<http.ServerResponse>();

  const resolve = (name: string): Collection => {
    const c = collections.get(name) ?? collections.get(aliases.get(name) ?? '');
    if (!c) throw new QdrantHttpError(404, `Not found: Collection \`${name}\` doesn't exist!`);
    return c;
  };

  const info = (c: Collection): Json => ({
    status: 'green',
    optimizer_status: 'ok',
    indexed_vectors_count: c.points.size,
    points_count: c.points.size,
    segments_count: 1,
    config: c.config,
    payload_schema: Object.fromEntries([...c.indexes.entries()].map(([k, v]) => [k, { data_type: typeof v === 'string' ? v : ((v as Json).type as string), params: typeof v === 'object' ? v : undefined, points: c.points.size }])),
  });

  const upd = () => ({ operation_id: Math.floor(Math.random() * 1e6), status: 'completed' });

  const handlers = (r: Route, name: string, body: Json): unknown => {
    switch (`${r.method} ${r.template}`) {
      case 'GET /aliases':
        return { aliases: [...aliases.entries()].map(([alias_name, collection_name]) => ({ alias_name, collection_name })) };
      case 'GET /collections':
        return { collections: [...collections.keys()].map((n) => ({ name: n })) };
      case 'POST /collections/aliases': {
        // Atomic: validate every action on a copy, then commit.
        const next = new Map(aliases);
        for (const a of body.actions as Json[]) {
          if (a.create_alias) {
            const { collection_name, alias_name } = a.create_alias as { collection_name: string; alias_name: string };
            if (!collections.has(collection_name)) throw new QdrantHttpError(404, `Not found: Collection \`${collection_name}\` doesn't exist!`);
            if (collections.has(alias_name)) throw new QdrantHttpError(400, `Wrong input: Collection \`${alias_name}\` already exists!`);
            if (next.has(alias_name)) throw new QdrantHttpError(409, `Wrong input: Alias \`${alias_name}\` already exists!`);
            next.set(alias_name, collection_name);
          } else if (a.delete_alias) {
            const { alias_name } = a.delete_alias as { alias_name: string };
            if (!next.delete(alias_name)) throw new QdrantHttpError(404, `Not found: Alias \`${alias_name}\` doesn't exist!`);
          } else if (a.rename_alias) {
            const { old_alias_name, new_alias_name } = a.rename_alias as { old_alias_name: string; new_alias_name: string };
            const target = next.get(old_alias_name);
            if (!target) throw new QdrantHttpError(404, `Not found: Alias \`${old_alias_name}\` doesn't exist!`);
            next.delete(old_alias_name);
            next.set(new_alias_name, target);
          }
        }
        aliases.clear();
        for (const [k, v] of next) aliases.set(k, v);
        return true;
      }
      case 'GET /collections/{collection_name}/exists':
        return { exists: collections.has(name) };
      case 'GET /collections/{collection_name}/aliases': {
        resolve(name);
        return { aliases: [...aliases.entries()].filter(([, c]) => c === name).map(([alias_name, collection_name]) => ({ alias_name, collection_name })) };
      }
      case 'GET /collections/{collection_name}':
        return info(resolve(name));
      case 'PUT /collections/{collection_name}': {
        if (collections.has(name) || aliases.has(name)) throw new QdrantHttpError(409, `Wrong input: Collection \`${name}\` already exists!`);
        const vectors = body.vectors as { size?: number; distance?: string };
        if (typeof vectors?.size !== 'number') throw new QdrantHttpError(400, 'Wrong input: only the unnamed vector form is supported by this fake');
        collections.set(name, {
          size: vectors.size,
          distance: vectors.distance ?? 'Cosine',
          points: new Map(),
          indexes: new Map(),
          config: {
            params: { vectors: { size: vectors.size, distance: vectors.distance }, shard_number: 1, replication_factor: 1, write_consistency_factor: 1, on_disk_payload: true },
            hnsw_config: { m: 16, ef_construct: 100, full_scan_threshold: 10000, max_indexing_threads: 0, on_disk: false },
            optimizer_config: { deleted_threshold: 0.2, vacuum_min_vector_number: 1000, default_segment_number: 0, max_segment_size: null, memmap_threshold: null, indexing_threshold: 20000, flush_interval_sec: 5, max_optimization_threads: null },
            wal_config: { wal_capacity_mb: 32, wal_segments_ahead: 0 },
            quantization_config: body.quantization_config ?? null,
          },
        });
        return true;
      }
      case 'DELETE /collections/{collection_name}': {
        const existed = collections.delete(name);
        for (const [a, c] of [...aliases]) if (c === name) aliases.delete(a);
        return existed;
      }
      case 'PUT /collections/{collection_name}/index': {
        const c = resolve(name);
        c.indexes.set(body.field_name as string, body.field_schema);
        return upd();
      }
      case 'PUT /collections/{collection_name}/points': {
        const c = resolve(name);
        const pts = (body.points as { id: PointId; vector: number[]; payload?: Json }[] | undefined) ?? [];
        for (const p of pts) {
          if (!Array.isArray(p.vector) || p.vector.length !== c.size) {
            throw new QdrantHttpError(400, `Wrong input: Vector dimension error: expected dim: ${c.size}, got ${Array.isArray(p.vector) ? p.vector.length : 'named'}`);
          }
        }
        for (const p of pts) c.points.set(idKey(p.id), { id: p.id, vector: p.vector, payload: p.payload ?? {} });
        return upd();
      }
      case 'POST /collections/{collection_name}/points/delete': {
        const c = resolve(name);
        if (Array.isArray(body.points)) for (const id of body.points as PointId[]) c.points.delete(idKey(id));
        else if (body.filter) for (const [k, p] of [...c.points]) if (matchesFilter(p, body.filter as Json)) c.points.delete(k);
        return upd();
      }
      case 'POST /collections/{collection_name}/points/count': {
        const c = resolve(name);
        return { count: [...c.points.values()].filter((p) => matchesFilter(p, body.filter as Json)).length };
      }
      case 'POST /collections/{collection_name}/points/scroll': {
        const c = resolve(name);
        const all = [...c.points.values()].filter((p) => matchesFilter(p, body.filter as Json)).sort((a, b) => String(a.id).localeCompare(String(b.id)));
        const start = body.offset === undefined || body.offset === null ? 0 : all.findIndex((p) => idKey(p.id) === idKey(body.offset as PointId));
        const limit = (body.limit as number | undefined) ?? 10;
        const page = all.slice(Math.max(0, start), Math.max(0, start) + limit);
        const next = all[Math.max(0, start) + limit];
        return {
          points: page.map((p) => ({ id: p.id, payload: body.with_payload === false ? null : p.payload })),
          next_page_offset: next ? next.id : null,
        };
      }
      case 'POST /collections/{collection_name}/points/query': {
        const c = resolve(name);
        const q = body.query as number[] | undefined;
        if (!Array.isArray(q)) throw new QdrantHttpError(400, 'Wrong input: this fake answers nearest-vector queries only');
        if (q.length !== c.size) throw new QdrantHttpError(400, `Wrong input: Vector dimension error: expected dim: ${c.size}, got ${q.length}`);
        const limit = (body.limit as number | undefined) ?? 10;
        const scored = [...c.points.values()]
          .filter((p) => matchesFilter(p, body.filter as Json))
          .map((p) => ({ p, score: cosine(q, p.vector) }))
          .filter((x) => body.score_threshold === undefined || body.score_threshold === null || x.score >= (body.score_threshold as number))
          .sort((a, b) => b.score - a.score)
          .slice(0, limit);
        return { points: scored.map(({ p, score }) => ({ id: p.id, version: 1, score, payload: body.with_payload ? p.payload : null })) };
      }
      default:
        throw new QdrantHttpError(404, 'unknown route');
    }
  };

  const fake: FakeQdrant = {
    url: '',
    port: 0,
    requests,
    schemaErrors,
    collections,
    aliases,
    mode: 'up',
    delayMs: 0,
    beforeAnswer: null,
    points: (n) => [...(collections.get(n) ?? collections.get(aliases.get(n) ?? ''))?.points.values() ?? []],
    hangingCount: () => hanging.size,
    close: async () => undefined,
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('error', () => undefined);
    res.on('error', () => undefined);
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const url = new URL(req.url ?? '/', 'http://127.0.0.1');
        const raw = Buffer.concat(chunks).toString('utf8');
        let body: unknown = undefined;
        let badJson = false;
        if (raw.length) {
          try {
            body = JSON.parse(raw);
          } catch {
            badJson = true;
          }
        }
        const apiKey = typeof req.headers['api-key'] === 'string' ? req.headers['api-key'] : undefined;
        const rec: RecordedQdrantRequest = { method: req.method ?? '', path: url.pathname, apiKey, body };
        requests.push(rec);
        const send = (status: number, payload: unknown, text = false) => {
          if (res.destroyed) return;
          const s = text ? String(payload) : JSON.stringify(payload);
          res.writeHead(status, { 'content-type': text ? 'text/plain' : 'application/json', 'content-length': Buffer.byteLength(s) });
          res.end(s);
        };
        const error = (status: number, message: string) => send(status, { status: { error: message }, time: 0 });
        if (fake.mode === 'hang') {
          hanging.add(res);
          res.on('close', () => hanging.delete(res));
          return;
        }
        if (fake.delayMs > 0) await new Promise((r) => setTimeout(r, fake.delayMs));
        if (fake.beforeAnswer) await fake.beforeAnswer(rec);
        if (fake.mode === 'down') return error(503, 'Service Unavailable');
        if (opts.apiKey !== undefined && apiKey !== opts.apiKey) return error(401, 'Must provide an API key or an Authorization bearer token');
        const route = ROUTES.find((r) => r.method === req.method && r.re.test(url.pathname));
        if (!route) return error(404, `no route ${req.method} ${url.pathname}`);
        if (route.template === '/readyz') return send(200, 'all shards are ready', true);
        if (badJson) return error(400, 'Format error in JSON body: invalid JSON');
        if (route.body && validating) {
          const validate = qdrantSchema(route.body);
          if (!validate(body)) {
            const msg = `${req.method} ${route.template}: request body does not match ${route.body}: ${JSON.stringify(validate.errors?.slice(0, 5))}`;
            schemaErrors.push(msg);
            return error(400, `Format error in JSON body: ${msg}`);
          }
        }
        const name = decodeURIComponent(route.re.exec(url.pathname)?.[1] ?? '');
        const started = process.hrtime.bigint();
        try {
          const result = handlers(route, name, (body ?? {}) as Json);
          const answer = { usage: null, time: Number(process.hrtime.bigint() - started) / 1e9, status: 'ok', result };
          rec.serverMs = answer.time * 1000;
          const check = validating ? responseSchema(route.template, route.method) : null;
          if (check && !check(answer)) schemaErrors.push(`${req.method} ${route.template}: answer does not match Qdrant's schema: ${JSON.stringify(check.errors?.slice(0, 5))}`);
          send(200, answer);
        } catch (err) {
          if (err instanceof QdrantHttpError) return error(err.status, err.message);
          schemaErrors.push(`fake crashed on ${req.method} ${url.pathname}: ${(err as Error).message}`);
          error(500, (err as Error).message);
        }
      })();
    });
  });
  server.on('clientError', (_e, socket) => socket.destroy());
  const listening = await listenLoopback(server);
  fake.port = listening.port;
  fake.url = `http://127.0.0.1:${listening.port}`;
  fake.close = async () => {
    for (const r of hanging) r.destroy();
    await listening.close();
  };
  return fake;
}
