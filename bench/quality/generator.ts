/**
 * Generates a labelled set of long multi-session chats between two personas, reproducibly from a
 * seed: facts stated, restated in other words, contradicted later (the newer turn is the
 * evidence), each session dated; small talk around them; and questions of four kinds whose
 * evidence turns are known. See bench/README.md for what a set contains.
 */
import { Rng } from './prng';
import * as L from './lexicon';
import { CLOSINGS, FillerDeck, GREETINGS, TopicCtx, aggregate, car, health, home, job, milestone, pet, preference, product, relative, routine, trip, type PQuestion, type Person, type Plan } from './topics';
import type { LabelledSet, QuestionTag, SetChat, SetQuestion, SetTurn } from './types';

export interface GeneratorConfig {
  name: string;
  seed: number;
  /** A key of CASTS: who talks and where they live. */
  cast: keyof typeof L.CASTS;
  chats: number;
  sessions: [number, number];
  /** Turns per session including small talk. */
  turnsPerSession: [number, number];
  /** Year of the first session. */
  startYear: number;
}

/** The three generated sets of the quality bench. */
export const GENERATED_SETS: GeneratorConfig[] = [
  { name: 'gen-na', seed: 1001, cast: 'north-america', chats: 10, sessions: [20, 24], turnsPerSession: [13, 17], startYear: 2022 },
  { name: 'gen-eu', seed: 2002, cast: 'europe', chats: 10, sessions: [19, 23], turnsPerSession: [14, 18], startYear: 2023 },
  { name: 'gen-world', seed: 3003, cast: 'global', chats: 10, sessions: [20, 25], turnsPerSession: [12, 16], startYear: 2021 },
];

// ---------------------------------------------------------------- lexical checks

/** Function words that never make two texts "share a keyword" (the FTS stop-words plus contraction pieces and modal verbs). */
const STOP = new Set(
  (
    'a about above after again all am an and any are as at be because been before being below between both but by ' +
    'can could did do does doing down during each few for from further had has have having he her here hers him his ' +
    'how i if in into is it its itself just me more most my myself no nor not now of off on once only or other our ours ' +
    'out over own same she should so some such than that the their theirs them then there these they this those through ' +
    'to too under until up very was we were what when where which while who whom why will with would you your yours ' +
    's t ll ve re d m don didn doesn isn wasn won can couldn shouldn wouldn'
  ).split(' '),
);

/** A crude stem: one common suffix off, so "hiking"/"hike" or "adopted"/"adopt" count as the same word. */
function stem(w: string): string {
  for (const suf of ['ies', 'ing', 'ed', 'es', 's', 'er', 'ly', 'e']) {
    if (w.endsWith(suf) && w.length - suf.length >= 3) return suf === 'ies' ? `${w.slice(0, -3)}y` : w.slice(0, -suf.length);
  }
  return w;
}

/** Content words of a text: lower-cased alphanumeric runs minus stop-words and the given names. */
export function contentWords(text: string, ignore: ReadonlySet<string> = new Set()): string[] {
  return (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).filter((w) => !STOP.has(w) && !ignore.has(w));
}

/** Whether two words are the same keyword: equal stems, or one stem a prefix (≥ 4 letters) of the other. */
function sameKeyword(a: string, b: string): boolean {
  const x = stem(a);
  const y = stem(b);
  if (x === y) return true;
  return Math.min(x.length, y.length) >= 4 && (x.startsWith(y) || y.startsWith(x));
}

/** The content words `question` shares with any of `texts` (speaker names ignored). */
export function sharedKeywords(question: string, texts: string[], ignore: ReadonlySet<string>): string[] {
  const q = contentWords(question, ignore);
  const t = new Set(texts.flatMap((x) => contentWords(x, ignore)));
  return q.filter((w) => [...t].some((v) => sameKeyword(w, v)));
}

const wordIn = (token: string, text: string) => new RegExp(`(^|[^\\p{L}\\p{N}])${token.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}($|[^\\p{L}\\p{N}])`, 'iu').test(text);

// ---------------------------------------------------------------- the chats

const pad = (n: number) => String(n).padStart(2, '0');
const DAY = 86_400_000;

function toPerson(p: L.CastPerson): Person {
  return p.he === 'she' ? { name: p.name, he: 'she', him: 'her', his: 'her' } : { name: p.name, he: 'he', him: 'him', his: 'his' };
}

