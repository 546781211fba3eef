import { isUtf8 as isUtf8Text } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import iconv from 'iconv-lite';
import type { z } from 'zod';
import { AppError, validationError } from '../errors';
import { countOwnKeys, findDuplicateKey, scanJson } from './json-scan';
import { attachRouteMeta, type RequestSchemas, type RouteDoc } from './route-doc';
import { sendError } from './error-handler';

/**
 * The route pattern a request matched, as declared (`/api/memory/:id`), or null before/without a match.
 * Mount paths are literal and lower case and routing ignores case, so the matched prefix is lower-cased:
 * a client can never mint a new value (metrics labels use this).
 */
export function routePattern(req: Request): string | null {
  const path = (req.route as { path?: unknown } | undefined)?.path;
  return typeof path === 'string' ? `${req.baseUrl.toLowerCase()}${path}` : null;
}

type Schemas = RequestSchemas;
type Out<S, K extends keyof Schemas> = S extends Record<K, infer T> ? (T extends z.ZodType ? z.infer<T> : undefined) : undefined;
export type Input<S extends Schemas> = { body: Out<S, 'body'>; query: Out<S, 'query'>; params: Out<S, 'params'> };

/**
 * The one validation middleware: a route with a body schema takes JSON only (a body of any other
 * type, or of none declared, is a 415 before anything is read: a form or text body must not be
 * parsed into something that validates); then parses body/query/params with zod (400 with the zod paths on
 * failure, before anything changes), then calls the handler with typed input. A returned value
 * is sent as JSON; handlers that stream or set a status themselves return undefined. The schemas
 * (and the optional doc) ride on the handler: GET /openapi.json is generated from exactly them.
 */
export function handle<S extends Schemas>(
  schemas: S,
  fn: (input: Input<S>, req: Request, res: Response) => unknown | Promise<unknown>,
  doc: RouteDoc = {},
): RequestHandler {
  return attachRouteMeta(async (req: Request, res: Response, next: NextFunction) => {
    // Now, while the router's baseUrl is this route's: an error passed to next() unwinds it.
    res.locals.routePattern = routePattern(req);
    try {
      // req.is: null without a body, false for a body that is not JSON. An empty body (Content-Length: 0, as many
      // clients send on a bare POST) is no body either: validated as {}.
      if (schemas.body && req.headers['content-length'] !== '0' && !isPlainJsonRequest(req) && req.is('application/json') === false) {
        throw new AppError(415, 'unsupported_media_type', 'The request body must be JSON (Content-Type: application/json)');
      }
      const input: Record<string, unknown> = {};
      for (const where of ['params', 'query', 'body'] as const) {
        const schema = schemas[where];
        if (!schema) continue;
        const raw = where === 'body' ? (req.body ?? {}) : req[where];
        const r = schema.safeParse(raw);
        if (!r.success) throw validationError(r.error, where);
        input[where] = r.data;
      }
      const out = await fn(input as Input<S>, req, res);
      if (out !== undefined && !res.headersSent) res.json(out);
    } catch (err) {
      next(err);
    }
  }, { schemas, doc });
}

/**
 * express.json with a nesting limit checked on the raw bytes before JSON.parse: a 10,000-deep
 * body is a 400 (`json_too_deep`) instead of a stack overflow later (JSON.stringify, zod, the upstream call).
 * An object that repeats a key is a 400 too (`duplicate_json_key`, naming the key and its path): JSON.parse keeps
 * the last, the upstream a forwarded body goes to may keep the first (json-scan.ts).
 * The common body (a Content-Length, no Content-Encoding, `application/json` with no charset or UTF-8) is read by
 * readPlainJson, everything else by body-parser: the same outcome either way (see readPlainJson).
 */
export function jsonBody(opts: { limit: number; maxDepth: number; keepRaw?: boolean }): RequestHandler {
  const bounded = refuseOversizedBody(opts.limit, ['application/json']);
  const parse = jsonParser(opts);
  const plain = readPlainJson(opts);
  const parsed = (req: Request, next: NextFunction) => (err?: unknown) => next(err ?? repeatedKeyError(req));
  return (req, res, next) =>
    bounded(req, res, (err?: unknown) => (err ? next(err) : res.headersSent ? undefined : plain(req, res, next) ? undefined : parse(req, res, parsed(req, next))));
}

/** `application/json`, alone or with a UTF-8 charset, as clients send it; any other spelling goes to body-parser. */
const PLAIN_JSON_TYPE = /^application\/json(?:;[ \t]*charset=(?:utf-8|"utf-8"))?$/i;
const DECIMAL = /^[0-9]{1,15}$/;

/**
 * Whether a request carries a body (a Content-Length or Transfer-Encoding, as type-is decides) typed the way nearly
 * every client types JSON (PLAIN_JSON_TYPE): then `req.is('application/json')` would answer 'application/json'. False
 * means "ask type-is", never "not JSON". type-is parses and normalises the type first: ~5 µs per chat under load
 * and ~20 µs for a lone one, asked twice per chat (bench/README.md, "Sixteenth pass").
 */
