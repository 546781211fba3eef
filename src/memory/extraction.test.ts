import { buildFactMetadata, extractFactsFromText, factKey, MAX_FACT_CHARS, type ExtractedFact } from './extraction';
import { mulberry32 as prng } from '../../test/helpers/prng';

const one = (text: string): ExtractedFact => {
  const facts = extractFactsFromText(text);
  expect(facts).toHaveLength(1);
  return facts[0];
};


describe('extractFactsFromText — the 20 patterns', () => {
  // [input, content, key, polarity]; the original stored only the captured tail (e.g. "Python" for "I don't like Python").
  const preferences: [string, string, string, string][] = [
    ['I prefer TypeScript over JavaScript', 'prefers TypeScript over JavaScript', 'preference:typescript_over_javascript', 'positive'],
    ['I really prefer dark mode.', 'really prefers dark mode', 'preference:dark_mode', 'positive'],
    ['I like Python', 'likes Python', 'preference:python', 'positive'],
    ['I really like short answers', 'really likes short answers', 'preference:short_answers', 'positive'],
    ['My favorite is green tea', 'favorite is green tea', 'preference:green_tea', 'positive'],
    ['my favourite are cats', 'favourite are cats', 'preference:cats', 'positive'],
    ["I don't like Python", 'does not like Python', 'preference:python', 'negative'],
    ['I dont like meetings', 'does not like meetings', 'preference:meetings', 'negative'],
    ['I do not like long emails', 'does not like long emails', 'preference:long_emails', 'negative'],
    ['I hate Java', 'hates Java', 'preference:java', 'negative'],
    ['I dislike tabs', 'dislikes tabs', 'preference:tabs', 'negative'],
    ['I avoid ORMs', 'avoids ORMs', 'preference:orms', 'negative'],
    ['I enjoy hiking in the Alps', 'enjoys hiking in the Alps', 'preference:hiking_in_the_alps', 'positive'],
    ['I love Rust', 'loves Rust', 'preference:rust', 'positive'],
  ];
  it.each(preferences)('preference: %j', (text, content, key, polarity) => {
    expect(one(text)).toEqual({ key, content, type: 'factual', category: 'preference', polarity });
  });

  const decisions: [string, string, string, string][] = [
    ["I'll use PostgreSQL", 'will use PostgreSQL', 'decision:postgresql', 'positive'],
    ['I will use Redis for caching', 'will use Redis for caching', 'decision:redis_for_caching', 'positive'],
    ['I chose Vue', 'chose Vue', 'decision:vue', 'positive'],
    ['I decided to use SQLite', 'decided to use SQLite', 'decision:sqlite', 'positive'],
    ['I have decided to learn Rust', 'has decided to learn Rust', 'decision:learn_rust', 'positive'],
    ["I'm going to use Deno", 'is going to use Deno', 'decision:deno', 'positive'],
    ["I'm going with Fastify", 'is going with Fastify', 'decision:fastify', 'positive'],
    ['I am going to adopt Kotlin', 'is going to adopt Kotlin', 'decision:kotlin', 'positive'],
    ['I selected the blue theme', 'selected the blue theme', 'decision:blue_theme', 'positive'],
    ['I picked React', 'picked React', 'decision:react', 'positive'],
    ['I went with AWS', 'went with AWS', 'decision:aws', 'positive'],
  ];
  it.each(decisions)('decision: %j', (text, content, key, polarity) => {
    expect(one(text)).toEqual({ key, content, type: 'episodic', category: 'decision', polarity });
  });

  const patterns: [string, string, string, string][] = [
    ['I usually drink coffee in the morning', 'usually drink coffee in the morning', 'pattern:drink_coffee_in_the_morning', 'neutral'],
    ['I always write tests first', 'always write tests first', 'pattern:write_tests_first', 'positive'],
    ['I never use tabs', 'never use tabs', 'pattern:use_tabs', 'negative'],
    ['I typically work late', 'typically work late', 'pattern:work_late', 'neutral'],
    ['I tend to overthink', 'tends to overthink', 'pattern:overthink', 'neutral'],
    ['I often travel for work', 'often travel for work', 'pattern:travel_for_work', 'neutral'],
    ['I frequently deploy on Fridays', 'frequently deploy on Fridays', 'pattern:deploy_on_fridays', 'neutral'],
    ['I regularly run benchmarks', 'regularly run benchmarks', 'pattern:run_benchmarks', 'neutral'],
  ];
  it.each(patterns)('pattern: %j', (text, content, key, polarity) => {
    expect(one(text)).toEqual({ key, content, type: 'factual', category: 'pattern', polarity });
  });

  it('matches case-insensitively like the original', () => {
    expect(one('i LIKE python').content).toBe('likes python');
    expect(one('MY FAVORITE IS tea').content).toBe('favorite is tea');
  });
});

