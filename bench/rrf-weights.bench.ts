import type { EmbeddingSettings } from '../src/embedding/embedding.service';
import { buildApiContext } from '../src/api';
import { MemoryReadCache } from '../src/memory/read-cache';
import { MemoryService } from '../src/memory/memory.service';
import { RetrievalService, type RetrievalDeps } from '../src/memory/retrieval.service';
import { buildFtsQuery } from '../src/memory/retrieval-scoring';
import type { RetrievalStrategy, Retriever } from '../src/memory/retrieval.types';
import { silentLog, testEnv, testPrefix } from '../test/helpers/env';
import { benchStaticModel, type BenchModel } from './build-wink-model';
import { closeBenchContext, Corpus, embedPending, retrievalDeps, rng, seedMemories, useStaticSource } from './retrieval.bench';

const KEY = 'rrf-bench';
const DISTRACTORS = 300;
/** Fresh databases scored; the mean smooths out tie-breaks by random UUID. */
const REPETITIONS = 5;

type Kind = 'synonym' | 'rare token' | 'mixed';

interface Labelled {
  kind: Kind;
  /** The one relevant memory. */
  target: string;
  query: string;
  /** The token the model must not know (rare token and mixed items). */
  rare?: string;
  /** Look-alike memories: keyword traps for synonym items, vector traps for rare-token items. */
  near: string[];
}

const S = (target: string, query: string, near: string[]): Labelled => ({ kind: 'synonym', target, query, near });
const R = (rare: string, target: string, query: string, near: string[]): Labelled => ({ kind: 'rare token', rare, target, query, near });
const M = (rare: string, target: string, query: string, near: string[]): Labelled => ({ kind: 'mixed', rare, target, query, near });

/**
 * The labelled set. Synonym queries share no keyword with their target (only meaning), while
 * their look-alikes share the query's words; rare-token queries name an id or a made-up name the
 * model does not know plus a generic word that points the vector tier at the look-alikes; mixed
 * queries carry both a rare token and a paraphrase.
 */