export function isPlainJsonRequest(req: IncomingMessage): boolean {
  const h = req.headers;
  const type = h['content-type'];
  if (type === undefined || !PLAIN_JSON_TYPE.test(type)) return false;
  const length = h['content-length'];
  return length !== undefined ? DECIMAL.test(length) : h['transfer-encoding'] !== undefined;
}

/** An error as body-parser (http-errors) makes it: the error handler answers by its `type`. */
function bodyError(status: number, type: string, message: string): Error {
  return Object.assign(new Error(message), { status, statusCode: status, expose: true, type });
}

/**
 * The JSON body of a request, read without body-parser when it has the shape nearly every client sends: a
 * Content-Length (already checked against the limit by refuseOversizedBody), no Content-Encoding, and a type of
 * `application/json` with no charset or UTF-8. Returns false, reading nothing, for any other request: body-parser
 * reads it (chunked, compressed, other charsets, an empty body). What body-parser does for these bodies, done
 * directly: the bytes are collected (node's parser stops at Content-Length), checked as its `verify` checks them
 * (depth, the raw bytes kept), decoded as UTF-8 with a leading BOM dropped, refused unless the first non-blank
 * character opens an object or an array (its strict mode), and parsed; the errors carry body-parser's `type`
 * (`entity.too.deep`, `entity.parse.failed`, `request.aborted`), so the error handler answers them alike; a repeated key is
 * the same AppError either way (jsonBody checks body-parser's value after it). body-parser
 * costs a content-type parse, a charset lookup, raw-body's stream bookkeeping and an iconv decoder per request: with it
 * the body took 0.24 of the 0.77 ms a warm chat spent in the api before the upstream call, 0.18 without (bench/README.md, "Eighth pass").
 */
function readPlainJson(opts: { maxDepth: number; keepRaw?: boolean }): (req: Request, res: Response, next: NextFunction) => boolean {
  return (req, _res, next) => {
    const h = req.headers;
    const declared = h['content-length'];
    // The plain type with a declared length (isPlainJsonRequest's own rule), and nothing to decode.
    if (h['content-encoding'] !== undefined || declared === undefined || !isPlainJsonRequest(req)) return false;
    const length = Number(declared);
    // Empty, already being read by someone, or a request node already destroyed (the client left while something was
    // awaited before this parser; body-parser then calls next() without a body): body-parser's rules.
    if (length === 0 || req.readableFlowing !== null || req.readableEnded || req.destroyed) return false;
    const chunks: Buffer[] = [];
    let received = 0;
    let settled = false;
    const settle = (err?: unknown): void => {
      if (settled) return;
      settled = true;
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      next(err);
    };
    const onData = (chunk: Buffer): void => {
      received += chunk.length;
      chunks.push(chunk);
    };
    const onError = (err: Error): void => settle(bodyError(400, 'request.aborted', err.message || 'request aborted'));
    // Closed before its end: the client went away mid-body (express would answer no one either).
    const onClose = (): void => settle(bodyError(400, 'request.aborted', 'request aborted'));
    const onEnd = (): void => {
      if (received !== length) return settle(bodyError(400, 'request.size.invalid', 'request size did not match content length'));
      const buf = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, received);
      try {
        req.body = parseJsonBytes(req, buf, opts);
      } catch (err) {
        return settle(err);
      }
      settle();
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
    return true;
  };
}

const SYNTAX_ERROR = (message: string): Error => bodyError(400, 'entity.parse.failed', message);

/** A UTF-8 JSON body's value, as jsonParser (body-parser with its verify) makes it from the same bytes; throws its errors. */
function parseJsonBytes(req: Request, utf8: Buffer, opts: { maxDepth: number; keepRaw?: boolean }): unknown {
  const members = scanJson(utf8, opts.maxDepth);
  if (members < 0) throw tooDeep(opts.maxDepth);
  const bom = utf8.length >= 3 && utf8[0] === 0xef && utf8[1] === 0xbb && utf8[2] === 0xbf;
  if (opts.keepRaw && !bom && isUtf8Text(utf8)) (req as RawBodyCarrier)[RAW_BODY] = utf8;
  // iconv-lite's UTF-8 decoder (body-parser's) drops a BOM; malformed bytes read as U+FFFD either way.
  const text = bom ? utf8.toString('utf8', 3) : utf8.toString('utf8');
  // body-parser's strict mode: an empty text is {}, anything but an object or array is a syntax error.
  if (text.length === 0) return {};
  const first = FIRST_NON_BLANK.exec(text)?.[1] || undefined;
  if (first !== '{' && first !== '[') throw SYNTAX_ERROR(first === undefined ? 'Unexpected end of JSON input' : `Unexpected token '${first}', JSON must be an object or an array`);
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (err) {
    throw SYNTAX_ERROR((err as Error).message);
  }
  if (countOwnKeys(value) !== members) throw duplicateKeyError(text);
  return value;
}

const tooDeep = (max: number): Error => bodyError(400, 'entity.too.deep', `JSON nested deeper than ${max} levels`);

