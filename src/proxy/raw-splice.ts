/*
 * The chat body sent upstream after memory was injected, made from the client's own bytes: the one message the
 * injection added is spliced into the raw JSON text at its place in the top-level `messages` array, instead of the
 * whole body being serialised again (JSON.stringify of every chat with ~1,500 tokens of memories in it: the largest
 * self time left in the upstream call with memory on, bench/README.md, "Eighth pass"). The upstream gets the same
 * JSON value either way; the client's spelling of everything else (numbers, escapes, key order, blanks) is kept, as
 * it is when nothing is injected. Anything this reader is not sure of returns null, and the caller serialises.
 */

const WS = new Set([0x20, 0x09, 0x0a, 0x0d]);
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const MESSAGES = Buffer.from('messages', 'latin1');

/** The index after the string starting at `i` (a quote), and whether it holds an escape; -1 when unterminated. */
function stringEnd(b: Buffer, i: number): { end: number; escaped: boolean } {
  let escaped = false;
  for (let j = i + 1; j < b.length; j++) {
    const c = b[j];
    if (c === BACKSLASH) {
      escaped = true;
      j++;
    } else if (c === QUOTE) return { end: j + 1, escaped };
  }
  return { end: -1, escaped };
}

function skipWs(b: Buffer, i: number): number {
  while (i < b.length && WS.has(b[i]!)) i++;
  return i;
}

/** The index after the JSON value starting at `i` (no leading blanks), or -1. */
function valueEnd(b: Buffer, i: number): number {
  const c = b[i];
  if (c === QUOTE) return stringEnd(b, i).end;
  if (c === 0x7b || c === 0x5b) {
    let depth = 0;
    for (let j = i; j < b.length; j++) {
      const d = b[j];
      if (d === QUOTE) {
        const s = stringEnd(b, j);
        if (s.end < 0) return -1;
        j = s.end - 1;
      } else if (d === 0x7b || d === 0x5b) depth++;
      else if (d === 0x7d || d === 0x5d) {
        if (--depth === 0) return j + 1;
      }
    }
    return -1;
  }
  // A number or a literal: up to the next delimiter.
  let j = i;
  while (j < b.length && b[j] !== 0x2c && b[j] !== 0x7d && b[j] !== 0x5d && !WS.has(b[j]!)) j++;
  return j > i ? j : -1;
}

function decodedKey(raw: Buffer, start: number, end: number): string | null {
  try {
    return JSON.parse(raw.toString('utf8', start, end)) as string;
  } catch {
    return null;
  }
}

/**
 * Where element `index` of the top-level `messages` array starts in `raw` (the UTF-8 text of a JSON object that
 * JSON.parse accepted), or where its closing bracket is when `index` is the array's length; with the length. The last
 * `messages` key counts, as in JSON.parse. Null for anything else: not an object, no such array, an index past its
 * end.
 */
export function messagesElementOffset(raw: Buffer, index: number): { offset: number; count: number } | null {
  let i = skipWs(raw, 0);
  if (raw[i] !== 0x7b) return null;
  i = skipWs(raw, i + 1);
  let array = -1;
  if (raw[i] !== 0x7d) {
    for (;;) {
      if (raw[i] !== QUOTE) return null;
      const key = stringEnd(raw, i);
      if (key.end < 0) return null;
      // A key with an escape is read as JSON.parse reads it (`messag\u0065s` is `messages`).
      const isMessages = key.escaped
        ? decodedKey(raw, i, key.end) === 'messages'
        : key.end - i - 2 === MESSAGES.length && raw.compare(MESSAGES, 0, MESSAGES.length, i + 1, key.end - 1) === 0;
      i = skipWs(raw, key.end);
      if (raw[i] !== 0x3a) return null;
      i = skipWs(raw, i + 1);
      if (isMessages) array = raw[i] === 0x5b ? i : -1;
      const end = valueEnd(raw, i);
      if (end < 0) return null;
      i = skipWs(raw, end);
      if (raw[i] === 0x2c) {
        i = skipWs(raw, i + 1);
        continue;
      }
      if (raw[i] === 0x7d) break;
      return null;
    }
  }
  if (array < 0) return null;
  let j = skipWs(raw, array + 1);
  let count = 0;
  let at = -1;
  if (raw[j] !== 0x5d) {
    for (;;) {
      if (count === index) at = j;
      const end = valueEnd(raw, j);
      if (end < 0) return null;
      count++;
      j = skipWs(raw, end);
      if (raw[j] === 0x2c) {
        j = skipWs(raw, j + 1);
        continue;
      }
      if (raw[j] === 0x5d) break;
      return null;
    }
  }
  if (index === count) at = j;
  return at < 0 ? null : { offset: at, count };
}

/**
 * The bytes of `injected` made from `raw`, the bytes `original` was parsed from, when `injected` is `original` with
 * one message added to its `messages` (every other field and message the same object); null otherwise (the caller
 * serialises `injected`).
 */
export function spliceInjectedMessage(raw: Buffer, original: Record<string, unknown>, injected: Record<string, unknown>): Buffer | null {
  const before = original.messages;
  const after = injected.messages;
  if (!Array.isArray(before) || !Array.isArray(after) || after.length !== before.length + 1) return null;
  const keys = Object.keys(injected);
  if (keys.length !== Object.keys(original).length) return null;
  for (const k of keys) if (k !== 'messages' && (!Object.hasOwn(original, k) || injected[k] !== original[k])) return null;
  let k = 0;
  while (k < before.length && after[k] === before[k]) k++;
  for (let i = k; i < before.length; i++) if (after[i + 1] !== before[i]) return null;
  const at = messagesElementOffset(raw, k);
  if (!at || at.count !== before.length) return null;
  const message = JSON.stringify(after[k]);
  if (message === undefined) return null;
  // Before element k, or (k past the end) after the last one: its comma goes on the side that has a neighbour.
  const text = k < at.count ? `${message},` : at.count > 0 ? `,${message}` : message;
  return Buffer.concat([raw.subarray(0, at.offset), Buffer.from(text, 'utf8'), raw.subarray(at.offset)]);
}
