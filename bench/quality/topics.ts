/**
 * The facts a generated persona talks about, one function per topic. Each returns a plan: turns
 * placed in sessions (facts, restatements, contradictions, the other speaker's reactions and
 * callbacks) and questions that point at the turns answering them by a topic-local ref.
 */
import type { Rng } from './prng';
import * as L from './lexicon';
import type { QuestionKind, QuestionTag } from './types';

export interface Person {
  name: string;
  he: string;
  him: string;
  his: string;
}

export interface PTurn {
  who: 'self' | 'other';
  text: string;
  /** Topic-local name, for questions' evidence. */
  ref?: string;
  /** What the speaker did (for "what did X do in <month>" questions). */
  event?: string;
}

export interface PEvent {
  session: number;
  turns: PTurn[];
}

export interface PQuestion {
  kind: QuestionKind;
  /** Alternatives: the first that passes the checks is used. */
  q: string[];
  evidence: string[];
  /** '@date' is replaced by the first evidence turn's date. */
  answer: string;
  /** Tags the topic asserts (rare-token needs `rare`; updated is taken as given). */
  tags?: QuestionTag[];
  rare?: string;
  /** Designed as a paraphrase: dropped when no alternative is lexically disjoint from its evidence. */
  mustParaphrase?: boolean;
}

export interface Plan {
  events: PEvent[];
  questions: PQuestion[];
}

export const cap = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1);
/** "a" or "an" before a word. */
export const an = (w: string): string => `${/^[aeiou]/i.test(w) ? 'an' : 'a'} ${w}`;

/** What a topic sees: the two speakers, the session count and draws that avoid reusing a value within a chat. */
export class TopicCtx {
  constructor(
    readonly r: Rng,
    readonly self: Person,
    readonly other: Person,
    readonly sessions: number,
    readonly cast: L.Cast,
    private readonly used: Set<string>,
    /** The speaker's partner, named by several topics. */
    readonly partner: string,
  ) {}

  /** A session in the fraction [lo, hi) of the chat; with a `spread` label, one the speaker has not used for that label yet when possible (two trips are not told in one session). */
  at(lo: number, hi: number, spread?: string): number {
    const a = Math.floor(lo * this.sessions);
    const b = Math.max(a, Math.ceil(hi * this.sessions) - 1);
    let s = Math.min(this.sessions - 1, this.r.int(a, b));
    if (spread) {
      const key = (x: number) => `${this.self.name}|${spread}|${x}`;
      for (let i = 0; i < 10 && this.used.has(key(s)); i++) s = Math.min(this.sessions - 1, this.r.int(a, b));
      this.used.add(key(s));
    }
    return s;
  }

  /** A session at least `gap` after `s` (the last one when none is left). */
  after(s: number, gap = 1): number {
    const lo = Math.min(this.sessions - 1, s + gap);
    return this.r.int(lo, this.sessions - 1);
  }

  /** A value of the pool no other topic of this chat drew (falls back to any when all are used). */
  uniq<T>(pool: readonly T[], key: (t: T) => string = (t) => String(t)): T {
    const free = pool.filter((t) => !this.used.has(key(t)));
    const v = this.r.pick(free.length ? free : pool);
    this.used.add(key(v));
    return v;
  }

  /** Substitutes {n} {he} {him} {his} {He} for the speaker. */
  p(template: string): string {
    const s = this.self;
    return template.replace(/\{n\}/g, s.name).replace(/\{he\}/g, s.he).replace(/\{him\}/g, s.him).replace(/\{his\}/g, s.his).replace(/\{He\}/g, cap(s.he));
  }
}

const pronouns = (he: 'he' | 'she') => (he === 'she' ? { he: 'she', him: 'her', his: 'her' } : { he: 'he', him: 'him', his: 'his' });

/** A product code: two capitals, a dash and three digits (unknown to any word-vector model). */
function productCode(r: Rng): string {
  const A = 'ABCDEFGHJKLMNPRSTVWXZ';
  return `${A[r.int(0, A.length - 1)]}${A[r.int(0, A.length - 1)]}-${r.int(100, 990)}`;
}

export function pet(c: TopicCtx): Plan {
  const { r } = c;
  const dog = r.chance(0.6);
  const breed = dog ? r.pick(L.DOG_BREEDS) : r.pick(L.CAT_BREEDS);
  const young = dog ? 'puppy' : 'kitten';
  const youngs = dog ? 'Puppies' : 'Kittens';
  const name = c.uniq(L.PET_NAMES);
  const pp = pronouns(r.chance(0.5) ? 'he' : 'she');
  const sA = c.at(0.05, 0.55);
  const events: PEvent[] = [
    {
      session: sA,
      turns: [
        {
          who: 'self',
          ref: 'adopt',
          event: `adopted ${name}`,
          text: r.pick([
            `We finally adopted a ${breed} from the shelter this weekend! We named ${pp.him} ${name}.`,
            `Big news: there is a little ${breed} ${young} living with us now. ${name} already owns the couch.`,
            `I brought home a ${breed} ${young} on Saturday. Everyone, meet ${name}!`,
          ]),
        },
        { who: 'other', text: r.pick([`Aww, a ${breed}! Send me pictures of ${name} immediately.`, `${youngs} are so much work, good luck with the sleepless nights!`, `Oh my gosh, congrats! ${name} is such a cute name.`]) },
      ],
    },
  ];
  const evidence = ['adopt'];
  if (r.chance(0.6)) {
    events.push({
      session: c.after(sA, 2),
      turns: [
        {
          who: 'self',
          ref: 'restate',
          text: r.pick([
            `${name} chewed through my phone charger again. ${cap(breed)}s have absolutely no shame.`,
            `Took ${name} to the vet for ${pp.his} shots, apparently ${pp.he} is a very healthy ${breed}.`,
            `Everyone at the park stops to pet ${name}, people really love a ${breed}.`,
          ]),
        },
      ],
    });
    evidence.push('restate');
  }
  const callback = r.pick([
    [`How is ${name} settling in?`, 'Great! Still terrified of the vacuum though.'],
    [`Is ${name} still stealing socks?`, "Every single day. It's a whole collection now."],
    [`Give ${name} a treat from me!`, 'Will do, spoiled rotten already.'],
  ]);
  events.push({ session: c.after(sA, 1), turns: [{ who: 'other', text: callback[0] }, { who: 'self', text: callback[1] }] });
  const species = dog ? 'canine' : 'feline';
  return {
    events,
    questions: [
      { kind: 'single-hop', q: [c.p(`What is the name of {n}'s ${breed}?`)], evidence, answer: name },
      { kind: 'single-hop', q: [c.p(`What did {n} call {his} ${species}?`), c.p(`What is {n}'s ${species} called?`)], evidence, answer: name, mustParaphrase: true },
      { kind: 'temporal', q: [c.p(`When did {n} adopt ${name}?`), c.p(`When did {n} get ${name}?`)], evidence: ['adopt'], answer: '@date' },
    ],
  };
}