const LABELLED: Labelled[] = [
  S('My daughter takes violin lessons every Thursday.', 'when does my kid have music class', ['The kid next door plays loud music at night.', 'The yoga class was cancelled this week.']),
  S('I am allergic to peanuts and shellfish.', 'which foods give me a reaction', ['Donate leftover foods to the local food bank.', 'Her reaction to the news was calm.']),
  S('Our production database runs on PostgreSQL 15.', 'what sql server do we use in prod', ['The game server in the basement uses a lot of power.', 'We use a shared calendar for vacations.']),
  S('The family dog is a golden retriever named Biscuit.', 'what breed is our puppy', ['The puppy training class starts at nine.', 'This apple breed is very sweet.']),
  S('I moved to Lisbon last spring.', 'which city did I relocate to', ['The city council meets on the first Monday.', 'Relocate the printer to the second floor.']),
  S('My wife works as a pediatric nurse at the hospital.', "what is my spouse's job", ['The job posting for a designer closed yesterday.']),
  S('I drive a silver hybrid sedan.', 'what car do I own', ['I own a vintage watch from my grandfather.', 'The car wash on Elm street is closed.']),
  S('The quarterly budget review happens in the boardroom.', 'where is the finance meeting held', ['The finance team held a party on Friday.', 'The meeting notes are in the shared folder.']),
  S('My favourite author is a Japanese novelist.', 'which writer do I like reading', ['I like reading the news on the train.']),
  S('I go jogging along the river every morning.', 'my daily running route', ['The daily standup starts at ten.', 'The bus route changed last week.']),
  S('My son is studying chemistry at university.', 'what does my boy major in at college', ['The college football game is on Saturday.', 'Major roadworks block the main street.']),
  S('The office wifi password changes monthly.', 'how often is the wireless key rotated', ['The spare key is under the flower pot.', 'Tires should be rotated every season.']),
  S('I prefer aisle seats on long flights.', 'seating preference when flying on a plane', ['The plane tickets for the conference are booked.', 'My preference is to work from home on Fridays.']),
  S("Grandma's birthday is in early October.", 'when was my grandmother born', ["My grandmother's recipe for apple pie is in the drawer."]),
  S('The kitchen sink has been leaking since Sunday.', 'plumbing problem at home', ['The home office needs a better chair.', 'There is a problem with the printer driver.']),
  S('I am vegetarian and never eat meat.', 'dietary restrictions', ['Parking restrictions apply downtown on weekdays.']),
  S('Our team uses Slack for chat and Jira for tickets.', 'which messaging tool does the group use', ['The hiking group meets at the trailhead.', 'Use the blue tool box for garden work.']),
  S('My doctor prescribed medication for high blood pressure.', 'what pills am I taking for hypertension', ['Taking the train is faster than driving.']),
  S('The car insurance renewal is due in March.', 'when does the auto policy expire', ['The new remote work policy starts soon.', 'Coupons expire at the end of the month.']),
  S('I am learning to speak Spanish with an app.', 'which language am I studying', ['The programming language for the backend is Go.', 'Studying for the exam takes most evenings.']),
  S('We adopted two kittens from the shelter.', 'how many cats do we have', ['We have many plants on the balcony.']),
  S('The laptop battery drains quickly and needs replacement.', 'my notebook computer power issue', ['The power went out during the storm.', 'My notebook is full of meeting notes.']),
  S('My brother is getting married in June.', 'sibling wedding date', ['The wedding photographer sent the invoice.', 'The release date slipped by a week.']),
  S('The apartment lease ends next summer.', 'when does my rental contract finish', ['The rental car must be returned with a full tank.', 'Finish the slides before the contract review.']),

  R('zq48213', 'Invoice zq48213 for the catering order was paid late.', 'zq48213 payment', ['The payment for the catering invoice went through.', 'Payment reminders go out on the first of the month.']),
  R('kelvaro', 'Kelvaro from accounting approves all travel expenses.', 'what does Kelvaro handle', ['Handle the fragile boxes with care.']),
  R('qtx7731', 'The staging cluster hostname is qtx7731.', 'qtx7731 login', ['The login page for the staging cluster is slow.']),
  R('zanthor', 'Project Zanthor ships its beta in the autumn.', 'zanthor launch date', ['The launch date of the mobile app moved to spring.']),
  R('tk55ab2', 'Order tk55ab2 contains two pizzas and a salad.', 'status of order tk55ab2', ['The order of pizzas for the party arrived cold.']),
  R('mbeleqwa', 'Dr. Mbeleqwa is my dentist.', 'appointment with Mbeleqwa', ['My dentist appointment is on Tuesday morning.']),
  R('frenzlow', 'The wifi network at the cabin is called Frenzlow.', 'frenzlow password', ['The guest wifi password is on the fridge.']),
  R('vxq9041', 'Ticket vxq9041 tracks the checkout crash.', 'vxq9041 progress', ['The checkout crash was fixed in the last release.', 'Progress on the hiring plan is slow.']),
  R('ostravik', 'Our landlord Ostravik collects rent on the first.', 'pay Ostravik', ['Pay the electricity bill before Friday.']),
  R('skb7xq', 'The sandbox key for billing starts with skb7xq.', 'skb7xq sandbox', ['The billing sandbox resets every night.']),
  R('trelawnyx', 'Trelawnyx is the codename of the mobile redesign.', 'trelawnyx status', ['The status page shows all systems green.']),
  R('p44zr', 'Pick up the parcel at locker p44zr near the station.', 'where is locker p44zr', ['The gym locker room is being renovated.']),
  R('quennbury', 'Quennbury Bakery makes the best sourdough in town.', 'quennbury opening hours', ['The library opening hours changed for the summer.']),
  R('gm20931x', 'My gym membership number is gm20931x.', 'gm20931x membership', ['The museum membership renews every year.']),
  R('e7kq', 'The coffee machine error code e7kq means it needs descaling.', 'e7kq error', ['The printer shows an error when the tray is empty.']),
  R('albrinth', 'Albrinth Labs sponsors the hackathon in May.', 'albrinth sponsorship deal', ['The sponsorship deal with the football club ended.']),
  R('ux8812', 'Flight ux8812 to Oslo departs at seven.', 'ux8812 departure time', ['The train departure time is printed on the ticket.']),
  R('vorquist', 'The Vorquist account renews every January.', 'vorquist renewal', ['The passport renewal takes six weeks.']),
  R('yeldrin', 'Cousin Yeldrin is visiting for the holidays.', 'when is Yeldrin coming', ['When is the plumber coming to fix the sink?']),
  R('hexpath', 'The repository hexpath-core holds the parser code.', 'hexpath source', ['The source code for the website is on the shared drive.']),
  R('zorvath', 'Zorvath pottery class meets on Wednesdays.', 'zorvath schedule', ['The school schedule for next term is online.']),
  R('pk3391t', 'The parking permit code is pk3391t.', 'pk3391t permit', ['The building permit for the garage was approved.']),

  M('brennix', 'Brennix replaced the broken dishwasher last week.', 'did Brennix repair the kitchen appliance', ['The kitchen appliance store has a sale.', 'Someone should repair the fence.']),
  M('ulvanek', 'The Ulvanek contract covers cleaning services for the office.', 'Ulvanek agreement janitorial', ['The agreement with the landlord covers parking.']),
  M('prazzle', 'My accountant Prazzle files the taxes every April.', 'who does my tax return, Prazzle?', ['Tax return forms are in the blue folder.']),
  M('snorvik', 'Snorvik Airlines lost my suitcase in Chicago.', 'Snorvik missing luggage', ['Missing luggage claims take two weeks.']),
  M('dravel', 'The Dravel router reboots itself every night at midnight.', 'dravel modem restarts', ['The modem in the guest room is unplugged.']),
  M('quillam', 'Fenwick Quillam tutors my son in mathematics.', 'Quillam math teacher', ['The math exam is next Thursday.', 'The teacher sent a note about homework.']),
  M('hollaran', 'The Hollaran grant pays for the research assistants.', 'Hollaran funding for staff', ['Funding for the new playground was approved.']),
  M('orbani', 'Vetch Orbani is our contact at the shipping company.', 'Orbani logistics person', ['The logistics team moved to the third floor.']),
];

