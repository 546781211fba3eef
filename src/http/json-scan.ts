/*
 * What jsonBody checks on a JSON text besides JSON.parse: its nesting, and that no object repeats a key. JSON.parse
 * keeps the last of duplicate keys, another parser may keep the first: the chat proxy forwards the client's bytes, so
 * the upstream could act on a model or messages other than the ones Engram read (RFC 7493: names MUST be unique).
 * Detection costs one counter in the byte scan the depth check already does plus a walk of the parsed objects' own
 * keys (they are fewer than the members exactly when a key repeated); only a refused body is read a third time, to
 * name the key and its path.
 */

/** Bytes of a string read one by one before its end is looked for with Buffer.indexOf (a native memchr). */
const INLINE_STRING_BYTES = 16;

/**
 * One pass over a JSON text's UTF-8 bytes: the number of object members in it (colons outside strings), or -1 when it
 * nests objects/arrays deeper than `maxDepth` (brackets and colons inside strings do not count). Keys and short values
 * are read byte by byte; a longer string's end is found with indexOf, a quote after an odd run of backslashes being
 * text: the same answer as reading every byte, for any bytes, about 4x faster on chat bodies (message text is most
 * of their bytes).
 */
export function scanJson(buf: Buffer, maxDepth: number): number {
  const n = buf.length;
  let depth = 0;
  let members = 0;
  for (let i = 0; i < n; i++) {
    const c = buf[i];
    if (c === 0x22) {
      const stop = Math.min(n, i + INLINE_STRING_BYTES);
      let j = i + 1;
      for (; j < stop; j++) {
        const d = buf[j];
        if (d === 0x5c) j++; // the escaped byte is text (UTF-8 never reuses ASCII bytes inside a multi-byte character)
        else if (d === 0x22) break;
      }
      if (j < stop) {
        i = j;
        continue;
      }
      for (;;) {
        const q = j < n ? buf.indexOf(0x22, j) : -1;
        if (q < 0) return members; // unterminated: JSON.parse refuses the text
        let k = q - 1;
        while (buf[k] === 0x5c) k--; // stops at the opening quote at the latest
        j = q + 1;
        if ((q - 1 - k) % 2 === 0) break;
      }
      i = j - 1;
    } else if (c === 0x3a) members++;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > maxDepth) return -1;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return members;
}

/**
 * The number of own keys of every object in a JSON.parse result. Equal to scanJson's member count of the text it was
 * parsed from unless a key repeated (the dropped members, and all inside a dropped value, are missing). Object.keys,
 * not for-in: a `__proto__` member is an own key of JSON.parse's object, and a key added to Object.prototype is not.
 */
export function countOwnKeys(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0;
  let n = 0;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      if (typeof v === 'object' && v !== null) n += countOwnKeys(v);
    }
    return n;
  }
  const keys = Object.keys(value);
  n += keys.length;
  for (let i = 0; i < keys.length; i++) {
    const v = (value as Record<string, unknown>)[keys[i]!];
    if (typeof v === 'object' && v !== null) n += countOwnKeys(v);
  }
  return n;
}

/** A repeated key and where it is: the path of its second occurrence (`messages.1.role`), segments as zod reports them. */
export interface DuplicateKey {
  key: string;
  path: Array<string | number>;
}

interface Frame {
  /** The keys seen so far in an object; null for an array. */
  keys: Set<string> | null;
  /** The current member's key, or the current element's index. */
  at: string | number;
}

/**
 * The first key (in text order) that repeats within one object of a JSON text that JSON.parse accepts, or null.
 * Keys compare as JSON.parse decodes them: `"a"` and `"\u0061"` are the same key.
 */
export function findDuplicateKey(text: string): DuplicateKey | null {
  const stack: Frame[] = [];
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      const start = i;
      let escaped = false;
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) {
          escaped = true;
          i++;
        } else if (d === 0x22) break;
      }
      if (!expectKey) continue;
      expectKey = false;
      const key = escaped ? (JSON.parse(text.slice(start, i + 1)) as string) : text.slice(start + 1, i);
      const top = stack[stack.length - 1]!;
      if (top.keys!.has(key)) return { key, path: [...stack.slice(0, -1).map((f) => f.at), key] };
      top.keys!.add(key);
      top.at = key;
    } else if (c === 0x7b) {
      stack.push({ keys: new Set(), at: '' });
      expectKey = true;
    } else if (c === 0x5b) stack.push({ keys: null, at: 0 });
    else if (c === 0x7d || c === 0x5d) {
      stack.pop();
      expectKey = false; // `{}` closes without a key
    } else if (c === 0x2c) {
      const top = stack[stack.length - 1];
      if (!top) continue;
      if (top.keys) expectKey = true;
      else top.at = (top.at as number) + 1;
    }
  }
  return null;
}