export function job(c: TopicCtx): Plan {
  const { r } = c;
  const j = c.uniq(L.JOBS, (x) => x.title);
  const company = c.uniq(L.COMPANIES);
  const sA = c.at(0, 0.35);
  const events: PEvent[] = [
    {
      session: sA,
      turns: [
        {
          who: 'self',
          ref: 'job',
          text: r.pick([
            `I've been ${an(j.title)} at ${company} for almost ${r.int(2, 9)} years now, time flies.`,
            `Long week at ${company}. Being ${an(j.title)} there means nobody ever leaves on time.`,
            `${company} finally made me a senior ${j.title}! Drinks are on me.`,
          ]),
        },
        { who: 'other', text: r.pick([`${company} is lucky to have you.`, `Do they at least pay you properly?`, `You always sound so busy!`]) },
      ],
    },
  ];
  const jobEvidence = ['job'];
  const updated = r.chance(0.5);
  const sU = updated ? c.after(sA, 4) : -1;
  if (r.chance(0.5)) {
    const sR = updated ? r.int(sA + 1, Math.max(sA + 1, sU - 1)) : c.after(sA, 2);
    if (!updated || sR < sU) {
      events.push({ session: sR, turns: [{ who: 'self', ref: 'job-restate', text: r.pick([`Honestly the best part of working as ${an(j.title)} is the people at ${company}.`, `Another twelve hour day at ${company}. ${cap(j.title)}s are seriously understaffed there.`]) }] });
      jobEvidence.push('job-restate');
    }
  }
  const questions: PQuestion[] = [];
  let projectCompanyEvidence = jobEvidence;
  let projectWindow: [number, number] = [sA + 1, c.sessions - 1];
  if (updated) {
    const j2 = c.uniq(L.JOBS, (x) => x.title);
    const company2 = c.uniq(L.COMPANIES);
    events.push({
      session: sU,
      turns: [
        {
          who: 'self',
          ref: 'new-job',
          event: `left ${company} for a new job at ${company2}`,
          text: r.pick([
            `I handed in my notice at ${company} today. Starting as ${an(j2.title)} at ${company2} next month!`,
            `Last day at ${company} on Friday, then I'm ${an(j2.title)} at ${company2}. Terrified and excited.`,
            `Officially leaving ${company}: ${company2} offered me ${an(j2.title)} position and I said yes.`,
          ]),
        },
        { who: 'other', text: r.pick([`Whoa, big move! ${company2} is lucky.`, `Congrats!! You deserved a change.`, `Finally! You complained about that place for years.`]) },
      ],
    });
    questions.push(
      { kind: 'single-hop', q: [c.p('Where does {n} work now?'), c.p('Which company does {n} work for these days?')], evidence: ['new-job'], answer: company2, tags: ['updated'] },
      { kind: 'single-hop', q: [c.p("Who is {n}'s current employer?"), c.p('Who employs {n} at present?')], evidence: ['new-job'], answer: company2, tags: ['updated'], mustParaphrase: true },
      { kind: 'temporal', q: [c.p(`When did {n} leave ${company}?`), c.p(`When did {n} quit ${company}?`)], evidence: ['new-job'], answer: '@date', rare: company, tags: ['rare-token'] },
      { kind: 'multi-hop', q: [c.p(`What did {n} do before joining ${company2}?`)], evidence: [...jobEvidence.slice(0, 1), 'new-job'], answer: `${j.title} at ${company}`, rare: company2, tags: ['rare-token'] },
    );
    projectWindow = [sA + 1, sU - 1];
  } else {
    questions.push(
      { kind: 'single-hop', q: [c.p('Where does {n} work?'), c.p('Which company does {n} work for?')], evidence: jobEvidence, answer: company },
      { kind: 'single-hop', q: [c.p(`What is {n}'s role at ${company}?`), c.p(`What does {n} do at ${company}?`)], evidence: jobEvidence, answer: j.title, rare: company, tags: ['rare-token'] },
      { kind: 'single-hop', q: [c.p('Who employs {n}?'), c.p("Which employer pays {n}'s salary?")], evidence: jobEvidence, answer: company, mustParaphrase: true },
    );
  }
  projectCompanyEvidence = ['job'];
  if (projectWindow[1] - projectWindow[0] >= 2 && r.chance(0.6)) {
    const code = c.uniq(L.CODENAMES);
    const sP = r.int(projectWindow[0], projectWindow[1] - 1);
    const sL = r.int(sP + 1, projectWindow[1]);
    events.push(
      {
        session: sP,
        turns: [
          { who: 'self', ref: 'project', text: r.pick([`We're launching Project ${code} next week and I haven't slept in days.`, `Project ${code} is eating my life, the deadline is brutal.`]) },
          { who: 'other', text: r.pick([`Good luck with ${code}, you've got this!`, `Hang in there, it'll be worth it.`]) },
        ],
      },
      {
        session: sL,
        turns: [{ who: 'self', ref: 'launch', event: `launched Project ${code}`, text: r.pick([`Project ${code} finally launched and nothing broke! Celebrating tonight.`, `We shipped ${code} this morning. I'm going to sleep for a week.`]) }],
      },
    );
    questions.push(
      { kind: 'temporal', q: [`When did Project ${code} launch?`, `When did ${c.self.name}'s team ship ${code}?`], evidence: ['launch'], answer: '@date', rare: code, tags: ['rare-token'] },
      { kind: 'multi-hop', q: [`Which company is behind Project ${code}?`, `At which company did ${c.self.name} work on ${code}?`], evidence: [...projectCompanyEvidence, 'project'], answer: company, rare: code, tags: ['rare-token'] },
    );
  }
  return { events, questions };
}