/** (fts, vector) weight pairs; RRF ranks depend only on their ratio, so pairs with equal ratios must tie. */
const WEIGHTS: [number, number][] = [
  [1, 1],
  [1, 0.5],
  [0.5, 1],
  [1, 2],
  [2, 1],
  [1, 3],
  [3, 1],
];

const words = (s: string) => s.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean);

interface Config {
  label: string;
  fts: number | string;
  vector: number | string;
  build: (d: RetrievalDeps, fallback: Retriever) => Retriever;
  strategy: RetrievalStrategy;
}

// This bench measures RRF's env weights: every hybrid call asks for the rrf fusion (the default is convex since issue #10).
const weighted = (fts: number, vector: number) => (d: RetrievalDeps) =>
  new RetrievalService({ ...d, env: { ...d.env, MEMORY_RRF_FTS_WEIGHT: fts, MEMORY_RRF_VECTOR_WEIGHT: vector } });

const CONFIGS: Config[] = [
  { label: 'keyword only (hybrid, vector weight 0)', fts: 1, vector: 0, build: weighted(1, 0), strategy: 'hybrid' },
  { label: 'vector only (semantic)', fts: '-', vector: '-', build: (_d, own) => own, strategy: 'semantic' },
  ...WEIGHTS.map(([f, v]): Config => ({ label: `hybrid (${f}, ${v})`, fts: f, vector: v, build: weighted(f, v), strategy: 'hybrid' })),
];

const KINDS: Kind[] = ['synonym', 'rare token', 'mixed'];

/** One repetition's outcome per config: reciprocal ranks per kind, top-3 hits, keyword fallbacks. */
interface Outcome {
  rr: Record<Kind, number[]>;
  hits3: number;
  fallbacks: number;
}

