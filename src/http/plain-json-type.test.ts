import type { IncomingMessage } from 'node:http';
import express from 'express';
import fc from 'fast-check';
import { isPlainJsonRequest } from './validate';

/*
 * isPlainJsonRequest answers `req.is('application/json')` for the common spelling without type-is. It may say
 * "ask type-is" (false) for any request, but where it says true, type-is must agree: a body typed as JSON with a
 * Content-Length or Transfer-Encoding.
 */
const reqWith = (headers: Record<string, string>): IncomingMessage => ({ headers }) as unknown as IncomingMessage;
/** What the code asks otherwise: express's req.is (type-is). */
const typeIsJson = (headers: Record<string, string>): boolean => express.request.is.call(reqWith(headers) as unknown as express.Request, ['application/json']) === 'application/json';

describe('isPlainJsonRequest (the JSON check without type-is)', () => {
  it.each([
    [{ 'content-type': 'application/json', 'content-length': '12' }, true],
    [{ 'content-type': 'Application/JSON; charset=UTF-8', 'content-length': '0' }, true],
    [{ 'content-type': 'application/json;charset="utf-8"', 'transfer-encoding': 'chunked' }, true],
    // Without a length or an encoding there is no body (type-is answers null): not plain.
    [{ 'content-type': 'application/json' }, false],
    // Other spellings and types are left to type-is.
    [{ 'content-type': 'application/json; charset=latin1', 'content-length': '3' }, false],
    [{ 'content-type': 'application/vnd.api+json', 'content-length': '3' }, false],
    [{ 'content-type': 'text/plain', 'content-length': '3' }, false],
    [{ 'content-length': '3' }, false],
    [{ 'content-type': 'application/json', 'content-length': '3x' }, false],
  ])('%j → %s', (headers, plain) => {
    expect(isPlainJsonRequest(reqWith(headers))).toBe(plain);
    if (plain) expect(typeIsJson(headers)).toBe(true);
  });

  it('never says JSON where type-is does not (generated headers)', () => {
    const type = fc.oneof(
      fc.constantFrom('application/json', 'APPLICATION/JSON', 'application/json; charset=utf-8', 'application/json;charset="UTF-8"', 'application/json;\tcharset=utf-8'),
      fc.tuple(fc.constantFrom('application/json', 'text/json', 'application/x-json'), fc.string({ maxLength: 12 })).map(([t, rest]) => t + rest),
      fc.string({ maxLength: 30 }),
    );
    const length = fc.option(fc.oneof(fc.nat({ max: 10_000 }).map(String), fc.string({ maxLength: 6 })), { nil: undefined });
    const encoding = fc.option(fc.constantFrom('chunked', 'gzip, chunked'), { nil: undefined });
    fc.assert(
      fc.property(type, length, encoding, (t, l, e) => {
        const headers: Record<string, string> = { 'content-type': t };
        if (l !== undefined) headers['content-length'] = l;
        if (e !== undefined) headers['transfer-encoding'] = e;
        if (isPlainJsonRequest(reqWith(headers))) expect(typeIsJson(headers)).toBe(true);
      }),
      { numRuns: 2_000 },
    );
  });
});