export function home(c: TopicCtx): Plan {
  const { r } = c;
  const city = c.uniq(c.cast.cities);
  const sA = c.at(0, 0.4);
  const events: PEvent[] = [
    {
      session: sA,
      turns: [
        { who: 'self', ref: 'home', text: r.pick([`Our apartment in ${city} is tiny but the neighborhood is great.`, `Summer in ${city} is gorgeous, I never want to leave.`, `Rent in ${city} went up again, it's getting ridiculous.`]) },
        { who: 'other', text: r.pick([`I really need to visit ${city} one day.`, `Ugh, rent everywhere is insane.`, `Sounds lovely honestly.`]) },
      ],
    },
  ];
  if (!r.chance(0.5)) {
    return {
      events,
      questions: [
        { kind: 'single-hop', q: [c.p('Which city does {n} live in?'), c.p('Where does {n} live?')], evidence: ['home'], answer: city },
        { kind: 'single-hop', q: [c.p('In which metropolis does {n} reside?'), c.p('Where does {n} reside?')], evidence: ['home'], answer: city, mustParaphrase: true },
      ],
    };
  }
  const city2 = c.uniq(c.cast.cities);
  events.push({
    session: c.after(sA, 3),
    turns: [
      {
        who: 'self',
        ref: 'move',
        event: `moved to ${city2}`,
        text: r.pick([`We finally moved to ${city2}! Still living out of boxes.`, `Signed the lease on a place in ${city2}, moving day is Saturday.`, `The movers dropped our couch, but we are officially ${city2} people now.`]),
      },
      { who: 'other', text: r.pick([`Welcome to the ${city2} life!`, `So exciting, send me a photo of the new place.`, `Moving is the worst, hope your back survives.`]) },
    ],
  });
  return {
    events,
    questions: [
      { kind: 'single-hop', q: [c.p('Which city does {n} live in now?'), c.p('Where does {n} live these days?')], evidence: ['move'], answer: city2, tags: ['updated'] },
      { kind: 'temporal', q: [c.p(`When did {n} move to ${city2}?`), c.p(`When did {n} relocate to ${city2}?`)], evidence: ['move'], answer: '@date' },
      { kind: 'multi-hop', q: [c.p(`Which city did {n} live in before ${city2}?`), c.p(`Where did {n} live before moving to ${city2}?`)], evidence: ['home', 'move'], answer: city },
    ],
  };
}

export function car(c: TopicCtx): Plan {
  const { r } = c;
  const make = c.uniq(L.CAR_MAKES);
  const color = r.pick(L.COLORS);
  const sA = c.at(0.05, 0.5);
  const events: PEvent[] = [
    {
      session: sA,
      turns: [
        { who: 'self', ref: 'buy', event: `bought a ${color} ${make}`, text: r.pick([`Bought a used ${color} ${make} yesterday. My first car ever!`, `Picked up my ${color} ${make} from the dealer this morning, the car smells amazing.`]) },
        { who: 'other', text: r.pick([`Road trip!! When are we going?`, `Congrats! Don't forget insurance.`, `${an(make).replace(/^a/, 'A')}? Solid choice.`]) },
      ],
    },
  ];
  const ev = ['buy'];
  if (r.chance(0.4)) {
    events.push({ session: c.after(sA, 1), turns: [{ who: 'self', ref: 'restate', text: r.pick([`The ${make} needs new tires already. Cars are a money pit.`, `Washed the ${make} for the first time, it's shockingly ${color} when it's clean.`]) }] });
    ev.push('restate');
  }
  const questions: PQuestion[] = [{ kind: 'temporal', q: [c.p(`When did {n} buy the ${make}?`), c.p(`When did {n} get {his} ${make}?`)], evidence: ['buy'], answer: '@date' }];
  if (r.chance(0.35)) {
    const make2 = c.uniq(L.CAR_MAKES);
    events.push({ session: c.after(sA, 4), turns: [{ who: 'self', ref: 'sold', event: `swapped the ${make} for an electric ${make2}`, text: r.pick([`Sold the ${make} and got an electric ${make2}. Never going back to petrol.`, `Traded in the ${make} for an electric ${make2}, so quiet it's spooky.`]) }] });
    questions.push(
      { kind: 'single-hop', q: [c.p('What car does {n} drive now?'), c.p('What does {n} drive these days?')], evidence: ['sold'], answer: `electric ${make2}`, tags: ['updated'] },
      { kind: 'multi-hop', q: [c.p(`What car did {n} have before the ${make2}?`)], evidence: ['buy', 'sold'], answer: `${color} ${make}` },
    );
  } else {
    questions.push(
      { kind: 'single-hop', q: [c.p('What car does {n} drive?'), c.p('Which car does {n} own?')], evidence: ev, answer: `${color} ${make}` },
      { kind: 'single-hop', q: [c.p('What kind of automobile does {n} own?'), c.p('Which automobile brand does {n} have?')], evidence: ev, answer: make, mustParaphrase: true },
    );
  }
  return { events, questions };
}

interface Relation {
  rel: string;
  he: 'he' | 'she' | null;
  /** Paraphrase question for "who is X's <rel>". */
  para: string;
}

const RELATIONS: Relation[] = [
  { rel: 'sister', he: 'she', para: "Who is {n}'s female sibling?" },
  { rel: 'brother', he: 'he', para: "Who is {n}'s male sibling?" },
  { rel: 'cousin', he: null, para: 'Which relative of {n} shares {his} grandparents?' },
  { rel: 'roommate', he: null, para: 'Who shares a flat with {n}?' },
  { rel: 'best friend', he: null, para: "Who is {n}'s closest pal?" },
];