interface Repetition {
  outcomes: Outcome[];
  memories: number;
  overlapping: string[];
  known: string[];
  rrfK: number;
  topK: number;
}

/** Seeds the labelled set into a fresh database (fresh UUIDs), embeds it and scores every config once. */
async function repetition(model: BenchModel): Promise<Repetition> {
  const env = testEnv({ MEMORY_STATIC_MODEL: model.folder, QUEUE_PREFIX: testPrefix('bench-rrf') });
  const ctx = buildApiContext(env, silentLog());
  try {
    if (!ctx.db.vecLoaded) throw new Error('sqlite-vec is not available: there is no vector tier to weigh');
    const settings: EmbeddingSettings = useStaticSource(ctx);
    const writer = new MemoryService(ctx.db.db, new MemoryReadCache(100, 60_000));
    const corpus = new Corpus(model);
    const r = rng(2024);
    seedMemories(writer, KEY, DISTRACTORS, () => corpus.memory(r));
    const near = LABELLED.flatMap((l) => l.near);
    seedMemories(writer, KEY, near.length, (i) => near[i]);
    seedMemories(writer, KEY, LABELLED.length, (i) => LABELLED[i].target);
    const byContent = new Map<string, string>();
    for (const row of ctx.db.db.prepare('SELECT id, content FROM memories WHERE api_key_id = ?').all(KEY) as { id: string; content: string }[]) byContent.set(row.content, row.id);

    const probe = await ctx.embedding.embedOne('engram dimension probe', settings);
    const dim = probe.resolution.dimensions!;
    const signature = ctx.vectors.signatureFor(probe.resolution)!;
    ctx.vectors.rebuild(signature, dim);
    await embedPending(ctx.embedding, ctx.vectors, settings, signature, dim);

    // Sanity of the fixture itself, printed so a reader can trust (or doubt) the categories.
    const overlapping = LABELLED.filter((l) => l.kind === 'synonym')
      .filter((l) => {
        const t = new Set(words(l.target));
        return words((buildFtsQuery(l.query) ?? '').replace(/"/g, ' ')).some((w) => w !== 'or' && t.has(w));
      })
      .map((l) => l.query);
    const known: string[] = [];
    for (const l of LABELLED) if (l.rare && (await ctx.embedding.embedOne(l.rare, settings)).vector !== null) known.push(l.rare);

    const outcomes: Outcome[] = [];
    for (const c of CONFIGS) {
      const retriever = c.build(retrievalDeps(ctx), ctx.retrieval);
      const o: Outcome = { rr: { synonym: [], 'rare token': [], mixed: [] }, hits3: 0, fallbacks: 0 };
      for (const l of LABELLED) {
        const res = await retriever.retrieve(KEY, { query: l.query, strategy: c.strategy, maxTokens: 16_000, retentionDays: 30, fusion: { method: 'rrf' } }, { preview: true });
        if (res.resolution.fallbackReason) o.fallbacks++;
        const pos = res.items.findIndex((it) => it.memory.id === byContent.get(l.target));
        o.rr[l.kind].push(pos >= 0 ? 1 / (pos + 1) : 0);
        if (pos >= 0 && pos < 3) o.hits3++;
      }
      outcomes.push(o);
    }
    const memories = (ctx.db.db.prepare('SELECT COUNT(*) AS n FROM memories WHERE api_key_id = ?').get(KEY) as { n: number }).n;
    return { outcomes, memories, overlapping, known, rrfK: env.MEMORY_RRF_K, topK: env.MEMORY_VEC_TOP_K };
  } finally {
    await closeBenchContext(ctx, env);
  }
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const r3 = (x: number) => Number(x.toFixed(3));

/** Prints MRR and recall@3 on a labelled set for keyword-only, vector-only and weighted hybrid retrieval (wink static model), and says which won; never asserts. */
export async function runRrfWeightBench(): Promise<void> {
  const model = benchStaticModel();
  const reps: Repetition[] = [];
  for (let i = 0; i < REPETITIONS; i++) reps.push(await repetition(model));

  const scores = CONFIGS.map((c, ci) => {
    const per = reps.map((rep) => rep.outcomes[ci]);
    const mrrs = per.map((o) => mean(KINDS.flatMap((k) => o.rr[k])));
    return {
      c,
      mrr: mean(mrrs),
      min: Math.min(...mrrs),
      max: Math.max(...mrrs),
      recall3: mean(per.map((o) => o.hits3 / LABELLED.length)),
      byKind: Object.fromEntries(KINDS.map((k) => [k, mean(per.map((o) => mean(o.rr[k])))])) as Record<Kind, number>,
      fallbacks: per.reduce((a, o) => a + o.fallbacks, 0),
    };
  });
  const rows = scores.map((s) => ({
    config: s.c.label,
    'fts w': s.c.fts,
    'vector w': s.c.vector,
    MRR: r3(s.mrr),
    'MRR min–max': `${s.min.toFixed(3)}–${s.max.toFixed(3)}`,
    'recall@3': r3(s.recall3),
    ...Object.fromEntries(KINDS.map((k) => [`MRR ${k} (n=${LABELLED.filter((l) => l.kind === k).length})`, r3(s.byKind[k])])),
    'keyword fallbacks': s.fallbacks,
  }));

  const first = reps[0];
  console.log(
    `RRF weight bench: ${LABELLED.length} labelled queries (${KINDS.map((k) => `${LABELLED.filter((l) => l.kind === k).length} ${k}`).join(', ')}) ` +
      `over ${first.memories} memories of one key; model ${model.label}; RRF k = ${first.rrfK}, vector top-k = ${first.topK}, maxTokens 16000; ` +
      `mean of ${REPETITIONS} fresh databases (RRF ties are broken by the random memory UUID, so one run alone is noisy)`,
  );
  console.log(
    `fixture check: synonym queries sharing a keyword with their target: ${first.overlapping.length}${first.overlapping.length ? ` (${first.overlapping.join('; ')})` : ''}; ` +
      `rare tokens the model knows: ${first.known.length}${first.known.length ? ` (${first.known.join(', ')})` : ''}`,
  );
  console.table(rows);
  if (model.fixture) console.log('NOTE: the fixture model knows no English, so the vector tier is mostly absent here: do not choose weights from this run.');

  const best = Math.max(...scores.map((s) => s.mrr));
  const winners = scores.filter((s) => s.mrr === best);
  const topRecall = Math.max(...winners.map((w) => w.recall3));
  const won = winners.filter((w) => w.recall3 === topRecall);
  console.log(`winner (mean MRR, then recall@3): ${won.map((w) => w.c.label).join(' = ')} — MRR ${best.toFixed(3)}, recall@3 ${topRecall.toFixed(3)}`);
  const hybrids = scores.filter((s) => s.c.strategy === 'hybrid' && s.c.vector !== 0);
  const bestHybrid = hybrids.reduce((a, b) => (b.mrr > a.mrr ? b : a));
  console.log(`best fusion: ${bestHybrid.c.label} — MRR ${bestHybrid.mrr.toFixed(3)}, recall@3 ${bestHybrid.recall3.toFixed(3)}`);
  const eq = scores.find((s) => s.c.label === 'hybrid (1, 1)')!;
  const singles = scores.slice(0, 2);
  const lostTo = singles.filter((s) => s.mrr > eq.mrr);
  console.log(
    lostTo.length
      ? `equal-weight fusion (1, 1) LOSES to ${lostTo.map((s) => `${s.c.label} (MRR ${s.mrr.toFixed(3)} vs ${eq.mrr.toFixed(3)})`).join(' and ')}`
      : `equal-weight fusion (1, 1) does not lose to either single tier (MRR ${eq.mrr.toFixed(3)} vs keyword ${singles[0].mrr.toFixed(3)}, vector ${singles[1].mrr.toFixed(3)})`,
  );
  console.log('(1, 2) = (0.5, 1) and (2, 1) = (1, 0.5): RRF ranks depend only on the weight ratio, so those rows match.');
}

if (require.main === module) {
  runRrfWeightBench().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
