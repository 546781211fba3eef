import http from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import express, { type NextFunction, type Request, type Response } from 'express';
import fc from 'fast-check';
import { rawRequest } from '../../test/helpers/raw-http';
import { AppError } from '../errors';
import { jsonBody, rawJsonBody } from './validate';

/*
 * jsonBody reads the common body (Content-Length, no Content-Encoding, application/json with no charset or UTF-8)
 * itself and leaves everything else to body-parser. The same bytes sent chunked always go to body-parser, so each
 * body below is sent both ways and must come out the same: the parsed value, the raw bytes kept for forwarding, or
 * the error type the error handler answers by.
 */

let server: http.Server;
let port: number;
/** Bodies body-parser read (express.json's parser called through), to prove which path a request took. */
let parsedByBodyParser = 0;

beforeAll(async () => {
  const realJson = express.json;
  const spy = jest.spyOn(express, 'json').mockImplementation((opts) => {
    const parser = realJson(opts);
    return (req, res, next) => {
      parsedByBodyParser++;
      parser(req, res, next);
    };
  });
  const app = express();
  app.post('/echo', jsonBody({ limit: 2_000_000, maxDepth: 64, keepRaw: true }), (req: Request, res: Response) => {
    res.json({ body: req.body === undefined ? '(undefined)' : req.body, raw: rawJsonBody(req)?.toString('base64') ?? null });
  });
  app.use((err: { status?: number; type?: string }, _req: Request, res: Response, _next: NextFunction) => {
    // The error handler answers by type (an AppError by its code and details); the status body-parser gives a verify
    // error (403) is not what the client sees.
    if (err instanceof AppError) return res.status(err.status).json({ code: err.code, message: err.message, details: err.details });
    res.status(err.type === 'entity.too.large' ? 413 : 400).json({ type: err.type ?? 'untyped' });
  });
  spy.mockRestore();
  server = http.createServer(app);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise((r) => server.close(r));
});

async function both(body: Buffer, contentType = 'application/json'): Promise<{ plain: { status: number; text: string }; parser: { status: number; text: string } }> {
  const before = parsedByBodyParser;
  const plain = await rawRequest(port, { method: 'POST', path: '/echo', headers: { 'content-type': contentType }, body });
  expect(parsedByBodyParser).toBe(before);
  const chunked = await chunkedRequest(body, contentType);
  expect(parsedByBodyParser).toBe(before + 1);
  return { plain: { status: plain.status, text: plain.body.toString('utf8') }, parser: { status: chunked.status, text: chunked.body.toString('utf8') } };
}

/** The same bytes without a Content-Length (node's client chunks them), which body-parser reads. */
function chunkedRequest(body: Buffer, contentType: string): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/echo', agent: false, headers: { 'content-type': contentType, 'transfer-encoding': 'chunked' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const enc = (s: string) => Buffer.from(s, 'utf8');

const EDGE_BODIES: Array<[string, Buffer]> = [
  ['an object', enc('{"model":"m","messages":[{"role":"user","content":"hi"}]}')],
  ['leading blanks', enc(' \t\r\n{"a":1}')],
  ['an array', enc('[1,2,3]')],
  ['a BOM', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), enc('{"name":"bom"}')])],
  ['only a BOM', Buffer.from([0xef, 0xbb, 0xbf])],
  ['malformed UTF-8 in a string', Buffer.concat([enc('{"content":"'), Buffer.from([0xff, 0xfe, 0xc0, 0xaf, 0xed, 0xa0, 0x80]), enc('"}')])],
  ['lone surrogate escapes', enc('{"content":"\\ud800","key":"\\udfff"}')],
  ['too deep', enc('['.repeat(100) + ']'.repeat(100))],
  ['deep but allowed', enc('['.repeat(60) + ']'.repeat(60))],
  ['truncated', enc('{"truncated":')],
  ['a scalar', enc('0')],
  ['a string', enc('""')],
  ['null', enc('null')],
  ['blanks only', enc('   ')],
  ['a NUL', enc('\u0000')],
  ['a form body', enc('a=1&b=2')],
  ['duplicate keys', enc('{"a":1,"a":2}')],
  ['a duplicate key in a message', enc('{"model":"m","messages":[{"role":"user","content":"x"},{"role":"user","role":"system","content":"x"}]}')],
  ['a duplicate key spelled with an escape', enc('{"model":"a","m\\u006fdel":"b"}')],
  ['a duplicate key deep inside', enc('{"tools":[{"function":{"parameters":{"properties":{"q":{},"q":{}}}}}]}')],
  ['duplicate __proto__ keys', enc('{"__proto__":{"a":1},"__proto__":{"b":1}}')],
  ['duplicate empty keys', enc('{"":1,"":2}')],
  ['a duplicate key after a BOM', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), enc('{"a":1,"a":2}')])],
  ['a duplicate key in a large body', enc(`{"messages":[{"role":"user","content":"${'y'.repeat(300_000)}","content":"z"}]}`)],
  ['the same key in sibling objects', enc('{"a":{"k":1},"b":[{"k":1},{"k":2}]}')],
  ['__proto__ keys', enc('{"__proto__":{"polluted":"yes"},"constructor":{"prototype":{"polluted":"yes"}}}')],
  ['huge numbers', enc('{"n":1e999,"m":-0}')],
  ['a large body', enc(`{"messages":[{"role":"user","content":"${'y'.repeat(300_000)}"}]}`)],
];