export function relative(c: TopicCtx): Plan {
  const { r } = c;
  const rel = c.uniq(RELATIONS, (x) => x.rel);
  const who = c.uniq(
    c.cast.relatives.filter((x) => rel.he === null || x.he === rel.he),
    (x) => x.name,
  );
  const name = who.name;
  const rp = pronouns(who.he);
  const sA = c.at(0, 0.6);
  let sB = c.after(sA, 1);
  if (sB === sA) sB = Math.max(0, sA - 1);
  const intro: PEvent = {
    session: sA,
    turns: [
      {
        who: 'self',
        ref: 'intro',
        text: r.pick([
          `My ${rel.rel} ${name} is staying with us for a few days.`,
          `Had dinner with my ${rel.rel} ${name} last night, we laughed until midnight.`,
          `My ${rel.rel} ${name} called me at 2am to talk about ${rp.his} breakup, poor thing.`,
        ]),
      },
      { who: 'other', text: r.pick([`Say hi to ${name} from me!`, `Aw, family time is the best.`, `Oof, ${rp.he} is lucky to have you.`]) },
    ],
  };
  const attrs = [
    () => {
      const program = r.pick(L.PROGRAMS);
      const uni = c.uniq(L.UNIVERSITIES);
      return {
        text: `${name} got into the ${program} program at ${uni}! So proud of ${rp.him}.`,
        event: null,
        qs: [
          { kind: 'multi-hop' as const, q: [c.p(`What is {n}'s ${rel.rel} studying?`), c.p(`Which program did {n}'s ${rel.rel} get into?`)], answer: program },
          { kind: 'temporal' as const, q: [`When did ${name} get into ${uni}?`, `When was ${name} accepted at ${uni}?`], answer: '@date', rare: uni.split(' ')[0], bOnly: true },
        ],
      };
    },
    () => {
      const j = r.pick(L.JOBS);
      const city = r.pick(c.cast.cities);
      return {
        text: `${name} just started working as ${an(j.title)} in ${city}.`,
        event: null,
        qs: [
          { kind: 'multi-hop' as const, q: [c.p(`What does {n}'s ${rel.rel} do for work?`), c.p(`What job does {n}'s ${rel.rel} have?`)], answer: j.title },
          { kind: 'multi-hop' as const, q: [c.p(`In which city does {n}'s ${rel.rel} work?`)], answer: city },
        ],
      };
    },
    () => ({
      text: `${name} is training for a triathlon, ${rp.he} swims at 5am every single day.`,
      event: null,
      qs: [{ kind: 'multi-hop' as const, q: [c.p(`What is {n}'s ${rel.rel} training for?`)], answer: 'a triathlon' }],
    }),
    () => {
      const city = r.pick(c.cast.cities);
      return {
        text: `${name} is moving to ${city} next month, I'm going to miss ${rp.him} so much.`,
        event: null,
        qs: [{ kind: 'multi-hop' as const, q: [c.p(`Where is {n}'s ${rel.rel} moving to?`)], answer: city }],
      };
    },
  ];
  const a = r.pick(attrs)();
  const events: PEvent[] = [intro, { session: sB, turns: [{ who: 'self', ref: 'attr', text: a.text }, { who: 'other', text: r.pick([`No way! Tell ${name} congrats.`, `That's huge news.`, `Wow, good for ${rp.him}.`]) }] }];
  const questions: PQuestion[] = [
    { kind: 'single-hop', q: [c.p(`What is the name of {n}'s ${rel.rel}?`), c.p(`Who is {n}'s ${rel.rel}?`)], evidence: ['intro'], answer: name },
    { kind: 'single-hop', q: [c.p(rel.para)], evidence: ['intro'], answer: name, mustParaphrase: true },
  ];
  for (const q of a.qs) {
    const bOnly = 'bOnly' in q && q.bOnly;
    const rare = 'rare' in q ? q.rare : undefined;
    questions.push({ kind: q.kind, q: q.q, evidence: bOnly ? ['attr'] : ['intro', 'attr'], answer: q.answer, rare, tags: rare ? ['rare-token'] : [] });
  }
  return { events, questions };
}

interface Health {
  stmt: string;
  event?: string;
  direct: { kind: QuestionKind; q: string };
  para: string[];
  answer: string;
}

const HEALTH: Health[] = [
  { stmt: 'My doctor says my blood pressure is way too high, so no more salty snacks for me.', direct: { kind: 'single-hop', q: "What did {n}'s doctor say about {his} blood pressure?" }, para: ['What did the physician tell {n} about hypertension?'], answer: 'too high; no salty snacks' },
  { stmt: "The doctor told me to cut back on coffee, I'm down to one cup a day.", direct: { kind: 'single-hop', q: 'How much coffee does {n} drink now?' }, para: ["What did {n}'s physician advise about caffeine?"], answer: 'one cup a day' },
  { stmt: "Sprained my ankle at football practice, I'm on crutches for six weeks.", event: 'sprained an ankle', direct: { kind: 'temporal', q: 'When did {n} sprain {his} ankle?' }, para: ['What injury did {n} suffer while playing soccer?'], answer: 'a sprained ankle' },
  { stmt: "Found out I'm allergic to shellfish, my whole face swelled up at dinner.", direct: { kind: 'single-hop', q: 'What is {n} allergic to?' }, para: ['Which seafood must {n} avoid?'], answer: 'shellfish' },
  { stmt: "I haven't slept more than four hours a night all month, my brain is mush.", direct: { kind: 'single-hop', q: 'How many hours a night has {n} been sleeping?' }, para: ['Which sleeping problem has {n} struggled with?'], answer: 'insomnia, four hours a night' },
  { stmt: "Got my first pair of glasses, apparently I've been squinting for years.", event: 'got glasses', direct: { kind: 'temporal', q: 'When did {n} get {his} first glasses?' }, para: ['Does {n} need spectacles to see properly?'], answer: 'yes, glasses' },
  { stmt: 'My back has been killing me since I started working from the couch.', direct: { kind: 'single-hop', q: "Why does {n}'s back hurt?" }, para: ["What is causing {n}'s spinal discomfort?"], answer: 'working from the couch' },
  { stmt: "The dentist found two cavities, so I'm getting fillings next week.", direct: { kind: 'single-hop', q: "What did the dentist find at {n}'s checkup?" }, para: ['What tooth repairs does {n} need?'], answer: 'two cavities, fillings' },
];

export function health(c: TopicCtx): Plan {
  const { r } = c;
  const h = c.uniq(HEALTH, (x) => x.stmt);
  const s = c.at(0, 1);
  return {
    events: [
      {
        session: s,
        turns: [
          { who: 'self', ref: 'h', event: h.event, text: h.stmt },
          { who: 'other', text: r.pick(['Oh no, take care of yourself!', 'That sounds rough, I hope it gets better soon.', 'Yikes. Listen to the doctor this time!']) },
        ],
      },
    ],
    questions: [
      { kind: h.direct.kind, q: [c.p(h.direct.q)], evidence: ['h'], answer: h.direct.kind === 'temporal' ? '@date' : h.answer },
      { kind: 'single-hop', q: h.para.map((q) => c.p(q)), evidence: ['h'], answer: h.answer, mustParaphrase: true },
    ],
  };
}

