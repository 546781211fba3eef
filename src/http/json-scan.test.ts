import fc from 'fast-check';
import { countOwnKeys, findDuplicateKey, scanJson } from './json-scan';

/** scanJson's answer read byte by byte, as the depth check always read it: the reference for its faster string skip. */
function scanEveryByte(buf: Buffer, maxDepth: number): number {
  let depth = 0;
  let members = 0;
  let inString = false;
  for (let i = 0; i < buf.length; i++) {
    const c = buf[i];
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x3a) members++;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > maxDepth) return -1;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return members;
}

/** Whether jsonBody's cheap check sees a repeated key in `text`: scanJson's members against the parsed value's own keys. */
const repeats = (text: string): boolean => countOwnKeys(JSON.parse(text)) !== scanJson(Buffer.from(text, 'utf8'), 1000);

const CASES: Array<[string, string, { key: string; path: Array<string | number> } | null]> = [
  ['no repeat', '{"model":"m","messages":[{"role":"user","content":"hi"}]}', null],
  ['top level', '{"model":"a","model":"b"}', { key: 'model', path: ['model'] }],
  ['in a message', '{"messages":[{"role":"user","content":"x"},{"role":"user","role":"system","content":"x"}]}', { key: 'role', path: ['messages', 1, 'role'] }],
  ['the same key in sibling objects is no repeat', '{"a":{"k":1},"b":{"k":2},"c":[{"k":1},{"k":2}]}', null],
  ['nested objects', '{"a":{"b":{"c":1,"d":2,"c":3}}}', { key: 'c', path: ['a', 'b', 'c'] }],
  ['arrays of arrays', '[[{"x":1}],[{},{"y":1,"y":1}]]', { key: 'y', path: [1, 1, 'y'] }],
  ['an escaped spelling is the same key', '{"a":1,"\\u0061":2}', { key: 'a', path: ['a'] }],
  ['escapes on both sides', '{"m\\u006fdel":"a","mo\\u0064el":"b"}', { key: 'model', path: ['model'] }],
  ['an escaped quote in a key', '{"a\\"b":1,"a\\u0022b":2}', { key: 'a"b', path: ['a"b'] }],
  ['keys that only look alike are not', '{"a":1,"A":2,"a ":3,"\\u00e9":4,"e\\u0301":5}', null],
  ['__proto__ once', '{"__proto__":{"polluted":1},"constructor":{"prototype":{}}}', null],
  ['__proto__ twice', '{"__proto__":{"x":1},"__proto__":{"y":1}}', { key: '__proto__', path: ['__proto__'] }],
  ['the empty key', '{"":1,"":2}', { key: '', path: [''] }],
  ['the empty key once', '{"":1,"a":{"":2}}', null],
  ['a dropped value with its own members', '{"a":{"x":1,"y":2},"a":{}}', { key: 'a', path: ['a'] }],
  ['the first repeat in text order wins', '{"a":{"x":1,"x":2},"a":1}', { key: 'x', path: ['a', 'x'] }],
  ['colons, braces and commas inside strings', '{"a:b":"{,}[:]","c":"\\\\","a:b":1}', { key: 'a:b', path: ['a:b'] }],
  ['empty containers before a string value', '{"a":[{},[],"x"],"b":{},"a":2}', { key: 'a', path: ['a'] }],
  ['blanks everywhere', ' { "a" : 1 ,\n\t"a" : 2 } ', { key: 'a', path: ['a'] }],
  ['a number-like key', '{"1":1,"01":2,"1.0":3,"1":4}', { key: '1', path: ['1'] }],
];

