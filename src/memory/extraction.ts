/**
 * Rule-based fact extraction (DESIGN §6): the original's 20 patterns (digest §3) with polarity
 * kept in the stored sentence, Unicode-aware keys, questions and hypotheticals skipped, bounded
 * input and in-batch dedupe. Pure.
 */
import { createHash } from 'node:crypto';
import { tailChars, MAX_TEXT_CHARS } from './chat-text';
import type { MemoryType } from './types';

export type FactCategory = 'preference' | 'decision' | 'pattern';
export type FactPolarity = 'positive' | 'negative' | 'neutral';

/** One extracted fact: `content` is a third-person predicate about the user ("does not like Python"). */
export interface ExtractedFact {
  key: string;
  content: string;
  type: MemoryType;
  category: FactCategory;
  polarity: FactPolarity;
}

/** The metadata stored with an extracted fact. */
export interface FactMetadata {
  category: FactCategory;
  polarity: FactPolarity;
  extractedAt: string;
  source: string;
  requestId: string | null;
}

export const MIN_FACT_CHARS = 3;
export const MAX_FACT_CHARS = 500;
const SLUG_MAX = 40;

/**
 * The captured object: up to the next sentence/clause punctuation or line break (ASCII and
 * full-width). Unlike the original, a dot followed by a non-space ("v2.5", "Node.js") is part of it.
 */
const TAIL = String.raw`((?:[^.,;!?\n\r。，；！？]|\.(?=[^\s.,;!?]))+)`;
const A = `['’]`; // ASCII or typographic apostrophe
const rx = (src: string): RegExp => new RegExp(src.split('TAIL').join(TAIL), 'giu');

interface Built {
  predicate: string;
  object: string;
  polarity: FactPolarity;
  /** The polarity-neutral thing the fact is about, when it differs from `object`. */
  keyObject?: string;
}

interface Rule {
  category: FactCategory;
  type: MemoryType;
  /** Lower-case words one of which must occur for the rule to match: skips a 64 KiB regex scan cheaply. */
  hints: string[];
  re: RegExp;
  build: (m: RegExpExecArray) => Built | null;
}

type RuleSpec = Omit<Rule, 'category' | 'type'>;
const kind = (category: FactCategory, type: MemoryType, specs: RuleSpec[]): Rule[] =>
  specs.map((spec) => ({ ...spec, category, type }));
const spec = (hints: string[], source: string, build: RuleSpec['build']): RuleSpec => ({ hints, re: rx(source), build });

const adv = (s: string | undefined): string => (s ? `${s.trim().toLowerCase()} ` : '');
const lc = (s: string): string => s.toLowerCase();

// "I decided not to use X" / "I chose against X": the statement is negative, the object still X.
const NEGATED_DECISION = /^(?:not\s+to|against)\s+/iu;
// Verbs of adoption are stripped from the key so "I decided to use X" and "I'll use X" are one fact.
const DECISION_VERB = /^(?:(?:not\s+)?to\s+)?(?:use|adopt|go\s+with|switch\s+to|stick\s+with|stay\s+with|against|on)\s+/iu;

function decision(predicate: string, object: string, negated = false): Built {
  const neg = negated || NEGATED_DECISION.test(object);
  return { predicate, object, polarity: neg ? 'negative' : 'positive', keyObject: object.replace(DECISION_VERB, '') };
}

const PREFERENCE = kind('preference', 'factual', [
  spec(['prefer'], String.raw`\bI\s+(really\s+)?prefer\s+TAIL`, (m) => ({
    predicate: `${adv(m[1])}prefers`,
    object: m[2],
    polarity: 'positive',
  })),
  spec(['like'], String.raw`\bI\s+(really\s+)?like\s+TAIL`, (m) => ({
    predicate: `${adv(m[1])}likes`,
    object: m[2],
    polarity: 'positive',
  })),
  // Engram also reads "my favorite <thing> is X"; that fact is keyed by the slot, so a new favorite replaces the old.
  spec(['favo'], String.raw`\bmy\s+(favou?rite)(?:\s+([\p{L}\p{N}][\p{L}\p{N} \-]{0,40}?))??\s+(is|are)\s+TAIL`, (m) => {
    const noun = m[2] ? ` ${m[2].trim()}` : '';
    return {
      predicate: `${lc(m[1])}${noun} ${lc(m[3])}`,
      object: m[4],
      polarity: 'positive',
      keyObject: noun ? `favorite${noun}` : undefined,
    };
  }),
  spec(['like'], String.raw`\bI\s+(really\s+)?(?:don${A}?t|do\s+not)\s+(really\s+)?like\s+TAIL`, (m) => ({
    predicate: `${adv(m[1])}does not ${adv(m[2])}like`,
    object: m[3],
    polarity: 'negative',
  })),
  spec(['hate', 'dislike', 'avoid'], String.raw`\bI\s+(really\s+)?(hate|dislike|avoid)\s+TAIL`, (m) => ({
    predicate: `${adv(m[1])}${lc(m[2])}s`,
    object: m[3],
    polarity: 'negative',
  })),
  spec(['enjoy'], String.raw`\bI\s+(really\s+)?enjoy\s+TAIL`, (m) => ({
    predicate: `${adv(m[1])}enjoys`,
    object: m[2],
    polarity: 'positive',
  })),
  spec(['love'], String.raw`\bI\s+(really\s+)?love\s+TAIL`, (m) => ({
    predicate: `${adv(m[1])}loves`,
    object: m[2],
    polarity: 'positive',
  })),
]);