export function trip(c: TopicCtx): Plan {
  const { r } = c;
  const pl = c.uniq(L.PLACES, (x) => x.place);
  const s = c.at(0.1, 1, 'trip');
  const foodVariant = r.chance(0.5);
  const events: PEvent[] = [
    {
      session: s,
      turns: [
        {
          who: 'self',
          ref: 'trip',
          event: `travelled to ${pl.place}`,
          text: foodVariant
            ? r.pick([`We spent a week in ${pl.place} and I ate way too much ${pl.food}.`, `Back from ${pl.place}! I'm going to dream about the ${pl.food} for months.`])
            : r.pick([`Just got back from ${pl.place}. The ${pl.sight} ${pl.sight.endsWith('s') ? 'were' : 'was'} unreal.`, `${pl.place} was the best trip I've had in years, the ${pl.sight} alone made it worth it.`]),
        },
        { who: 'other', text: r.pick([`So jealous! Show me photos.`, `${pl.place}?? That's been on my list forever.`, `Welcome back, traveller!`]) },
      ],
    },
  ];
  if (s > 1 && r.chance(0.5)) events.push({ session: r.int(Math.max(0, s - 3), s - 1), turns: [{ who: 'self', text: `Booked flights to ${pl.place} for next month, I can't wait!` }] });
  const questions: PQuestion[] = [{ kind: 'temporal', q: [c.p(`When did {n} go to ${pl.place}?`), c.p(`When did {n} travel to ${pl.place}?`)], evidence: ['trip'], answer: '@date', rare: pl.rare ?? pl.place, tags: ['rare-token'] }];
  if (foodVariant) questions.push({ kind: 'single-hop', q: [c.p(`What did {n} eat a lot of in ${pl.place}?`), c.p(`Which dish did {n} love in ${pl.place}?`)], evidence: ['trip'], answer: pl.food, rare: pl.rare ?? pl.place, tags: ['rare-token'] });
  else questions.push({ kind: 'single-hop', q: [c.p(`What did {n} like most about ${pl.place}?`)], evidence: ['trip'], answer: pl.sight, rare: pl.rare ?? pl.place, tags: ['rare-token'] });
  return { events, questions };
}

export function product(c: TopicCtx): Plan {
  const { r } = c;
  const p = c.uniq(L.PRODUCTS, (x) => x.category);
  const brand = c.uniq(L.BRANDS);
  const code = productCode(r);
  const sA = c.at(0, 0.7);
  const verdict = r.pick(p.verdict);
  return {
    events: [
      {
        session: sA,
        turns: [
          { who: 'self', ref: 'buy', event: `bought the ${brand} ${code} ${p.category}`, text: r.pick([`Finally ordered the ${brand} ${code} ${p.category}.`, `Caved and bought the ${brand} ${code} ${p.category}, the reviews were too good.`]) },
          { who: 'other', text: r.pick([`Let me know if it's worth it!`, `Treat yourself, honestly.`, `I've heard good things about ${brand}.`]) },
        ],
      },
      { session: c.after(sA, 1), turns: [{ who: 'self', ref: 'review', text: `The ${code} ${verdict}.` }, { who: 'other', text: r.pick(['Ha, good to know.', 'Typical.', 'Noted, adding it to my list.']) }] },
    ],
    questions: [
      { kind: 'single-hop', q: [c.p(`What does {n} think of the ${code}?`), c.p(`How is the ${code} working out for {n}?`)], evidence: ['review'], answer: verdict, rare: code, tags: ['rare-token'] },
      { kind: 'single-hop', q: [c.p(`Which ${p.category} did {n} buy?`), c.p(`What ${p.category} did {n} order?`)], evidence: ['buy'], answer: `${brand} ${code}` },
      { kind: 'multi-hop', q: [c.p(`What does {n} think of the ${brand} ${p.category} {he} bought?`)], evidence: ['buy', 'review'], answer: verdict, rare: brand, tags: ['rare-token'] },
    ],
  };
}

interface Milestone {
  stmt: string;
  event: string;
  q: string;
  para: string[];
}

const MILESTONES: Milestone[] = [
  { stmt: 'Ran my first half marathon on Sunday! My legs are completely destroyed.', event: 'ran a first half marathon', q: 'When did {n} run {his} first half marathon?', para: ['When did {n} complete a 21 kilometre race?'] },
  { stmt: "I passed my driving test!! Third time's the charm.", event: 'passed the driving test', q: 'When did {n} pass {his} driving test?', para: ['When did {n} obtain a licence to operate a motor vehicle?'] },
  { stmt: '{p} proposed last night and I said yes!', event: 'got engaged', q: 'When did {n} get engaged?', para: ['When did {n} agree to a wedding?'] },
  { stmt: "Officially graduated with my master's degree today!", event: "finished a master's degree", q: "When did {n} graduate with {his} master's degree?", para: ['When did {n} finish postgraduate studies?'] },
  { stmt: "We got the keys to our first house today, I can't stop smiling.", event: 'bought a first house', q: 'When did {n} get the keys to {his} first house?', para: ['When did {n} become a homeowner?'] },
  { stmt: 'I finished the first draft of my novel, eighty thousand words!', event: 'finished a novel draft', q: 'When did {n} finish the first draft of {his} novel?', para: ['When did {n} complete {his} book manuscript?'] },
  { stmt: 'We made it to the summit of Kilimanjaro this morning, I cried a little.', event: 'climbed Kilimanjaro', q: 'When did {n} climb Kilimanjaro?', para: ['When did {n} reach the top of the tallest peak in Africa?'] },
  { stmt: 'Our daughter was born on Tuesday, we are exhausted and so happy.', event: 'had a baby daughter', q: "When was {n}'s daughter born?", para: ['When did {n} become a parent?'] },
  { stmt: "Spent the whole weekend volunteering at the animal shelter, I'm covered in fur.", event: 'volunteered at an animal shelter', q: 'When did {n} volunteer at the animal shelter?', para: ['When did {n} help out with rescued pets?'] },
  { stmt: 'Gave my first talk at a conference today, my hands were shaking the whole time.', event: 'gave a first conference talk', q: 'When did {n} give {his} first conference talk?', para: ['When did {n} first present on stage at an industry event?'] },
];

