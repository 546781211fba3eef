/**
 * The one keyword tokenizer: mirrors SQLite FTS5 `unicode61 remove_diacritics 2` (the tokenizer of
 * memory_fts) so the FTS query builder and the in-process relevance score agree on what a word is.
 *
 * What unicode61 does, and so what this does:
 * - token characters are letters, digits and private-use characters; everything else (spaces,
 *   punctuation, `_`, symbols, emoji) separates tokens, so "C++" is "c", "e-mail" is "e" "mail"
 *   and "v2.5" is "v2" "5";
 * - tokens are case-folded (not NFKC'd: full-width "Ｆｕｌｌ" stays full-width, lower-cased);
 * - Latin letters lose their diacritics ("naïve" is "naive", "Ǖ" is "u") but other scripts keep
 *   theirs ("й" stays "й"), and the 25 combining diacritics unicode61 knows (U+0300–U+0331) are
 *   dropped inside a token, so decomposed "cafe\u0301" is "cafe" too.
 *
 * Deliberate difference: unicode61 cuts words at every other combining mark, so Devanagari
 * "हिन्दी" is the three one-letter tokens "ह" "न" "द" and Thai "สวัสดี" is cut at its vowel signs.
 * Here such marks stay inside the word: a one-consonant token would match every word holding that
 * consonant, and a quoted multi-mark word in a MATCH query is tokenized by FTS5 into the same
 * consecutive tokens as the indexed text, i.e. it becomes an exact phrase. Every token here is
 * therefore one or more consecutive unicode61 tokens, never part of one.
 *
 * Known residual differences (unicode61 uses Unicode 6.1 tables, Node a current Unicode):
 * characters assigned after 6.1 that are not letters/digits (newer emoji such as 🤖, newer
 * marks and punctuation) are token characters for unicode61 and separators here; letters whose
 * case pair was added after 6.1 (Cherokee, Georgian Mtavruli, Latin Extended-D…) are lower-cased
 * here and kept as written by unicode61.
 */

// unicode61's own list of diacritics (sqlite3Fts5UnicodeIsdiacritic): they continue a token and
// remove_diacritics drops them.
const FTS_DIACRITICS = String.raw`\u0300-\u0304\u0306-\u030c\u030f\u0311\u031b\u0323-\u0328\u032d\u032e\u0330\u0331`;

/**
 * A word: a letter, digit or private-use character, then more of those, unicode61 diacritics and
 * word-internal marks (Devanagari vowel signs, Thai tone marks…). The rest of the Combining
 * Diacritical Marks block, variation selectors (the FE0F in "1️⃣") and enclosing marks separate
 * words, as in unicode61.
 */
const WORD = new RegExp(
  String.raw`[\p{L}\p{N}\p{Co}](?:[\p{L}\p{N}\p{Co}${FTS_DIACRITICS}]|(?![\u0300-\u036f\ufe00-\ufe0f\u{e0100}-\u{e01ef}])[\p{Mn}\p{Mc}])*`,
  'gu',
);
const DIACRITIC = new RegExp(`[${FTS_DIACRITICS}]`, 'gu');

// Case folding differs from toLowerCase() for these (CaseFolding.txt "C" entries unicode61 has).
const CASE_FOLD: Readonly<Record<string, string>> = {
  '\u00b5': '\u03bc', // µ micro sign → μ
  '\u017f': 's', // ſ long s
  '\u03c2': '\u03c3', // ς final sigma → σ
  '\u03d0': '\u03b2',
  '\u03d1': '\u03b8',
  '\u03d5': '\u03c6',
  '\u03d6': '\u03c0',
  '\u03f0': '\u03ba',
  '\u03f1': '\u03c1',
  '\u03f5': '\u03b5',
  '\u1e9b': 's', // ẛ long s with dot above
  '\u1fbe': '\u03b9', // ι prosgegrammeni → ι
};
const CASE_FOLD_CHARS = new RegExp(`[${Object.keys(CASE_FOLD).join('')}]`, 'gu');

// Latin-1 Supplement, Latin Extended-A/B and Latin Extended Additional: where unicode61 strips diacritics.
const LATIN_ACCENTED = /[\u00c0-\u024f\u1e00-\u1eff]/gu;
const latinBase = new Map<string, string>();

function stripLatin(ch: string): string {
  let base = latinBase.get(ch);
  if (base === undefined) {
    const m = /^([a-z])\p{M}+$/u.exec(ch.normalize('NFD'));
    // ǡ (a with dot above and macron) is missing from unicode61's table, so it keeps its marks.
    base = m && ch !== '\u01e1' ? m[1] : ch;
    latinBase.set(ch, base);
  }
  return base;
}

function foldWord(word: string): string {
  return word
    .toLowerCase()
    .replace(CASE_FOLD_CHARS, (c) => CASE_FOLD[c])
    .replace(DIACRITIC, '')
    .replace(LATIN_ACCENTED, stripLatin);
}

const NON_ASCII = /[^\x00-\x7f]/;
const ASCII_WORD = /[a-z0-9]+/g;

/** Splits text into the lower-cased, diacritic-free word tokens SQLite FTS5 `unicode61 remove_diacritics 2` indexes (see the module comment for the differences). */
export function tokenize(text: string): string[] {
  if (typeof text !== 'string' || text.length === 0) return [];
  // ASCII text (most of it): the token characters are [a-z0-9] after lower-casing and nothing folds
  // further — the same tokens, several times faster (the keyword index tokenizes every row it loads).
  if (!NON_ASCII.test(text)) return text.toLowerCase().match(ASCII_WORD) ?? [];
  const out: string[] = [];
  // A word starts with a letter, digit or private-use character, which folding never removes.
  for (const m of text.matchAll(WORD)) out.push(foldWord(m[0]));
  return out;
}

/** The text as the keyword tiers see it: its tokens joined by single spaces ("Naïve café?!" → "naive cafe"). */
export function foldForMatch(text: string): string {
  return tokenize(text).join(' ');
}