/** The topics each persona talks about, with how many of each. */
function topicsFor(r: Rng): ((c: TopicCtx) => Plan)[] {
  const t: ((c: TopicCtx) => Plan)[] = [job, home, relative, relative, health, trip, milestone, aggregate, preference, preference, preference, product];
  if (r.chance(0.75)) t.push(pet);
  if (r.chance(0.5)) t.push(car);
  if (r.chance(0.6)) t.push(trip);
  if (r.chance(0.5)) t.push(milestone);
  if (r.chance(0.5)) t.push(routine);
  if (r.chance(0.3)) t.push(preference);
  return t;
}

interface Counters {
  droppedParaphrase: number;
}

function buildChat(cfg: GeneratorConfig, r: Rng, chatIndex: number, a: L.CastPerson, b: L.CastPerson, counters: Counters): { chat: SetChat; turns: SetTurn[]; questions: Omit<SetQuestion, 'id'>[] } {
  const chatId = `${cfg.name}/c${pad(chatIndex)}`;
  const S = r.int(cfg.sessions[0], cfg.sessions[1]);
  const cast = L.CASTS[cfg.cast];
  const A = toPerson(a);
  const B = toPerson(b);

  // Session start instants: a first day in the start year, then 4–20 days apart, in the afternoon or evening.
  const starts: number[] = [];
  let day = Date.UTC(cfg.startYear, r.int(0, 11), r.int(1, 28));
  for (let s = 0; s < S; s++) {
    starts.push(day + r.int(9, 21) * 3_600_000 + r.int(0, 59) * 60_000);
    day += r.int(4, 20) * DAY;
  }

  const used = new Set<string>([a.name, b.name]);
  const plans: { plan: Plan; self: Person; other: Person }[] = [];
  for (const [self, other] of [
    [A, B],
    [B, A],
  ] as const) {
    const partner = (() => {
      const free = cast.relatives.filter((x) => !used.has(x.name));
      const p = r.pick(free.length ? free : cast.relatives).name;
      used.add(p);
      return p;
    })();
    const ctx = new TopicCtx(r, self, other, S, cast, used, partner);
    for (const topic of topicsFor(r)) plans.push({ plan: topic(ctx), self, other });
  }

  // Blocks of turns per session, keyed back to their plan and ref.
  type Block = { turns: { speaker: Person; text: string; key?: string; event?: string }[] };
  const bySession: Block[][] = Array.from({ length: S }, () => []);
  plans.forEach(({ plan, self, other }, pi) => {
    for (const ev of plan.events) {
      bySession[ev.session].push({
        turns: ev.turns.map((t) => ({ speaker: t.who === 'self' ? self : other, text: t.text, key: t.ref ? `${pi}:${t.ref}` : undefined, event: t.event })),
      });
    }
  });

  const deck = new FillerDeck(r);
  const turns: SetTurn[] = [];
  const byKey = new Map<string, SetTurn>();
  const events: { turn: SetTurn; person: string; what: string }[] = [];
  for (let s = 0; s < S; s++) {
    const date = new Date(starts[s]);
    const dateStr = date.toISOString().slice(0, 10);
    const seq: Block['turns'] = [];
    const first = r.chance(0.5) ? A : B;
    const second = first === A ? B : A;
    const g = r.pick(GREETINGS);
    seq.push({ speaker: first, text: g[0].replace('{o}', second.name) }, { speaker: second, text: g[1] });
    const blocks = r.shuffle(bySession[s]);
    const factTurns = blocks.reduce((n, bl) => n + bl.turns.length, 0);
    const target = r.int(cfg.turnsPerSession[0], cfg.turnsPerSession[1]);
    const fillers = Math.max(1, Math.ceil((target - factTurns - 4) / 2));
    // Interleave: each filler exchange and each block is an item, shuffled (greeting first, closing last).
    const items: Block[] = [...blocks];
    for (let f = 0; f < fillers; f++) {
      const x = r.chance(0.5) ? A : B;
      const y = x === A ? B : A;
      items.push({ turns: deck.next().map((text, i) => ({ speaker: i % 2 === 0 ? x : y, text })) });
    }
    for (const it of r.shuffle(items)) seq.push(...it.turns);
    if (r.chance(0.75)) {
      const cl = r.pick(CLOSINGS);
      const x = r.chance(0.5) ? A : B;
      seq.push({ speaker: x, text: cl[0] }, { speaker: x === A ? B : A, text: cl[1] });
    }
    seq.forEach((t, i) => {
      const turn: SetTurn = {
        id: `${chatId}/s${pad(s)}/t${pad(i)}`,
        chat: chatId,
        session: s,
        speaker: t.speaker.name,
        content: `${t.speaker.name}: ${t.text}`,
        date: dateStr,
        createdAt: new Date(starts[s] + i * 40_000 + r.int(0, 30) * 1000).toISOString(),
      };
      turns.push(turn);
      if (t.key) byKey.set(t.key, turn);
      if (t.event) events.push({ turn, person: t.speaker.name, what: t.event });
    });
  }

  const speakers = new Set([a.name.toLowerCase(), b.name.toLowerCase()]);
  const questions: Omit<SetQuestion, 'id'>[] = [];
  const resolve = (pq: PQuestion, pi: number): Omit<SetQuestion, 'id'> | null => {
    const ev = pq.evidence.map((ref) => {
      const t = byKey.get(`${pi}:${ref}`);
      if (!t) throw new Error(`${chatId}: question "${pq.q[0]}" points at unknown turn ${ref}`);
      return t;
    });
    const texts = ev.map((t) => t.content);
    const disjoint = (q: string) => sharedKeywords(q, texts, speakers).length === 0;
    let text = pq.q[0];
    if (pq.mustParaphrase) {
      const ok = pq.q.find(disjoint);
      if (!ok) {
        counters.droppedParaphrase++;
        return null;
      }
      text = ok;
    }
    const tags = new Set<QuestionTag>(pq.tags ?? []);
    if (disjoint(text)) tags.add('paraphrase');
    if (pq.rare) {
      if (!wordIn(pq.rare, text) || !texts.some((x) => wordIn(pq.rare!, x))) throw new Error(`${chatId}: rare token ${pq.rare} missing from "${text}" or its evidence`);
      tags.add('rare-token');
    } else tags.delete('rare-token');
    return {
      chat: chatId,
      kind: pq.kind,
      tags: [...tags].sort(),
      question: text,
      evidence: ev.map((t) => t.id),
      answer: pq.answer === '@date' ? ev[0].date : pq.answer,
      ...(pq.rare ? { rareToken: pq.rare } : {}),
    };
  };
  plans.forEach(({ plan }, pi) => {
    for (const pq of plan.questions) {
      const q = resolve(pq, pi);
      if (q) questions.push(q);
    }
  });

  // "What did X do in <month>?": every month in which a speaker did one or two things.
  for (const p of [A, B]) {
    const byMonth = new Map<string, typeof events>();
    for (const e of events.filter((x) => x.person === p.name)) {
      const m = e.turn.date.slice(0, 7);
      byMonth.set(m, [...(byMonth.get(m) ?? []), e]);
    }
    const months = r.shuffle([...byMonth.entries()].filter(([, es]) => es.length <= 2)).slice(0, 2);
    for (const [m, es] of months) {
      const label = `${L.MONTHS[Number(m.slice(5, 7)) - 1]} ${m.slice(0, 4)}`;
      const text = r.pick([`What did ${p.name} do in ${label}?`, `What was ${p.name} up to in ${label}?`]);
      const texts = es.map((e) => e.turn.content);
      questions.push({
        chat: chatId,
        kind: 'temporal',
        tags: sharedKeywords(text, texts, speakers).length === 0 ? ['paraphrase'] : [],
        question: text,
        evidence: es.map((e) => e.turn.id),
        answer: es.map((e) => e.what).join('; '),
      });
    }
  }

  return { chat: { id: chatId, speakers: [a.name, b.name], sessions: S }, turns, questions };
}