export function milestone(c: TopicCtx): Plan {
  const { r } = c;
  const m = c.uniq(MILESTONES, (x) => x.event);
  const usePara = r.chance(0.4);
  return {
    events: [
      {
        session: c.at(0.1, 1, 'milestone'),
        turns: [
          { who: 'self', ref: 'm', event: m.event, text: m.stmt.replace('{p}', c.partner) },
          { who: 'other', text: r.pick(['WHAT! Congratulations!!', 'That is amazing, so proud of you!', 'Huge! We need to celebrate.']) },
        ],
      },
    ],
    questions: [usePara ? { kind: 'temporal', q: m.para.map((q) => c.p(q)), evidence: ['m'], answer: '@date', mustParaphrase: true } : { kind: 'temporal', q: [c.p(m.q)], evidence: ['m'], answer: '@date' }],
  };
}

interface Aggregate {
  q: string;
  items: string[];
  templates: string[];
  /** What the speaker did, for month questions. */
  event: string;
}

const AGGREGATES: Aggregate[] = [
  { q: 'Which new sports has {n} tried?', items: ['bouldering', 'tennis', 'kayaking', 'fencing', 'archery', 'squash', 'rowing'], templates: ['Went {x} for the first time today, my arms are dead.', 'Signed up for {x} lessons on Thursdays, wish me luck.', 'Tried {x} with some coworkers this weekend, surprisingly fun.'], event: 'tried {x}' },
  { q: 'Which musical instruments has {n} been learning?', items: ['ukulele', 'cello', 'drums', 'saxophone', 'piano', 'violin'], templates: ['Started {x} lessons this week, my neighbours must hate me.', 'Practised the {x} for an hour tonight, finally getting somewhere.', 'Bought a secondhand {x} online, time to learn properly.'], event: 'practised the {x}' },
  { q: 'What dishes has {n} cooked at home recently?', items: ['lasagna', 'pad thai', 'paella', 'shakshuka', 'risotto', 'pho', 'goulash'], templates: ['Made homemade {x} tonight and it actually worked.', 'Attempted {x} for dinner, the smoke alarm disagreed.', "My {x} turned out better than the restaurant's, not to brag."], event: 'cooked {x}' },
  { q: 'Which books has {n} finished recently?', items: ['The Glass Orchard', 'Salt and Ember', 'The Quiet Lighthouse', 'Northwind Letters', 'A Map of Small Hours', 'The Velvet Ledger'], templates: ['Just finished {x}, I could not put it down.', 'Stayed up way too late finishing {x}, that ending!', '{x} was a slow start but I got through it in two days.'], event: 'read {x}' },
];

export function aggregate(c: TopicCtx): Plan {
  const { r } = c;
  const a = c.uniq(AGGREGATES, (x) => x.q);
  const n = r.int(2, 3);
  const items = r.sample(a.items, n);
  const sessions = r.sample(
    Array.from({ length: c.sessions }, (_, i) => i),
    n,
  );
  const templates = r.shuffle(a.templates);
  return {
    events: items.map((x, i) => ({ session: sessions[i], turns: [{ who: 'self' as const, ref: `i${i}`, event: a.event.replace('{x}', x), text: templates[i % templates.length].replace('{x}', x) }] })),
    questions: [{ kind: 'multi-hop', q: [c.p(a.q)], evidence: items.map((_, i) => `i${i}`), answer: items.join(', ') }],
  };
}

interface Preference {
  statements: [string, string];
  questions: string[];
  answer: string;
}

const PREFERENCES: Preference[] = [
  { statements: ['Nothing clears my head like a long hike up in the hills on a Sunday.', 'Did another twelve miles on the ridge trail, my happy place honestly.'], questions: ['Would {n} enjoy a trekking holiday in the Alps?', 'Is a mountain walking vacation a good gift idea for {n}?'], answer: 'yes, loves hiking' },
  { statements: ["I can't handle crowds, that concert last night was a nightmare.", "Packed bars give me a headache, I'd rather have three friends over."], questions: ["Would {n} enjoy spending New Year's Eve in a jammed city square?", 'Is a sold-out stadium festival a fun outing for {n}?'], answer: 'no, hates crowds' },
  { statements: ["I haven't eaten meat in three years and honestly I don't miss it.", 'Made a lentil stew tonight, who needs meat anyway.'], questions: ['Would {n} enjoy dinner at a steakhouse?', 'Should we take {n} to a barbecue ribs joint?'], answer: 'no, vegetarian' },
  { statements: ["Planes make me so anxious, I'd take a twelve hour train ride over a flight any day.", 'My hands shake just thinking about takeoff.'], questions: ['Would {n} be comfortable travelling by airplane?', 'Is an overseas holiday by air relaxing for {n}?'], answer: 'no, afraid of flying' },
  { statements: ['Spent all Sunday making fresh pasta from scratch, cooking is my therapy.', 'Tried a new bread recipe, the kitchen is a disaster but worth it.'], questions: ["Would {n} appreciate a chef's knife as a present?", 'Would {n} like a culinary class as a gift?'], answer: 'yes, loves cooking' },
  { statements: ['My perfect weekend is a pile of novels and absolutely zero plans.', 'Finished three novels this week, the library knows me by name.'], questions: ['Would {n} enjoy a subscription to a literature club?', 'Is a bookstore voucher a good present for {n}?'], answer: 'yes, loves reading' },
  { statements: ["I'm so allergic to cats, I start sneezing the second I walk into a house with one.", 'Had to leave the party early, the host has two cats and my eyes swelled shut.'], questions: ['Could {n} comfortably stay in a home with a feline?', 'Would {n} enjoy volunteering at a kitten rescue?'], answer: 'no, allergic to cats' },
  { statements: ["I've been listening to nothing but old jazz records lately, Coltrane on repeat.", 'Found a tiny jazz bar with a live trio on Thursdays, heaven.'], questions: ['Would {n} enjoy an evening of saxophone music?', 'Would tickets to a swing band concert make {n} happy?'], answer: 'yes, loves jazz' },
  { statements: ['I swim in the sea every morning, even in winter.', 'The water was freezing today but I did my full lap of the bay.'], questions: ['Is {n} likely to enjoy a beach holiday?', 'Would {n} like a trip to a coastal town?'], answer: 'yes, swims in the sea daily' },
  { statements: ["Anything spicier than black pepper and I'm in tears.", 'Ordered a mild curry and still had to drink a litre of milk.'], questions: ['Would {n} like a fiery Sichuan hotpot?', 'Should we order extra chillies for {n}?'], answer: 'no, cannot handle spice' },
  { statements: ["The tomatoes in my garden are finally turning red, I'm so proud.", 'Spent the whole afternoon planting herbs and pulling weeds.'], questions: ['Would {n} enjoy visiting a botanical nursery?', 'Would seeds and a trowel make a good birthday present for {n}?'], answer: 'yes, loves gardening' },
  { statements: ['Stayed up until 3am playing video games again, no regrets.', 'Finally beat the final boss after two weeks of trying.'], questions: ['Would {n} want a new console for {his} birthday?', 'Would {n} enjoy an arcade night?'], answer: 'yes, gamer' },
  { statements: ["Set up my telescope on the balcony and saw Saturn's rings!", 'Drove out of the city last night just to see the stars properly.'], questions: ['Would {n} enjoy an evening at a planetarium?', 'Would {n} like a trip to watch a meteor shower?'], answer: 'yes, loves astronomy' },
  { statements: ['Salsa class tonight again, I cannot get enough of it.', "Danced until midnight at my cousin's wedding, my feet are done."], questions: ['Would {n} enjoy a ballroom lesson?', 'Would {n} like to go to a tango night?'], answer: 'yes, loves dancing' },
  { statements: ["Spent five hours at the history museum and still didn't see everything.", 'Went on a walking tour about medieval ruins, absolutely fascinating.'], questions: ['Would {n} enjoy a guided visit to an ancient castle?', 'Would an archaeology documentary interest {n}?'], answer: 'yes, loves history' },
];