describe('duplicate keys in a JSON text', () => {
  test.each(CASES)('%s', (_label, text, expected) => {
    expect(findDuplicateKey(text)).toEqual(expected);
    expect(repeats(text)).toBe(expected !== null);
  });

  test('a key added to Object.prototype is not counted (own keys only)', () => {
    const proto = Object.prototype as Record<string, unknown>;
    Object.defineProperty(proto, 'injected', { value: 1, enumerable: true, configurable: true });
    try {
      expect(repeats('{"a":{"b":1}}')).toBe(false);
    } finally {
      delete proto.injected;
    }
  });

  test('a large body: one repeat deep inside many messages', () => {
    const messages = Array.from({ length: 2000 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `message ${i} ${'z'.repeat(200)}` }));
    const text = JSON.stringify({ model: 'm', messages });
    expect(repeats(text)).toBe(false);
    expect(findDuplicateKey(text)).toBeNull();
    const bad = text.replace('"content":"message 1234 ', '"content":"x","content":"message 1234 ');
    expect(repeats(bad)).toBe(true);
    expect(findDuplicateKey(bad)).toEqual({ key: 'content', path: ['messages', 1234, 'content'] });
  });

  test('random JSON without repeats is never refused; a repeated key is always found, with its path', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 3 }), { minKeys: 1, maxKeys: 5 }), (other, host) => {
        const text = JSON.stringify({ other, host: [host] });
        expect(repeats(text)).toBe(false);
        expect(findDuplicateKey(text)).toBeNull();
        // The host object's first key once more, in front of it (JSON.stringify writes keys in Object.keys order).
        const key = Object.keys(host)[0]!;
        const bad = JSON.stringify({ other, host: ['HOST'] }).replace('"HOST"', () => `{${JSON.stringify(key)}:0,${JSON.stringify(host).slice(1)}`);
        expect(repeats(bad)).toBe(true);
        expect(findDuplicateKey(bad)).toEqual({ key, path: ['host', 0, key] });
      }),
      { numRuns: 300, seed: 7 },
    );
  });

  test('scanJson answers as reading every byte would, for any bytes (strings long and short, escapes across its inline window)', () => {
    const alphabet = [0x22, 0x5c, 0x7b, 0x7d, 0x5b, 0x5d, 0x3a, 0x2c, 0x61, 0x20, 0xc3, 0xa9];
    const bytes = fc.array(fc.oneof(fc.constantFrom(...alphabet), fc.integer({ min: 0, max: 255 })), { maxLength: 120 });
    const texts = fc.jsonValue({ maxDepth: 4 }).map((v) => Buffer.from(JSON.stringify(v), 'utf8'));
    const part = fc.tuple(fc.nat({ max: 40 }), fc.string({ unit: fc.constantFrom('a', '\\', '"', ':', '{', 'é', ' '), maxLength: 30 })).map(([pad, text]) => 'x'.repeat(pad) + text);
    const longStrings = fc.array(part, { maxLength: 6 }).map((parts) => Buffer.from(JSON.stringify({ parts }), 'utf8'));
    fc.assert(
      fc.property(fc.oneof(bytes.map((b) => Buffer.from(b)), texts, longStrings), fc.integer({ min: 0, max: 6 }), (buf, maxDepth) => {
        expect(scanJson(buf, maxDepth)).toBe(scanEveryByte(buf, maxDepth));
      }),
      { numRuns: 2000, seed: 3 },
    );
  });

  test('scanJson: members outside strings, and -1 past the depth limit', () => {
    expect(scanJson(Buffer.from('{"a":"x:y","b":[{"c":1}]}'), 10)).toBe(3);
    expect(scanJson(Buffer.from('[[[1]]]'), 3)).toBe(0);
    expect(scanJson(Buffer.from('[[[[1]]]]'), 3)).toBe(-1);
    expect(scanJson(Buffer.from('"[[[[:"'), 1)).toBe(0);
    // A long string whose quotes are escaped, then one that ends after an even run of backslashes.
    const long = JSON.stringify({ a: `${'x'.repeat(40)}\\"{:}"\\\\`, b: `"${'\\'.repeat(33)}` });
    expect(scanJson(Buffer.from(long), 1)).toBe(2);
  });
});