describe('extractFactsFromText — polarity (DESIGN §6)', () => {
  it('keeps negation in the content and gives positive and negative statements about one object the same key', () => {
    const like = one('I like Python');
    const dislike = one("I don't like Python");
    expect(dislike.content).toBe('does not like Python');
    expect(dislike.polarity).toBe('negative');
    // Same key: a later "I don't like Python" updates the earlier "I like Python" (the upsert key), newest wins.
    expect(dislike.key).toBe(like.key);
    expect(one('I hate Python').key).toBe(like.key);
    expect(one('I love python').key).toBe(like.key);
  });

  it('within one text the latest statement about an object wins', () => {
    expect(extractFactsFromText("I like Python. Actually, I don't like Python.")).toEqual([
      { key: 'preference:python', content: 'does not like Python', type: 'factual', category: 'preference', polarity: 'negative' },
    ]);
    expect(one("I don't like Python. Now I like Python.").content).toBe('likes Python');
  });

  it('reads negated decisions as negative facts on the same key as the positive ones', () => {
    const pos = one("I'll use MongoDB");
    for (const text of ["I won't use MongoDB", 'I will not use MongoDB', 'I decided not to use MongoDB', "I'm not going to use MongoDB", 'I chose not to use MongoDB']) {
      const f = one(text);
      expect(f.polarity).toBe('negative');
      expect(f.key).toBe(pos.key);
    }
    expect(one("I won't use MongoDB").content).toBe('will not use MongoDB');
    expect(one('I decided not to use MongoDB').content).toBe('decided not to use MongoDB');
    expect(one("I'm not going to use MongoDB").content).toBe('is not going to use MongoDB');
    // Different verbs of adoption about one object are one decision.
    expect(one('I decided to use MongoDB').key).toBe(pos.key);
    expect(one('I went with MongoDB').key).toBe(pos.key);
  });

  it('keys habits by the activity, so "always" and "never" about it update each other', () => {
    const always = one('I always use semicolons');
    const never = one('I never use semicolons');
    expect(always.key).toBe(never.key);
    expect([always.polarity, never.polarity]).toEqual(['positive', 'negative']);
    expect(never.content).toBe('never use semicolons');
  });

  it('keys "my favorite <thing> is X" by the slot so a new favorite replaces the old one', () => {
    const a = one('My favorite language is Rust.');
    const b = one('my favourite language is Go');
    expect(a.content).toBe('favorite language is Rust');
    expect(b.content).toBe('favourite language is Go');
    expect(a.key).toBe('preference:favorite_language');
    expect(b.key).toBe(a.key);
  });
});

describe('extractFactsFromText — apostrophes and Unicode', () => {
  it('accepts the typographic apostrophe ’ as well as \'', () => {
    // The original required the ASCII apostrophe, so these produced nothing (or lost the negation).
    expect(one('I don’t like Python').content).toBe('does not like Python');
    expect(one('I’ll use Go').content).toBe('will use Go');
    expect(one('I’m going to use Bun').content).toBe('is going to use Bun');
    expect(one('I won’t use PHP').content).toBe('will not use PHP');
    expect(one('I’ve decided to quit coffee').content).toBe('has decided to quit coffee');
  });

  it('gives non-Latin objects distinct keys (the original collapsed them all to "preference:")', () => {
    const facts = extractFactsFromText('I like 猫. I like 犬. I like Ελληνικά. I like борщ. I like हिन्दी. I like קפה');
    expect(facts.map((f) => f.key)).toEqual([
      'preference:猫',
      'preference:犬',
      'preference:ελληνικά',
      'preference:борщ',
      'preference:हिन्दी',
      'preference:קפה',
    ]);
    expect(facts[0].content).toBe('likes 猫');
  });

  it('normalises keys with NFKC and lower-casing (full-width and composed forms agree)', () => {
    expect(one('I like ＰＹＴＨＯＮ').key).toBe('preference:python');
    expect(one('I like cafe\u0301').key).toBe(one('I like café').key);
  });

  it('falls back to a short sha-256 when the object has no letters or digits', () => {
    const pizza = one('I love 🍕');
    expect(pizza.content).toBe('loves 🍕');
    expect(pizza.key).toMatch(/^preference:[0-9a-f]{12}$/);
    expect(one('I love 🍣').key).not.toBe(pizza.key);
    expect(one("I don't like 🍕").key).toBe(pizza.key);
  });

  it('keeps long slugs bounded without prefix collisions', () => {
    const base = 'the way you explain recursion with lots of small examples and';
    const a = one(`I like ${base} diagrams`);
    const b = one(`I like ${base} analogies`);
    expect(a.key).not.toBe(b.key);
    expect(Array.from(a.key).length).toBeLessThanOrEqual('preference:'.length + 40 + 9);
    expect(a.key.startsWith('preference:way_you_explain_recursion')).toBe(true);
  });
});