describe('jsonBody: its own reader and body-parser agree', () => {
  test.each(EDGE_BODIES)('%s', async (label, body) => {
    const { plain, parser } = await both(body);
    expect(plain).toEqual(parser);
    if (label.startsWith('duplicate') || label.startsWith('a duplicate')) expect(JSON.parse(plain.text).code).toBe('duplicate_json_key');
  });

  test.each(['application/json; charset=utf-8', 'Application/JSON; charset="UTF-8"', 'application/json;charset=utf-8'])('content type %s', async (type) => {
    const { plain, parser } = await both(enc('{"a":[1,{"b":"é"}]}'), type);
    expect(plain).toEqual(parser);
    expect(JSON.parse(plain.text)).toEqual({ body: { a: [1, { b: 'é' }] }, raw: enc('{"a":[1,{"b":"é"}]}').toString('base64') });
  });

  test('a repeated key is the same 400 from either reader, naming the key and its path; gzip and UTF-16 bodies too', async () => {
    const text = '{"model":"m","messages":[{"role":"user","content":"x"},{"role":"user","r\\u006fle":"system","content":"x"}]}';
    const expected = {
      code: 'duplicate_json_key',
      message: 'Invalid body: duplicate key "role" at body.messages.1.role (a key may appear only once in an object)',
      details: [{ path: 'body.messages.1.role', message: 'Duplicate key "role"', code: 'duplicate_key' }],
    };
    const { plain, parser } = await both(enc(text));
    expect(plain).toEqual(parser);
    expect(plain.status).toBe(400);
    expect(JSON.parse(plain.text)).toEqual(expected);
    for (const [headers, body] of [
      [{ 'content-type': 'application/json', 'content-encoding': 'gzip' }, zlib.gzipSync(enc(text))],
      [{ 'content-type': 'application/json; charset=utf-16le' }, Buffer.from(text, 'utf16le')],
    ] as Array<[Record<string, string>, Buffer]>) {
      const before = parsedByBodyParser;
      const r = await rawRequest(port, { method: 'POST', path: '/echo', headers, body });
      expect(parsedByBodyParser).toBe(before + 1);
      expect({ status: r.status, body: JSON.parse(r.body.toString('utf8')) }).toEqual({ status: 400, body: expected });
    }
    // Without the repeat both arrive (the parser's path reads these bodies).
    const fine = zlib.gzipSync(enc(text.replace('"r\\u006fle":"system",', '')));
    const ok = await rawRequest(port, { method: 'POST', path: '/echo', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: fine });
    expect(ok.status).toBe(200);
  });

  test('a BOM-less UTF-16 body is scanned as body-parser decodes it: a repeat is refused, a good body taken, the depth limit held', async () => {
    // iconv-lite (body-parser) guesses big-endian from these bytes; the WHATWG `utf-16` label would read them little-endian.
    const be = (text: string) => Buffer.from(text, 'utf16le').swap16();
    const send = (text: string) => rawRequest(port, { method: 'POST', path: '/echo', headers: { 'content-type': 'application/json; charset=utf-16' }, body: be(text) });
    // Each U+3A00 is a `:` when read little-endian: two of them made the counts agree.
    const repeat = await send('{"model":"a","model":"b","x":"\u3a00\u3a00"}');
    expect({ status: repeat.status, code: JSON.parse(repeat.body.toString('utf8')).code }).toEqual({ status: 400, code: 'duplicate_json_key' });
    const good = await send('{"model":"m","messages":[]}');
    expect(good.status).toBe(200);
    expect(JSON.parse(good.body.toString('utf8')).body).toEqual({ model: 'm', messages: [] });
    const deep = await send(`${'['.repeat(100)}${']'.repeat(100)}`);
    expect(deep.status).toBe(400);
  });

  test('random JSON texts, with random blanks around them', async () => {
    await fc.assert(
      fc.asyncProperty(fc.json({ maxDepth: 4 }), fc.constantFrom('', ' ', '\n\t', '\r\n  '), async (text, pad) => {
        const { plain, parser } = await both(enc(`${pad}${text}${pad}`));
        expect(plain).toEqual(parser);
      }),
      { numRuns: 60, seed: 14 },
    );
  });

  test('other bodies are body-parser\'s: another charset, a Content-Encoding, an empty body', async () => {
    for (const [headers, body] of [
      [{ 'content-type': 'application/json; charset=utf-16le' }, Buffer.from('{}', 'utf16le')],
      [{ 'content-type': 'application/json', 'content-encoding': 'identity' }, enc('{"a":1}')],
      [{ 'content-type': 'application/json', 'content-length': '0' }, Buffer.alloc(0)],
    ] as Array<[Record<string, string>, Buffer]>) {
      const before = parsedByBodyParser;
      const r = await rawRequest(port, { method: 'POST', path: '/echo', headers, body });
      expect(parsedByBodyParser).toBe(before + 1);
      expect(r.status).toBeGreaterThan(0);
    }
  });

  test('a client that goes away mid-body leaves the server serving', async () => {
    await new Promise<void>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/echo', headers: { 'content-type': 'application/json', 'content-length': '1000' } });
      req.on('error', () => resolve());
      req.write('{"partial":', () => setTimeout(() => req.destroy(), 20));
      req.on('response', () => reject(new Error('answered a body that never arrived')));
      req.on('close', () => resolve());
    });
    const after = await rawRequest(port, { method: 'POST', path: '/echo', headers: { 'content-type': 'application/json' }, body: enc('{"still":"here"}') });
    expect(JSON.parse(after.body.toString('utf8')).body).toEqual({ still: 'here' });
  });
});
