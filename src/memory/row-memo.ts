/**
 * Values the request path derives from a row's texts at every request (the duplicate check's folded
 * content, the relevance score's token haystacks), kept on the row object itself under a symbol:
 * non-enumerable, so invisible to spreads, JSON and toPublic. Retrieval reads the same cached rows
 * (record-cache.ts) at every chat, and a property read is far cheaper than redoing the regex work or
 * looking the whole text up in a memo (issue #14).
 *
 * A row belongs to one key, so nothing derived from one key's rows is ever reached through another
 * key's. (The memo keyed by text that this replaces was shared by every key: a text's second
 * scoring was faster whichever key had scored it first.)
 */

interface Held<S, T> {
  of: S;
  value: T;
}

/**
 * `derive(source)`, kept on `row` under `slot`: recomputed when `source` is no longer the one it was
 * derived from (compared with ===: strings by value, objects by identity, so a metadata object must
 * be replaced, not changed in place, as the record cache's frozen ones are), and computed per call
 * for a row that cannot take a property (frozen or not extensible).
 */
export function heldOnRow<S, T>(row: object, slot: symbol, source: S, derive: (s: S) => T): T {
  const held = (row as { [k: symbol]: Held<S, T> | undefined })[slot];
  if (held !== undefined && held.of === source) return held.value;
  const value = derive(source);
  if (held !== undefined) {
    held.of = source;
    held.value = value;
  } else if (Object.isExtensible(row)) Object.defineProperty(row, slot, { value: { of: source, value }, enumerable: false });
  return value;
}

/** Content as the duplicate checks see it (retrieval's and the injection's): trimmed, whitespace runs collapsed, lower-cased. */
export function duplicateKey(s: string): string {
  return s.trim().replace(/\s+/g, ' ').toLowerCase();
}

const DUPLICATE_KEY = Symbol('engram.duplicateKey');

/** The duplicate-check form of a row's content (duplicateKey), kept on the row (heldOnRow). */
export function rowDuplicateKey(row: { readonly content: string }): string {
  return heldOnRow(row, DUPLICATE_KEY, row.content, duplicateKey);
}