export function preference(c: TopicCtx): Plan {
  const { r } = c;
  const pref = c.uniq(PREFERENCES, (x) => x.statements[0]);
  const [first, second] = r.chance(0.5) ? pref.statements : [pref.statements[1], pref.statements[0]];
  const s = c.at(0, 0.8);
  const events: PEvent[] = [{ session: s, turns: [{ who: 'self', ref: 's1', text: first }, { who: 'other', text: r.pick(['Ha, that is so you.', 'Honestly relatable.', 'I love that for you.']) }] }];
  const evidence = ['s1'];
  if (r.chance(0.5)) {
    events.push({ session: c.after(s, 2), turns: [{ who: 'self', ref: 's2', text: second }] });
    evidence.push('s2');
  }
  return { events, questions: [{ kind: 'open-domain', q: r.shuffle(pref.questions).map((q) => c.p(q)), evidence, answer: pref.answer }] };
}

const ROUTINES = ['yoga', 'choir practice', 'pottery class', 'swimming', 'Spanish class', 'book club', 'climbing'];

export function routine(c: TopicCtx): Plan {
  const { r } = c;
  const act = c.uniq(ROUTINES);
  const [d1, d2] = r.sample(L.WEEKDAYS.slice(0, 5), 2);
  const sA = c.at(0, 0.5);
  return {
    events: [
      { session: sA, turns: [{ who: 'self', ref: 'old', text: r.pick([`I have ${act} every ${d1} evening, it keeps me sane.`, `${cap(act)} on ${d1}s is the highlight of my week.`]) }] },
      { session: c.after(sA, 3), turns: [{ who: 'self', ref: 'new', text: r.pick([`Moved ${act} to ${d2} mornings, ${d1}s were impossible with work.`, `Switched ${act} from ${d1} to ${d2}, new schedule, new me.`]) }] },
    ],
    questions: [
      { kind: 'single-hop', q: [c.p(`When is {n}'s ${act} now?`), c.p(`Which day is {n}'s ${act} these days?`)], evidence: ['new'], answer: d2, tags: ['updated'] },
      { kind: 'multi-hop', q: [c.p(`On which day did {n} use to have ${act}?`)], evidence: ['old', 'new'], answer: d1 },
    ],
  };
}

const SHOWS = ['that heist series', 'the baking competition', 'the new detective drama', 'a nature documentary', 'the dating show everyone hates', 'an old sitcom', 'the space opera', 'a true crime podcast'];
const WEATHER = ['raining', 'windy', 'grey', 'freezing', 'humid', 'foggy'];
const SNACKS = ['crisps', 'cookies', 'popcorn', 'a whole bag of grapes', 'leftover cake', 'toast'];
const ERRANDS = ['the post office', 'the bank', 'the hardware store', 'the pharmacy', 'the dry cleaner', 'the supermarket'];