/** The 400 for a body in which an object repeats a key, naming the first such key with its path as a zod issue would. */
function duplicateKeyError(text: string): AppError {
  const dup = findDuplicateKey(text);
  const path = ['body', ...(dup?.path ?? []).map(String)].join('.');
  const key = dup ? JSON.stringify(dup.key) : 'a key';
  return new AppError(400, 'duplicate_json_key', `Invalid body: duplicate key ${key} at ${path} (a key may appear only once in an object)`, [
    { path, message: `Duplicate key ${key}`, code: 'duplicate_key' },
  ]);
}

/** After body-parser: the duplicate-key check parseJsonBytes makes, from what jsonParser's verify counted (nothing if it did not run). */
function repeatedKeyError(req: Request): AppError | undefined {
  const scanned = (req as ScannedCarrier)[SCANNED];
  if (!scanned) return undefined;
  (req as ScannedCarrier)[SCANNED] = undefined;
  return countOwnKeys(req.body) === scanned.members ? undefined : duplicateKeyError(scanned.utf8.toString('utf8'));
}

const FIRST_NON_BLANK = /^[\x20\x09\x0a\x0d]*([^\x20\x09\x0a\x0d]|$)/;

function tooLarge(res: Response): void {
  // The rest of the body is never read: the connection goes once this answer is written.
  res.setHeader('connection', 'close');
  sendError(res, 413, 'payload_too_large', 'Request body is too large');
}

/**
 * Refuses a body over `limit` without reading it. body-parser's own limit keeps no more than `limit`
 * bytes but reads (and drops) the whole body before it answers 413, so a client could make the server
 * read any amount — before authentication on /admin/login. Here a declared Content-Length over the limit
 * is answered at once; a chunked body of one of `types` (the ones the parser after this reads) is
 * counted as it arrives and answered the moment it passes the limit. Either way with `Connection: close`.
 */
export function refuseOversizedBody(limit: number, types: string[]): RequestHandler {
  const json = types.includes('application/json');
  return (req, res, next) => {
    // Other bodies are not this parser's: a route that streams its own (the import upload) has its own limit.
    if (!(json && isPlainJsonRequest(req)) && !req.is(types)) return next();
    const declared = req.headers['content-length'];
    if (declared !== undefined) {
      if (Number(declared) > limit) return tooLarge(res);
      return next();
    }
    // Only when the next parser will read the stream anyway: counting puts it in flowing mode.
    if (req.headers['transfer-encoding'] !== undefined) {
      let seen = 0;
      const count = (chunk: Buffer) => {
        seen += chunk.length;
        if (seen <= limit) return;
        req.off('data', count);
        if (!res.headersSent) tooLarge(res);
        // Stop reading: what follows is discarded with the connection.
        req.pause();
        req.socket.destroySoon();
      };
      req.on('data', count);
    }
    next();
  };
}

function jsonParser(opts: { limit: number; maxDepth: number; keepRaw?: boolean }): RequestHandler {
  return express.json({
    limit: opts.limit,
    verify: (req, _res, buf, encoding) => {
      const isUtf8 = /^utf-?8$/i.test(encoding);
      // Decoded as body-parser decodes what it parses (iconv-lite): the WHATWG decoder reads a BOM-less `utf-16` as
      // little-endian where iconv-lite guesses from the bytes, so the scan would count another text than was parsed.
      const utf8 = isUtf8 ? buf : Buffer.from(iconv.decode(buf, encoding), 'utf8');
      const members = scanJson(utf8, opts.maxDepth);
      if (members < 0) throw tooDeep(opts.maxDepth);
      (req as ScannedCarrier)[SCANNED] = { members, utf8 };
      if (opts.keepRaw) {
        // Forwarded only when the bytes say what was parsed: body-parser drops a UTF-8 BOM (a strict upstream
        // JSON parser refuses one) and reads malformed UTF-8 as U+FFFD (the upstream would get bytes other than
        // the text Engram validated and extracts from). Either way the parsed body is re-encoded instead.
        const bom = isUtf8 && utf8.length >= 3 && utf8[0] === 0xef && utf8[1] === 0xbb && utf8[2] === 0xbf;
        if (!bom && isUtf8Text(utf8)) (req as RawBodyCarrier)[RAW_BODY] = utf8;
      }
    },
  });
}

const RAW_BODY = Symbol('engram.rawJsonBody');
type RawBodyCarrier = { [RAW_BODY]?: Buffer };
/** What jsonParser's verify counted in the bytes body-parser then parses, kept until the parsed value is checked. */
const SCANNED = Symbol('engram.scannedJsonBody');
type ScannedCarrier = { [SCANNED]?: { members: number; utf8: Buffer } | undefined };

/**
 * The UTF-8 bytes of a JSON body exactly as received (parsed by a `jsonBody({ keepRaw: true })`), or null.
 * The chat proxy forwards these when it does not change the body: no re-serialisation, and the upstream
 * sees the client's bytes (number spelling, escapes, key order) untouched.
 */
export function rawJsonBody(req: Request): Buffer | null {
  return (req as unknown as RawBodyCarrier)[RAW_BODY] ?? null;
}
