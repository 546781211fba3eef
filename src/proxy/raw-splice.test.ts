import fc from 'fast-check';
import { injectMemory, type ChatRequest } from '../memory/injection';
import { messagesElementOffset, spliceInjectedMessage } from './raw-splice';

/*
 * The spliced bytes must parse to exactly the body injectMemory made, for any spelling of the client's JSON; and the
 * splice must refuse (null: the caller serialises) whatever it cannot be sure of.
 */

const MEMORIES = [{ content: 'User prefers "dark" mode\nand tabs' }, { content: 'Lives in Zürich 🏔' }];

/** JSON text of `v` with random blanks between tokens (the client's spelling: JSON.parse gives back `v`). */
function spell(v: unknown, blank: () => string): string {
  if (Array.isArray(v)) return `[${blank()}${v.map((x) => spell(x, blank)).join(`${blank()},${blank()}`)}${blank()}]`;
  if (v !== null && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>).map(([k, x]) => `${JSON.stringify(k)}${blank()}:${blank()}${spell(x, blank)}`);
    return `{${blank()}${entries.join(`${blank()},${blank()}`)}${blank()}}`;
  }
  return JSON.stringify(v);
}

const message = fc.record({
  role: fc.constantFrom('system', 'user', 'assistant', 'tool'),
  content: fc.oneof(fc.string({ maxLength: 20 }), fc.array(fc.record({ type: fc.constant('text'), text: fc.string({ maxLength: 10 }) }), { maxLength: 2 })),
});
const chatBody = fc.record(
  {
    model: fc.constantFrom('gpt-4o-mini', 'llama3', 'claude-3-haiku'),
    messages: fc.array(message, { minLength: 1, maxLength: 5 }),
    temperature: fc.double({ noNaN: true, noDefaultInfinity: true }),
    stream: fc.boolean(),
    tools: fc.jsonValue({ maxDepth: 3 }),
    'weird key "[,]"': fc.string({ maxLength: 8 }),
  },
  { requiredKeys: ['model', 'messages'] },
);

describe('spliceInjectedMessage', () => {
  test('gives the injected body for any spelling of the client JSON, wherever the message goes', () => {
    fc.assert(
      fc.property(chatBody, fc.array(fc.constantFrom('', ' ', '\n', '\t', '\r\n  '), { minLength: 1, maxLength: 8 }), fc.boolean(), (body, blanks, cacheControl) => {
        let n = 0;
        const blank = () => blanks[n++ % blanks.length]!;
        if (cacheControl) (body.messages[0] as Record<string, unknown>).cache_control = { type: 'ephemeral' };
        const raw = Buffer.from(spell(body, blank), 'utf8');
        const original = JSON.parse(raw.toString('utf8')) as ChatRequest;
        const injected = injectMemory(original, MEMORIES, { model: original.model as string });
        expect(injected).not.toBe(original);
        const spliced = spliceInjectedMessage(raw, original, injected);
        expect(spliced).not.toBeNull();
        expect(JSON.parse(spliced!.toString('utf8'))).toEqual(injected);
      }),
      { numRuns: 400, seed: 1405 },
    );
  });

  test("keeps the client's spelling of everything else", () => {
    const raw = Buffer.from('{ "model":"m", "n": 1.50e2, "s":"\\u00e9", "messages":[ {"role":"user","content":"hi"} ] }');
    const original = JSON.parse(raw.toString()) as ChatRequest;
    const spliced = spliceInjectedMessage(raw, original, injectMemory(original, MEMORIES))!.toString();
    expect(spliced.startsWith('{ "model":"m", "n": 1.50e2, "s":"\\u00e9", "messages":[ {"role":"system","content":')).toBe(true);
    expect(spliced.endsWith('{"role":"user","content":"hi"} ] }')).toBe(true);
  });

  test('the last of duplicate `messages` keys is the one spliced, as JSON.parse reads it', () => {
    const raw = Buffer.from('{"messages":[{"role":"user","content":"first"}],"model":"m","messages":[{"role":"user","content":"second"}]}');
    const original = JSON.parse(raw.toString()) as ChatRequest;
    const injected = injectMemory(original, MEMORIES);
    expect(JSON.parse(spliceInjectedMessage(raw, original, injected)!.toString())).toEqual(injected);
  });

  test('a top-level key spelled with escapes is read as JSON.parse reads it', () => {
    const escaped = Buffer.from('{"model":"m","messag\\u0065s":[{"role":"user","content":"hi"}],"messages\\"":[1]}');
    const o1 = JSON.parse(escaped.toString()) as ChatRequest;
    const i1 = injectMemory(o1, MEMORIES);
    expect(JSON.parse(spliceInjectedMessage(escaped, o1, i1)!.toString())).toEqual(i1);
  });

  test('refuses what it cannot be sure of: a changed message, another field changed', () => {

    // A system-first model gets the memories prepended to its system message: no message added, so no splice.
    const sys = Buffer.from('{"model":"mimo-v2","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}');
    const o2 = JSON.parse(sys.toString()) as ChatRequest;
    const i2 = injectMemory(o2, MEMORIES, { model: 'mimo-v2' });
    expect(i2.messages).toHaveLength(2);
    expect(spliceInjectedMessage(sys, o2, i2)).toBeNull();

    const plain = Buffer.from('{"model":"m","messages":[{"role":"user","content":"hi"}]}');
    const o3 = JSON.parse(plain.toString()) as ChatRequest;
    expect(spliceInjectedMessage(plain, o3, { ...injectMemory(o3, MEMORIES), model: 'other' })).toBeNull();
    expect(spliceInjectedMessage(plain, o3, { ...injectMemory(o3, MEMORIES), extra: true })).toBeNull();
  });

  test('messagesElementOffset: element starts and the closing bracket; null for other shapes', () => {
    const raw = Buffer.from(' { "a" : [1,"]"], "messages" : [ {"x":"[{"} , 2 ] } ');
    const text = raw.toString();
    expect(messagesElementOffset(raw, 0)).toEqual({ offset: text.indexOf('{"x"'), count: 2 });
    expect(messagesElementOffset(raw, 1)).toEqual({ offset: text.indexOf('2 ]'), count: 2 });
    expect(messagesElementOffset(raw, 2)).toEqual({ offset: text.indexOf(']', text.indexOf('2 ]')), count: 2 });
    expect(messagesElementOffset(raw, 3)).toBeNull();
    expect(messagesElementOffset(Buffer.from('[{"messages":[]}]'), 0)).toBeNull();
    expect(messagesElementOffset(Buffer.from('{"messages":{"0":1}}'), 0)).toBeNull();
    expect(messagesElementOffset(Buffer.from('{"messages":[]}'), 0)).toEqual({ offset: 13, count: 0 });
  });
});