describe('extractFactsFromText — clean-up and bounds', () => {
  it('trims and collapses whitespace', () => {
    expect(one('I   like \t dark   \u00a0 mode  ').content).toBe('likes dark mode');
  });

  it('ends a fact at sentence punctuation but keeps dotted names and versions', () => {
    // The original stopped at every "." ("Node" from "Node.js", "v2" from "v2.5").
    expect(one('I prefer Node.js v20.11 for APIs. Next sentence').content).toBe('prefers Node.js v20.11 for APIs');
    expect(one('I like Python! It is nice').content).toBe('likes Python');
    expect(one('I like tea; also coffee').content).toBe('likes tea');
    expect(one('I like 抹茶。它很好').content).toBe('likes 抹茶');
  });

  it('splits "… but I …" clauses into separate facts', () => {
    const facts = extractFactsFromText('i like python but i hate java and I never use eclipse');
    expect(facts.map((f) => f.content)).toEqual(['likes python', 'hates java', 'never use eclipse']);
  });

  it('drops objects that say nothing on their own', () => {
    for (const text of ['I love it!', 'I like this.', 'I like a', 'I like ---', 'I hate that so much', 'I like you']) {
      expect(extractFactsFromText(text)).toEqual([]);
    }
    expect(one('I like Python a lot').content).toBe('likes Python');
    expect(one('I like Go').content).toBe('likes Go');
  });

  it(`caps content at ${MAX_FACT_CHARS} characters`, () => {
    const f = one(`I like ${'very long thing '.repeat(100)}`);
    expect(f.content.length).toBeLessThanOrEqual(MAX_FACT_CHARS);
    expect(f.content.startsWith('likes very long thing')).toBe(true);
    expect(f.content).toBe(f.content.trim());
  });

  it('finds several facts in one text, keys start with their category', () => {
    const facts = extractFactsFromText(
      "I prefer vim. I'll use Docker for deployment. I usually code at night. I hate meetings, and my favorite is jazz",
    );
    expect(facts.map((f) => f.category).sort()).toEqual(['decision', 'pattern', 'preference', 'preference', 'preference']);
    for (const f of facts) expect(f.key.startsWith(`${f.category}:`)).toBe(true);
  });

  it('dedupes within a batch by key', () => {
    expect(extractFactsFromText('I prefer tea. I prefer tea. I prefer  TEA.')).toHaveLength(1);
    // Different categories never collide: "like X" and "will use X" are two facts.
    expect(extractFactsFromText("I like Docker. I'll use Docker.")).toHaveLength(2);
  });

  it('returns [] for empty, non-string and unrelated input', () => {
    for (const v of ['', '   ', null, undefined, 42, {}, ['I like tea'], 'The weather is nice today.', 'You like Python', 'AI like behaviour']) {
      expect(extractFactsFromText(v)).toEqual([]);
    }
  });

  it('scans only the last 64 KiB', () => {
    const filler = 'x'.repeat(70 * 1024);
    expect(extractFactsFromText(`I like early facts. ${filler}`)).toEqual([]);
    expect(one(`${filler} I like late facts.`).content).toBe('likes late facts');
  });

  // Speed is measured in bench/, never asserted here; a catastrophic backtrack would hit the test timeout.
  it('reads 64 KiB of repeated or unpunctuated text into the expected facts', () => {
    const sentence = 'I like item. I never skip breakfast. The quick brown fox jumps over the lazy dog. ';
    const repeated = sentence.repeat(Math.ceil(65536 / sentence.length)).slice(0, 65536);
    expect(extractFactsFromText(repeated).map((f) => f.content).sort()).toEqual(['likes item', 'never skip breakfast']);
    // One 64 KiB "sentence": every rule's TAIL runs to the end and the object is cut to the content cap.
    const unpunctuated = one(`I like ${'a '.repeat(32_000)}`);
    expect(unpunctuated.content.length).toBeLessThanOrEqual(MAX_FACT_CHARS);
    // Many tiny clauses, questions and hypotheticals: each is classified once, not rescanned per match.
    const clauses = 'if I like tea, I like coffee, do I like milk? '.repeat(1500).slice(0, 65536);
    expect(extractFactsFromText(clauses).map((f) => f.content)).toEqual(['likes coffee']);
    expect(extractFactsFromText('?'.repeat(65536))).toEqual([]);
  });

  it('never throws on random input (seeded fuzz)', () => {
    const rnd = prng(7);
    const pieces = ['I ', 'like ', "don't ", 'don’t ', '\ud800', '\udc00', '😀', '.', ',', '\n', 'my favorite ', 'is ', 'are ', 'never ', "I'll use ", '  ', 'é', '字', '\u0000', 'decided not to ', 'but I ', '-', '…'];
    for (let i = 0; i < 1000; i++) {
      let s = '';
      const n = Math.floor(rnd() * 30);
      for (let j = 0; j < n; j++) s += pieces[Math.floor(rnd() * pieces.length)];
      const facts = extractFactsFromText(s);
      for (const f of facts) {
        expect(f.content.length).toBeGreaterThanOrEqual(3);
        expect(f.content.length).toBeLessThanOrEqual(MAX_FACT_CHARS);
        expect(f.key).toMatch(/^(preference|decision|pattern):./u);
      }
    }
  });
});