/** Generates one set: `chats` chats between distinct pairs of the cast, all questions numbered in order. */
export function generateSet(cfg: GeneratorConfig): LabelledSet & { droppedParaphrase: number } {
  const r = new Rng(cfg.seed);
  const cast = L.CASTS[cfg.cast];
  const people = r.shuffle(cast.people);
  const counters: Counters = { droppedParaphrase: 0 };
  const chats: SetChat[] = [];
  const turns: SetTurn[] = [];
  const questions: SetQuestion[] = [];
  for (let c = 0; c < cfg.chats; c++) {
    const a = people[(2 * c) % people.length];
    const b = people[(2 * c + 1) % people.length];
    const built = buildChat(cfg, r, c, a, b, counters);
    chats.push(built.chat);
    turns.push(...built.turns);
    for (const q of built.questions) questions.push({ id: `${cfg.name}/q${String(questions.length).padStart(4, '0')}`, ...q });
  }
  return {
    name: cfg.name,
    description: `${cfg.chats} generated chats between ${cast.label}, ${cfg.sessions[0]}–${cfg.sessions[1]} dated sessions each (seed ${cfg.seed})`,
    seed: cfg.seed,
    chats,
    turns,
    questions,
    droppedParaphrase: counters.droppedParaphrase,
  };
}
