/**
 * A bounded memo of a pure text → text function. The request path derives the same things from the
 * same rows' texts at every request (tokens for the relevance score, the duplicate check's folded
 * form): ~200 candidates per chat, each regex work and fresh strings, where a map lookup is a hash
 * of the text. Bounded by the characters held (keys plus values); when full it starts over, so a
 * working set that does not fit costs what no memo cost plus the lookups.
 */
export class TextMemo {
  private readonly map = new Map<string, string>();
  private chars = 0;

  constructor(
    private readonly fn: (text: string) => string,
    /** Characters held (texts plus results) before the memo starts over. */
    private readonly maxChars: number,
    /** Texts longer than this are computed per call: one would take a large share of the memo. */
    private readonly maxText = 4096,
  ) {}

  get(text: string): string {
    if (text.length > this.maxText) return this.fn(text);
    let v = this.map.get(text);
    if (v === undefined) {
      v = this.fn(text);
      if (this.chars + text.length + v.length > this.maxChars) this.clear();
      this.map.set(text, v);
      this.chars += text.length + v.length;
    }
    return v;
  }

  /** Texts held. */
  get size(): number {
    return this.map.size;
  }

  clear(): void {
    this.map.clear();
    this.chars = 0;
  }
}

/** Content as the duplicate checks see it (retrieval's and the injection's): trimmed, whitespace runs collapsed, lower-cased. */
function foldForDuplicates(s: string): string {
  return s.trim().replace(/\s+/g, ' ').toLowerCase();
}

// ~2M characters: a few MB of strings, room for the texts of tens of thousands of short memories.
const duplicateKeys = new TextMemo(foldForDuplicates, 2_000_000);

/** The duplicate-check form of a text (see foldForDuplicates), memoised. */
export function duplicateKey(s: string): string {
  return duplicateKeys.get(s);
}

const ROW_KEY = Symbol('engram.duplicateKey');

/** A row's folded content, with the content it was folded from. */
interface FoldedContent {
  of: string;
  key: string;
}

/**
 * The duplicate-check form of a row's content, kept on the row object itself (a non-enumerable
 * symbol property, invisible to spreads, JSON and toPublic): retrieval checks the same cached rows
 * (record-cache.ts) at every chat, and a property read is far cheaper than the memo's lookup keyed
 * by the whole text (issue #14). It is recomputed when the content is no longer the one it was
 * folded from, and computed per call for a row that cannot take a property (frozen).
 */
export function rowDuplicateKey(row: { readonly content: string }): string {
  const held = (row as { [ROW_KEY]?: FoldedContent })[ROW_KEY];
  if (held !== undefined && held.of === row.content) return held.key;
  const key = foldForDuplicates(row.content);
  if (held !== undefined) {
    held.of = row.content;
    held.key = key;
  } else if (Object.isExtensible(row)) Object.defineProperty(row, ROW_KEY, { value: { of: row.content, key }, enumerable: false });
  return key;
}