describe('extractFactsFromText — questions and hypotheticals are not facts', () => {
  const none = [
    'What do I prefer for backend work?',
    'What do I prefer for backend work', // no question mark: the inversion says it
    'Do I like Rust?',
    'do i like rust',
    'Should I always use tabs?',
    'Would I prefer tabs?',
    "Don't I hate Java?",
    'Which editor do I like best?',
    'How often do I usually deploy?',
    'So, do I really like Rust?',
    'I like Rust?',
    'I like Rust or Go?',
    'Hmm… what do I prefer for backend work?',
    'If I preferred Go I would say so.',
    'If I prefer Go, I will tell you.',
    'if I like it I will use Go',
    'I wonder whether I like Rust',
    'I wonder if I like Rust.',
    'What if I hate Java',
    'Suppose I decided to use SQLite.',
    'Unless I chose Vue, …',
    "I don't know whether I like Rust",
    'Imagine I always write tests first.',
  ];
  it.each(none)('%j → no facts', (text) => {
    expect(extractFactsFromText(text)).toEqual([]);
  });

  it('keeps statements next to a question', () => {
    expect(extractFactsFromText('I prefer Go. What do you think?')).toEqual([
      { key: 'preference:go', content: 'prefers Go', type: 'factual', category: 'preference', polarity: 'positive' },
    ]);
    expect(one('What do you think? I prefer Go.').content).toBe('prefers Go');
    expect(one('Do you like Rust?\nI like Go').content).toBe('likes Go');
    // A question tag after a comma asks about the statement, it does not make it a question.
    expect(one("I like Rust, don't you?").content).toBe('likes Rust');
    expect(one('I prefer Go, what do you think?').content).toBe('prefers Go');
    expect(one('I love Rust, right?').content).toBe('loves Rust');
    expect(one('I like Go, or should I switch?').content).toBe('likes Go');
    // Asking to remember a statement is not asking about it.
    expect(one('Can you remember that I prefer dark mode?').content).toBe('prefers dark mode');
    // Dotted names and versions do not end the sentence.
    expect(one('I prefer Node.js v20.11 for APIs. Why do you ask?').content).toBe('prefers Node.js v20.11 for APIs');
  });

  it('keeps statements next to a hypothetical clause', () => {
    expect(one('Unless I say otherwise, I prefer short answers.').content).toBe('prefers short answers');
    expect(one('I like Go, if that matters.').content).toBe('likes Go');
    expect(one('I like Go even if it is verbose').content).toBe('likes Go even if it is verbose');
    expect(extractFactsFromText('If I had time I would learn Rust. I usually code at night.').map((f) => f.content)).toEqual(['usually code at night']);
  });

  it('does not take a sentence that starts with a wh-word for a question unless it inverts', () => {
    expect(one('When I code, I usually drink coffee.').content).toBe('usually drink coffee');
    expect(one('What I do is I always write tests first.').content).toBe('always write tests first');
  });
});

describe('factKey', () => {
  it('is deterministic, category-prefixed and ignores a leading article', () => {
    expect(factKey('preference', 'The Beatles')).toBe('preference:beatles');
    expect(factKey('decision', '  Postgres   16 ')).toBe('decision:postgres_16');
    expect(factKey('pattern', 'x')).toBe(factKey('pattern', 'X'));
  });
});

describe('buildFactMetadata', () => {
  it('records category, polarity, extraction time, source and request id', () => {
    const fact = one("I don't like Python");
    const now = new Date('2025-01-02T03:04:05.000Z');
    expect(buildFactMetadata(fact, { source: 'user', requestId: 'req-1', now })).toEqual({
      category: 'preference',
      polarity: 'negative',
      extractedAt: '2025-01-02T03:04:05.000Z',
      source: 'user',
      requestId: 'req-1',
    });
  });

  it('defaults requestId to null and extractedAt to now', () => {
    const meta = buildFactMetadata({ category: 'pattern', polarity: 'neutral' }, { source: 'assistant' });
    expect(meta.requestId).toBeNull();
    expect(Math.abs(Date.parse(meta.extractedAt) - Date.now())).toBeLessThan(5000);
  });
});