/** Small talk: exchanges of two or three lines, slots drawn per use. */
const FILLER: ((r: Rng) => string[])[] = [
  (r) => ['How was your weekend?', `Pretty quiet, mostly ${r.pick(L.CHORES)}.`],
  (r) => [`Ugh, it's been ${r.pick(WEATHER)} all ${r.pick(L.WEEKDAYS)}.`, "Same here, I haven't seen the sun in days."],
  (r) => ['Are you watching anything good lately?', `Started ${r.pick(SHOWS)}, it's decent so far.`],
  () => ["I'm so tired today.", 'Coffee time?', 'Always.'],
  () => ['Did you see the game last night?', 'No! Who won?', 'Nobody, it was a draw. Two hours of my life.'],
  (r) => ['What are you having for dinner?', `Probably ${r.pick(L.FOODS)}, I'm too lazy to cook.`],
  (r) => [`Happy ${r.pick(L.WEEKDAYS)}!`, 'Is it really? Where did the week go.'],
  () => ['Work is crazy this week.', 'Hang in there, the weekend is close.'],
  () => ['I just cleaned the whole apartment.', 'Proud of you, come clean mine next.'],
  () => ['Any plans for the long weekend?', 'Not yet, maybe visit family.'],
  () => ['lol check out this meme', "Hahaha that's so you."],
  () => ['My neighbour is drilling again at 8am.', 'Earplugs, my friend. Buy earplugs.'],
  (r) => [`I tried that new ${r.pick(L.CUISINES)} place downtown.`, 'Was it good?', r.pick(['Honestly just okay.', 'So good, we have to go together.', 'Overpriced but the dessert was great.'])],
  () => ['Traffic was horrible this morning.', 'Another reason to work from home.'],
  () => ['My phone is dying, talk later?', 'Sure, ttyl!'],
  () => ['Did you ever finish that jigsaw?', "Still missing three pieces, it's a tragedy."],
  () => ['We should plan a weekend away together sometime.', 'Yes! Somewhere warm please.'],
  () => ["I've been trying to drink more water.", 'Same, I keep forgetting though.'],
  () => ['My mom keeps sending me recipes.', 'Is that a hint?'],
  () => ["The clinic put me on hold for forty minutes today just to change an appointment.", 'Classic. Did you get a new slot at least?', 'Next month, somehow.'],
  () => ['I need a vacation from my vacation.', 'Story of my life.'],
  (r) => [`Guess who just ate ${r.pick(L.FOODS)} for the third day in a row.`, 'Meal prep champion.'],
  () => ['Remind me why I signed up for a 7am meeting?', 'Past you made bad decisions.'],
  () => ['Do you still have my umbrella?', 'Oops. Yes. I will bring it next time.'],
  () => ['My laptop froze in the middle of a presentation.', 'Nightmare. Did anyone notice?', 'Everyone. Everyone noticed.'],
  () => ['I accidentally replied-all to the whole office.', 'Oh no, what did it say?', 'Just "lol". Just that.'],
  () => ['How is your family doing?', 'Good! Everyone is healthy, which is all I ask for.'],
  () => ['Do you know a good plumber?', 'Sadly no, our landlord handles all that.'],
  (r) => [`Farmers market on ${r.pick(L.WEEKDAYS)}?`, "I'm in if there are pastries."],
  () => ['I finally cancelled the gym membership I never used.', 'A true financial victory.'],
  () => ['Read anything good lately?', 'Mostly cereal boxes, if I am honest.'],
  (r) => [`The bus was ${r.pick(['ten', 'twenty', 'thirty'])} minutes late again.`, 'At this point just walk.'],
  () => ['My plants keep dying and I do not know why.', 'Too much water? Everyone overwaters.'],
  () => ['Just found twenty bucks in an old jacket.', 'Best feeling in the world.'],
  (r) => [`I'm making ${r.pick(L.FOODS)} if you want to come over.`, 'Tempting, but I have a deadline tonight.'],
  (r) => [`Had ${r.pick(SNACKS)} for lunch, don't judge me.`, 'No judgement, only respect.'],
  (r) => [`I have to go to ${r.pick(ERRANDS)} and I have been putting it off for a week.`, 'Just do it now, it takes ten minutes.', 'You say that every time.'],
  () => ['Did you hear the thunder last night?', 'Slept right through it, as usual.'],
  () => ['My upstairs neighbours have a new baby, so nobody sleeps now.', 'Oh no. Earplugs?', 'Already bought three kinds.'],
  () => ['I think I am getting a cold.', 'Tea, honey, bed. Doctor’s orders.'],
  () => ['What should I get my dad for his birthday?', 'Socks. Dads love socks.'],
  () => ['Is it weird to eat cereal for dinner?', 'It is a lifestyle, not a weirdness.'],
  () => ['The printer at work jammed again.', 'Printers are a conspiracy.'],
  () => ['I signed up for a pub quiz next week.', 'Nice! What is your team called?', 'Quiz Team Aguilera. Not my idea.'],
  () => ['Did you see the sunset tonight?', 'Missed it, send a picture next time!'],
  () => ['My landlord finally fixed the heating.', 'Only took him three months.'],
  () => ['I keep forgetting my passwords.', 'Password manager. Trust me.'],
  () => ['Can you recommend a podcast?', 'Anything about history, they put me right to sleep in the best way.'],
  () => ['I spilled coffee on my keyboard this morning.', 'Rice! Put it in rice!', 'That is for phones, I think.'],
  (r) => [`Want to grab lunch on ${r.pick(L.WEEKDAYS)}?`, 'Yes! The usual place?', 'Obviously.'],
  () => ['The internet was down all afternoon.', 'So you finally had a productive day?'],
  () => ['I bought way too many groceries again.', 'Freeze half of it, future you will be grateful.'],
  () => ['Random question, do you like olives?', 'Absolutely not. Why?', 'No reason, just judging you.'],
  () => ['I think my sourdough starter died.', 'RIP. It had a good run.'],
  () => ['Are you going to the wedding in the spring?', 'I think so, if I can get the time off.'],
  () => ['Have you ever been to a silent disco?', 'Once, I felt ridiculous and loved it.'],
  () => ['My brother-in-law will not stop talking about crypto.', 'Every family has one.'],
  () => ['I finally organised my photos from last year.', 'Impressive. Mine are a chaos of screenshots.'],
  () => ['Did the package ever arrive?', 'Yes, two weeks late and slightly crushed.'],
  () => ['I tried to fix the wobbly table and now it wobbles more.', 'Classic DIY outcome.'],
  () => ['My sister sent me a video of her kid singing.', 'Adorable! Send it to me too.'],
  () => ['What time is it there?', 'Way too late for me to be texting, honestly.'],
  () => ['Hope your day is going okay.', 'Getting there, thanks for checking in.'],
];

/** Second sentences that make some small-talk lines as long as real chat turns. */
const TAILS = [
  'Anyway, how is your week going?',
  'Also, I still owe you a coffee, do not let me forget.',
  'This week has been so long already.',
  'Remind me to tell you about my neighbour later, it is a whole saga.',
  'I swear the days are flying by lately.',
  'Honestly I just need a full night of sleep.',
  'We should catch up properly soon, this texting is not enough.',
  'Okay, back to my to-do list after this.',
  'My brain is completely fried today.',
  'Sorry for the slow replies, it has been chaos here.',
  'Tell me something good, I need it.',
  'I keep meaning to call you but the evenings vanish.',
];

/** Hands out small-talk exchanges for one chat, each template once before any repeats; a third of the exchanges get a second sentence on one line. */
export class FillerDeck {
  private deck: number[] = [];

  constructor(private readonly r: Rng) {}

  next(): string[] {
    if (this.deck.length === 0) this.deck = this.r.shuffle(FILLER.map((_, i) => i));
    const lines = FILLER[this.deck.pop()!](this.r);
    if (this.r.chance(0.35)) {
      const i = this.r.int(0, lines.length - 1);
      lines[i] = `${lines[i]} ${this.r.pick(TAILS)}`;
    }
    return lines;
  }
}

export const GREETINGS: [string, string][] = [
  ['Hey {o}! Long time no talk.', 'Hi! How have you been?'],
  ['Morning!', 'Good morning! Coffee in hand?'],
  ['Hey you, got a minute?', 'Always, what is up?'],
  ['Hiii', 'Hey hey!'],
  ['Are you around?', 'Yep, just got home.'],
  ['Hello hello', 'Hi! Perfect timing, I was bored.'],
];

export const CLOSINGS: [string, string][] = [
  ['Okay I need to run, talk soon!', 'Bye! Say hi to everyone.'],
  ['Going to sleep, night!', 'Night night!'],
  ['Anyway, catch up later this week?', 'Definitely.'],
  ['Back to work I go.', 'Good luck!'],
];