const DECISION = kind('decision', 'episodic', [
  // Engram also reads the negations "I won't use X" / "I will not use X", so they update "I'll use X".
  spec(['use'], String.raw`\bI(?:${A}?ll|\s+will|\s+(won${A}?t))(\s+not)?\s+use\s+TAIL`, (m) => {
    const neg = Boolean(m[1] || m[2]);
    return decision(neg ? 'will not use' : 'will use', m[3], neg);
  }),
  spec(['chose'], String.raw`\bI\s+chose\s+TAIL`, (m) => decision('chose', m[1])),
  spec(['decided'], String.raw`\bI(?:\s+(have)|${A}(ve))?\s+decided\s+(not\s+to\s+|to\s+)?TAIL`, (m) => {
    const prep = m[3] ? ` ${lc(m[3]).trim().replace(/\s+/g, ' ')}` : '';
    return decision(`${m[1] || m[2] ? 'has ' : ''}decided${prep}`, m[4], prep.startsWith(' not'));
  }),
  spec(['going'], String.raw`\bI(?:${A}?m|\s+am)(\s+not)?\s+going\s+(to\s+)?(use|with|adopt)\s+TAIL`, (m) =>
    decision(`is ${m[1] ? 'not ' : ''}going ${m[2] ? 'to ' : ''}${lc(m[3])}`, m[4], Boolean(m[1])),
  ),
  spec(['selected'], String.raw`\bI\s+selected\s+TAIL`, (m) => decision('selected', m[1])),
  spec(['picked'], String.raw`\bI\s+picked\s+TAIL`, (m) => decision('picked', m[1])),
  spec(['went'], String.raw`\bI\s+went\s+with\s+TAIL`, (m) => decision('went with', m[1])),
]);

// Habits: "always" affirms and "never" negates; hedged frequencies (usually, often…) are neutral.
const habit = (word: string, predicate: string, polarity: FactPolarity): RuleSpec =>
  spec([word.split(' ')[0]], String.raw`\bI\s+${word.replace(' ', String.raw`\s+`)}\s+TAIL`, (m) => ({ predicate, object: m[1], polarity }));

const PATTERN = kind('pattern', 'factual', [
  habit('usually', 'usually', 'neutral'),
  habit('always', 'always', 'positive'),
  habit('never', 'never', 'negative'),
  habit('typically', 'typically', 'neutral'),
  habit('tend to', 'tends to', 'neutral'),
  spec(['often', 'frequently', 'regularly'], String.raw`\bI\s+(often|frequently|regularly)\s+TAIL`, (m) => ({
    predicate: lc(m[1]),
    object: m[2],
    polarity: 'neutral',
  })),
]);

/** The 20 rules in the original's order: preferences, decisions, patterns. */
const RULES: readonly Rule[] = [...PREFERENCE, ...DECISION, ...PATTERN];

// "I like Python but I hate Java": the second clause is its own fact, not part of the first object.
const NEXT_CLAUSE = /\s+(?:and|but|or|so|because|while|though|although|whereas)\s+I(?=[\s'’]|$)/iu;
const TRAILING_FILLER = /(?:\s+(?:a\s+lot|very\s+much|so\s+much|too))+$/iu;
const TRAILING_JUNK = /[\s:\-–—]+$/u;
// Objects that say nothing on their own ("I love it") would all share one key and overwrite each other.
const BARE_PRONOUNS: ReadonlySet<string> = new Set([
  'it', 'this', 'that', 'them', 'these', 'those', 'him', 'her', 'you', 'me', 'us', 'one', 'so', 'too', 'much', 'more', 'there', 'here',
]);

function cleanObject(raw: string): string | null {
  // Only the first 500 characters can be stored; the slack leaves room for collapsed whitespace.
  let o = raw.slice(0, 4 * MAX_FACT_CHARS).replace(/\s+/gu, ' ').trim();
  const clause = NEXT_CLAUSE.exec(o);
  if (clause) o = o.slice(0, clause.index);
  o = o.replace(TRAILING_FILLER, '').replace(TRAILING_JUNK, '').trim();
  if (!o || BARE_PRONOUNS.has(o.toLowerCase())) return null;
  if (!/[\p{L}\p{N}\p{S}]/u.test(o)) return null;
  // One ASCII character ("I like a") is noise; one CJK character or emoji can be a whole word.
  if (o.length === 1 && o.charCodeAt(0) < 0x80) return null;
  return o;
}

/*
 * Questions and hypotheticals state nothing: "What do I prefer for backend work?" once became the
 * fact "prefers for backend work". A match counts only when its sentence asserts it.
 */

// A sentence ends at a run of ! ? … line breaks or full-width enders, or at a dot not followed by a
// word character, so "v2.5" and "Node.js" stay inside their sentence as they stay inside TAIL.
const SENTENCE_END = /(?:[!?…\n\r。！？]|\.(?![^\s.,;!?]))+/gu;
const CLAUSE_MARK = /[,;:—–，；：]/u;
const WH = String.raw`(?:what|which|how|why|when|where|who|whom|whose)`;
const AUX = String.raw`(?:(?:do|does|did|should|would|could|can|will|shall|may|might|must|am|is|are|was|were|have|has|had)(?:n['’]?t)?|(?:wo|ca|sha)n['’]?t)`;
const OPENING = String.raw`^[\s"'“”‘’«»(\[*_>#-]*(?:(?:so|and|but|or|ok|okay|well|hey|also|then|now|hmm+|um+|uh+|oh|btw|honestly|actually|seriously|quick\s+question|remind\s+me|tell\s+me)\b[\s,:;—–-]*)*`;
/**
 * "Do I like…", "Should I…", "What do I prefer…", "Which editor do I like…": the auxiliary before
 * "I" makes it a question even without "?". A wh-word alone does not ("When I code, I usually…",
 * "What I do is…"), so up to four words may sit between it and the inversion, none of them "I".
 */
const QUESTION_START = new RegExp(String.raw`${OPENING}(?:${WH}\b(?:\s+(?!i\b)[^\s,;:]+){0,4}?\s+)?${AUX}\s+i\b`, 'iu');
// "Can you remember that I prefer Go?" asks to store a statement; it does not ask about it.
const REQUEST = new RegExp(String.raw`${OPENING}(?:please\s+)?(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:remember|note|keep\s+in\s+mind|save|store|memori[sz]e)\b`, 'iu');
// A last clause that is its own question ("…, don't you?", "…, what do you think?", "…, right?") leaves the statement before it standing.
const TAG_QUESTION = new RegExp(String.raw`^\s*(?:(?:and|or|but|so)\s+)?(?:${WH}|${AUX}|right|ok|okay|no|yes|yeah|eh|huh|correct|true|agreed|thoughts|you\s+know)(?![\p{L}\p{N}])`, 'iu');
// "if I…", "what if I…", "whether I…", "unless I…", "suppose I…", "I wonder if I…": from here to the end of the clause nothing is asserted.
const HYPOTHETICAL = /\b(?:if|whether|unless|suppose|supposing|imagine|imagining|assuming|lest|in\s+case)\b/iu;

interface Sentence {
  start: number;
  end: number;
  ender: string;
  /** Matches at or after this index are inside the question; Infinity when the sentence asks nothing. */
  asksFrom?: number;
}

function splitSentences(input: string): Sentence[] {
  const out: Sentence[] = [];
  let start = 0;
  SENTENCE_END.lastIndex = 0;
  for (let m = SENTENCE_END.exec(input); m !== null; m = SENTENCE_END.exec(input)) {
    out.push({ start, end: m.index, ender: m[0] });
    start = m.index + m[0].length;
  }
  if (start < input.length) out.push({ start, end: input.length, ender: '' });
  return out;
}

function asksFrom(input: string, s: Sentence): number {
  const text = input.slice(s.start, s.end);
  if (REQUEST.test(text)) return Infinity;
  if (QUESTION_START.test(text)) return s.start;
  if (!/[?？]/u.test(s.ender)) return Infinity;
  let last = text.length - 1;
  while (last >= 0 && !CLAUSE_MARK.test(text[last])) last--;
  return last >= 0 && TAG_QUESTION.test(text.slice(last + 1)) ? s.start + last + 1 : s.start;
}

/** Whether the text at `index` is asserted: not inside a question, nor inside an if/whether/unless/suppose clause. */
function assertionChecker(input: string): (index: number) => boolean {
  let sentences: Sentence[] | undefined;
  return (index) => {
    sentences ??= splitSentences(input);
    let lo = 0;
    let hi = sentences.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (sentences[mid].start <= index) lo = mid;
      else hi = mid - 1;
    }
    const s = sentences[lo];
    if (!s) return true;
    // Classified once per sentence, so a 64 KiB text of many matches is not rescanned per match.
    s.asksFrom ??= asksFrom(input, s);
    if (index >= s.asksFrom) return false;
    // Rules stop their TAIL at commas, so a clause holds at most one match per rule: this scan stays linear.
    let clause = index;
    while (clause > s.start && !CLAUSE_MARK.test(input[clause - 1])) clause--;
    return !HYPOTHETICAL.test(input.slice(clause, index));
  };
}

/** Cuts to at most `max` UTF-16 units without splitting a surrogate pair. */
function cutChars(s: string, max: number): string {
  if (s.length <= max) return s;
  let out = s.slice(0, max);
  const last = out.charCodeAt(out.length - 1);
  if (last >= 0xd800 && last <= 0xdbff) out = out.slice(0, -1);
  return out.trimEnd();
}

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

/**
 * The stable upsert key `<category>:<slug>`: NFKC, lower-cased, runs of anything but letters,
 * marks and digits of any script become `_`; long slugs keep 40 characters plus a hash of the
 * rest (no prefix collisions); an empty slug becomes a short sha-256 of the normalised object.
 */
export function factKey(category: FactCategory, object: string): string {
  const norm = object.normalize('NFKC').toLowerCase().replace(/\s+/gu, ' ').trim().replace(/^(?:the|a|an)\s+/u, '');
  const slug = norm.replace(/[^\p{L}\p{M}\p{N}]+/gu, '_').replace(/^_+|_+$/g, '');
  if (!slug) return `${category}:${sha256(norm).slice(0, 12)}`;
  const points = Array.from(slug);
  if (points.length <= SLUG_MAX + 9) return `${category}:${slug}`;
  const head = points.slice(0, SLUG_MAX).join('').replace(/_+$/, '');
  return `${category}:${head}_${sha256(slug).slice(0, 8)}`;
}

/**
 * Extracts preference, decision and habit facts stated in the first person, keeping polarity in
 * the content ("does not like Python") and keying each fact by category plus its polarity-neutral
 * object, so "I like X" followed later by "I don't like X" updates one memory and the newer wins;
 * skips questions ("Do I like Rust?") and hypotheticals ("if I preferred Go…"), scans only the last
 * 64 KiB, dedupes by key (the latest statement in the text wins) and never throws.
 */
export function extractFactsFromText(text: unknown): ExtractedFact[] {
  if (typeof text !== 'string' || text.trim() === '') return [];
  try {
    const input = tailChars(text, MAX_TEXT_CHARS);
    const lower = input.toLowerCase();
    const keys = new Map<string, string>();
    const keyOf = (category: FactCategory, object: string): string => {
      const memo = `${category}\u0000${object}`;
      let key = keys.get(memo);
      if (key === undefined) keys.set(memo, (key = factKey(category, object)));
      return key;
    };
    const asserted = assertionChecker(input);
    const found: { at: number; order: number; fact: ExtractedFact }[] = [];
    RULES.forEach((rule, order) => {
      if (!rule.hints.some((h) => lower.includes(h))) return;
      rule.re.lastIndex = 0;
      for (let m = rule.re.exec(input); m !== null; m = rule.re.exec(input)) {
        if (!asserted(m.index)) continue;
        const built = rule.build(m);
        const object = built ? cleanObject(built.object) : null;
        if (!built || !object) continue;
        const predicate = built.predicate;
        const content = cutChars(`${predicate} ${cutChars(object, MAX_FACT_CHARS)}`, MAX_FACT_CHARS);
        if (content.length < MIN_FACT_CHARS) continue;
        // Key = category + polarity-neutral object: "I like X" then "I don't like X" update one memory, newest wins.
        const keyObject = built.keyObject ? cleanObject(built.keyObject) ?? object : object;
        found.push({
          at: m.index,
          order,
          fact: { key: keyOf(rule.category, keyObject), content, type: rule.type, category: rule.category, polarity: built.polarity },
        });
      }
    });
    found.sort((a, b) => a.at - b.at || a.order - b.order);
    const byKey = new Map<string, ExtractedFact>();
    for (const { fact } of found) {
      // Re-inserting moves the key to the position of its latest statement.
      byKey.delete(fact.key);
      byKey.set(fact.key, fact);
    }
    return [...byKey.values()];
  } catch {
    return [];
  }
}

/** The metadata stored with an extracted fact: category, polarity, extraction time, source and request id. */
export function buildFactMetadata(
  fact: Pick<ExtractedFact, 'category' | 'polarity'>,
  ctx: { source: string; requestId?: string | null; now?: Date },
): FactMetadata {
  return {
    category: fact.category,
    polarity: fact.polarity,
    extractedAt: (ctx.now ?? new Date()).toISOString(),
    source: ctx.source,
    requestId: ctx.requestId ?? null,
  };
}
