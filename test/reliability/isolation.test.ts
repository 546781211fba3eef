/**
 * Issue 15 item 2: tenant isolation, generated. Client key A and client key B on one api: for every route of the router
 * table and every MCP tool, prompt and resource (each must be classified here; a new one fails until it is), A can
 * neither see, change nor delete anything of B, nor infer it: what A observes (bodies, x-memory-* headers, what the
 * proxy forwards upstream, error codes and messages) is the same whether or not B holds matching memories, and the
 * same for an id that is B's as for one that does not exist. fast-check generates the operations and B's changes.
 */
import crypto from 'node:crypto';
import http from 'node:http';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import fc from 'fast-check';
import request from 'supertest';
import { buildTestApi, type TestApi } from '../helpers/api';
import { testEnv } from '../helpers/env';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream';
import { listenLoopback } from '../helpers/loopback';
import { callTool, httpMcpClient } from '../helpers/mcp-client';
import { concretePath, walkRoutes } from '../helpers/routes';
import type { Memory } from '../../src/memory/types';

const RUNS = Number(process.env.ISOLATION_RUNS ?? 150);
const SEED = process.env.FUZZ_SEED !== undefined ? Number(process.env.FUZZ_SEED) : 20261203;

/**
 * Every non-/api route: how a client key meets it. /api/* (and anything under it added later) is operator-only by
 * its mount (management token or admin session): checked per route below, with A's key.
 */
const ROUTES: Record<string, 'tenant' | 'public' | 'operator'> = {
  'POST /v1/chat/completions': 'tenant',
  'POST /v1/memory/inject': 'tenant',
  'POST /v1/memory/observe': 'tenant',
  'GET /v1/models': 'tenant',
  'GET /v1/models/:id': 'tenant',
  'POST /mcp': 'tenant',
  'GET /mcp': 'tenant',
  'DELETE /mcp': 'tenant',
  'GET /healthz': 'public',
  'GET /readyz': 'public',
  'GET /metrics': 'operator',
  'GET /openapi.json': 'public',
  'GET /docs': 'public',
  'GET /docs/init.js': 'public',
  'GET /docs/assets/:file': 'public',
  'GET /dashboard': 'public',
  'GET /admin/login': 'public',
  'POST /admin/login': 'public',
  'POST /admin/logout': 'public',
};
/** The MCP surface, classified. */
const MCP_TOOLS = ['omniroute_memory_add', 'omniroute_memory_clear', 'omniroute_memory_search'];
const MCP_PROMPTS = ['remember-context'];
const MCP_RESOURCE_TEMPLATES = ['memory://{id}'];

/** Words only B's memories hold (A must never see them), words both hold, and A's own. */
const B_ONLY = ['quokka', 'zanzibar', 'marmalade', 'obsidian', 'tangerine', 'harpsichord'];
const SHARED = ['editor', 'coffee', 'python', 'garden', 'travel', 'music'];
const A_ONLY = ['helix', 'espresso', 'rust', 'tulips'];

type Obs = Record<string, unknown>;

describe('tenant isolation (generated from the router table and the MCP tool list)', () => {
  let t: TestApi;
  let fake: FakeUpstream;
  let server: http.Server;
  let close: () => Promise<void>;
  let url: string;
  let a: { id: string; key: string };
  let b: { id: string; key: string };
  let mcpA: Client;
  const bSecrets = new Set<string>();
  const bIds: string[] = [];
  const aIds: string[] = [];

  const addFor = async (apiKeyId: string, content: string, key: string) => (await t.ctx.backends.create({ apiKeyId, sessionId: 's', type: 'factual', key, content, metadata: {} }, { source: 'api' })).memory;
  const addB = async (words: string[]) => {
    const secret = `bsecret${crypto.randomBytes(5).toString('hex')}`;
    bSecrets.add(secret);
    const m = await addFor(b.id, `${words.join(' ')} ${secret}`, `bkey-${secret}`);
    bIds.push(m.id);
    return m;
  };
  /** B's rows as the database holds them (and their history): what A must never change. */
  const bState = () =>
    JSON.stringify([
      t.ctx.db.db.prepare('SELECT id, key, content, type, session_id, updated_at FROM memories WHERE api_key_id = ? ORDER BY id').all(b.id),
      t.ctx.db.db.prepare('SELECT count(*) AS n FROM memory_events WHERE api_key_id = ?').get(b.id),
    ]);

  beforeAll(async () => {
    fake = await startFakeUpstream();
    t = buildTestApi(testEnv({ UPSTREAM_BASE_URL: `${fake.url}/v1`, UPSTREAM_API_KEY: 'sk-fake' }));
    server = http.createServer(t.app);
    const l = await listenLoopback(server);
    close = l.close;
    url = `http://127.0.0.1:${l.port}`;
    a = t.ctx.apiKeys.create('tenant-a');
    b = t.ctx.apiKeys.create('tenant-b');
    // Injection on (it is off by default), with a budget that takes several memories.
    await request(t.app).put('/api/settings/memory').set(t.auth).send({ enabled: true, maxTokens: 400 }).expect(200);
    for (let i = 0; i < 8; i++) {
      const words = [SHARED[i % SHARED.length], SHARED[(i + 2) % SHARED.length], A_ONLY[i % A_ONLY.length], ...Array(i % 3).fill(SHARED[(i + 1) % SHARED.length])];
      aIds.push((await addFor(a.id, `The user mentions ${words.join(' ')} often`, `a-${i}`)).id);
    }
    for (let i = 0; i < 8; i++) await addB([SHARED[i % SHARED.length], B_ONLY[i % B_ONLY.length]]);
    mcpA = await httpMcpClient(`${url}/mcp`, a.key);
  });

  afterAll(async () => {
    await mcpA?.close().catch(() => undefined);
    await close?.();
    await t?.close();
    await fake?.close();
  });

  const leaksB = (text: string): string | null => {
    for (const s of [...bSecrets, b.id, b.key, ...bIds]) if (text.includes(s)) return s;
    return null;
  };

  it('classifies every route and every MCP tool, prompt and resource (a new one must be added here)', async () => {
    const unclassified = walkRoutes(t.app)
      .map((r) => `${r.method} ${r.path}`)
      .filter((r) => !r.split(' ')[1].startsWith('/api/') && !(r in ROUTES));
    expect(unclassified).toEqual([]);
    expect((await mcpA.listTools()).tools.map((x) => x.name).sort()).toEqual(MCP_TOOLS);
    expect((await mcpA.listPrompts()).prompts.map((x) => x.name).sort()).toEqual(MCP_PROMPTS);
    expect((await mcpA.listResourceTemplates()).resourceTemplates.map((x) => x.uriTemplate).sort()).toEqual(MCP_RESOURCE_TEMPLATES);
  });

  it("A's key is refused on every operator route and public routes show nothing of B", async () => {
    const before = bState();
    for (const r of walkRoutes(t.app)) {
      const key = `${r.method} ${r.path}`;
      const cls = r.path.startsWith('/api/') ? 'operator' : ROUTES[key];
      if (cls === 'tenant') continue;
      const method = r.method.toLowerCase() as 'get' | 'post' | 'put' | 'delete';
      const path = concretePath(r.path).replace('00000000-0000-4000-8000-000000000000', bIds[0]);
      const res = await request(t.app)[method](path).set('authorization', `Bearer ${a.key}`).set('accept', 'application/json').send({ apiKeyId: b.id, id: bIds[0] });
      if (cls === 'operator') expect({ key, status: res.status }).toEqual({ key, status: 403 });
      expect({ key, leak: leaksB(res.text ?? '') }).toEqual({ key, leak: null });
    }
    expect(bState()).toBe(before);
  });

  /** Sorted so that JSON comparison ignores key order; volatile fields (ids, times of this request) are dropped. */
  const stable = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(stable);
    if (v && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const k of Object.keys(v).sort()) if (!['id', 'created', 'requestId', 'jobId', 'lastAccessedAt', 'accessCount'].includes(k) || typeof (v as Obs)[k] === 'object') out[k] = stable((v as Obs)[k]);
      return out;
    }
    return v;
  };
  const memHeaders = (h: Record<string, unknown>) => Object.fromEntries(Object.entries(h).filter(([k]) => k.startsWith('x-memory-')));

  type Op = { kind: string; run: () => Promise<Obs> };

  /** What A observes from one read-only operation; compared before and after B's memories change. */
  function readOp(kind: string, query: string, extra: { apiKeyId?: string; id?: string; limit?: number }): Op {
    const messages = [{ role: 'user', content: query }];
    switch (kind) {
      case 'inject':
        return {
          kind,
          run: async () => {
            const r = await request(t.app).post('/v1/memory/inject').set('authorization', `Bearer ${a.key}`).send({ model: 'gpt-4o-mini', messages });
            return { status: r.status, headers: memHeaders(r.headers), body: r.body };
          },
        };
      case 'chat':
        return {
          kind,
          run: async () => {
            fake.reset();
            const r = await request(t.app).post('/v1/chat/completions').set('authorization', `Bearer ${a.key}`).send({ model: 'gpt-4o-mini', messages });
            return { status: r.status, headers: memHeaders(r.headers), forwarded: fake.requests.map((x) => x.body) };
          },
        };
      case 'search':
        return { kind, run: async () => ({ ...(await callTool(mcpA, 'omniroute_memory_search', { query, ...(extra.limit ? { limit: extra.limit } : {}), ...(extra.apiKeyId ? { apiKeyId: extra.apiKeyId } : {}) })) }) };
      case 'prompt':
        return {
          kind,
          run: async () => {
            const r = await mcpA.getPrompt({ name: 'remember-context', arguments: { query, ...(extra.apiKeyId ? { apiKeyId: extra.apiKeyId } : {}) } }).catch((e: Error) => ({ error: e.message.replaceAll(extra.apiKeyId ?? '\u0000', '<id>') }));
            return r as Obs;
          },
        };
      case 'resources':
        return { kind, run: async () => (await mcpA.listResources()) as Obs };
      case 'models':
        return {
          kind,
          run: async () => {
            const r = await request(t.app).get('/v1/models').set('authorization', `Bearer ${a.key}`);
            return { status: r.status, body: r.body };
          },
        };
      default:
        throw new Error(`unclassified read op ${kind}`);
    }
  }

  const queryArb = fc
    .array(fc.oneof(fc.constantFrom(...SHARED), fc.constantFrom(...A_ONLY), fc.constantFrom(...B_ONLY), fc.constantFrom('NEAR(editor coffee)', '"python', 'music*', 'AND', 'garden OR travel')), { minLength: 1, maxLength: 4 })
    .map((w) => w.join(' '));

  it("what A reads does not depend on B's memories, and never shows them (generated)", async () => {
    const mismatches: string[] = [];
    let cases = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('inject', 'chat', 'search', 'prompt', 'resources', 'models'),
        queryArb,
        fc.record({ limit: fc.option(fc.integer({ min: 1, max: 5 }), { nil: undefined }) }),
        // B's change between A's two reads: memories with the query's words (many, to move any corpus statistic), or a deletion.
        fc.record({ add: fc.integer({ min: 1, max: 12 }), remove: fc.boolean() }),
        async (kind, query, extra, change) => {
          cases++;
          const op = readOp(kind, query, extra);
          const first = await op.run();
          const words = query.split(/\s+/).filter((w) => /^[a-z]+$/.test(w));
          for (let i = 0; i < change.add; i++) await addB(words.length ? [words[i % words.length], words[(i + 1) % words.length]] : ['filler']);
          if (change.remove && bIds.length > 4) await t.ctx.backends.deleteMany([bIds.shift()!], { source: 'api' });
          const second = await op.run();
          const text = JSON.stringify([first, second]);
          const leak = leaksB(text);
          if (leak) throw new Error(`${kind} "${query}": A saw B's ${leak}`);
          // Exactly the same answer, order included: A's ranking uses A's statistics only (keyword-index.ts).
          if (JSON.stringify(stable(first)) !== JSON.stringify(stable(second))) {
            mismatches.push(`${kind} "${query}": ${JSON.stringify(stable(first)).slice(0, 400)}\n   vs ${JSON.stringify(stable(second)).slice(0, 400)}`);
          }
          expect({ kind, query, view: stable(second) }).toEqual({ kind, query, view: stable(first) });
        },
      ),
      { numRuns: RUNS, seed: SEED },
    );
    console.log(`isolation (reads): ${cases} cases, seed ${SEED}, none showed B's data; ${mismatches.length} where A's answer changed with B's memories`);
  });

  /**
   * Issue 15 item 2, the channel stop 19 measured and left open: FTS5's bm25() ranked with statistics over every
   * key's rows (row count, rows per term, average length), so B's memories moved A's idf and the order in which A's
   * own memories were injected (5 of 150 generated cases); the common-term drop had the same channel. A key's
   * keyword ranking now uses its own in-memory index (src/memory/keyword-index.ts). This case failed before.
   */
  it("the order of A's injected memories does not depend on B's memories (per-key bm25 statistics)", async () => {
    const k = t.ctx.apiKeys.create('order-a');
    const other = t.ctx.apiKeys.create('order-b');
    // Equally rare words: the shorter row ranks first.
    await addFor(k.id, 'alpinia pots', 'o-1');
    await addFor(k.id, 'The user drinks betony tea every day', 'o-2');
    const order = async () => {
      const r = await request(t.app).post('/v1/memory/inject').set('authorization', `Bearer ${k.key}`).send({ messages: [{ role: 'user', content: 'alpinia betony' }] });
      return JSON.stringify(r.body.body.messages);
    };
    const before = await order();
    expect(before.indexOf('alpinia pots')).toBeLessThan(before.indexOf('betony'));
    // B writes many rows with one of the two words: its idf falls for everyone.
    for (let i = 0; i < 40; i++) await addFor(other.id, `alpinia note ${i}`, `ob-${i}`);
    expect(await order()).toBe(before);
  });

  it("naming B (or B's memory) is answered exactly like naming nothing that exists, and changes nothing of B (generated)", async () => {
    const before = bState();
    const aCount = () => (t.ctx.db.db.prepare('SELECT count(*) AS n FROM memories WHERE api_key_id = ?').get(a.id) as { n: number }).n;
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('add', 'clear', 'search', 'prompt', 'resource'), fc.constantFrom(...B_ONLY, ...SHARED), async (kind, word) => {
        const missingKey = `k_${crypto.randomBytes(8).toString('hex')}`;
        const bMemory = bIds[bIds.length - 1];
        const missingMemory = crypto.randomUUID();
        const call = async (target: string, memoryId: string) => {
          const norm = (s: string) => s.replaceAll(target, '<id>').replaceAll(memoryId, '<id>');
          if (kind === 'resource') {
            const r = await mcpA.readResource({ uri: `memory://${memoryId}` }).then((x) => JSON.stringify(x), (e: Error) => `error: ${e.message}`);
            return norm(r);
          }
          if (kind === 'prompt') return norm(await mcpA.getPrompt({ name: 'remember-context', arguments: { query: word, apiKeyId: target } }).then((x) => JSON.stringify(x), (e: Error) => `error: ${e.message}`));
          const args: Record<string, unknown> = { apiKeyId: target };
          if (kind === 'add') Object.assign(args, { type: 'factual', key: `x-${word}`, content: `planted ${word}` });
          if (kind === 'search') args.query = word;
          const r = await callTool(mcpA, `omniroute_memory_${kind}`, args);
          return norm(`${r.isError} ${r.text}`);
        };
        const aBefore = aCount();
        const forB = await call(b.id, bMemory);
        const forNobody = await call(missingKey, missingMemory);
        expect({ kind, forB }).toEqual({ kind, forB: forNobody });
        expect(leaksB(forB)).toBeNull();
        // Refused: a tool's isError, a prompt's or resource's JSON-RPC error.
        expect(forB).toMatch(/^(true |error: )/);
        expect(aCount()).toBe(aBefore);
        expect(bState()).toBe(before);
      }),
      { numRuns: Math.max(20, Math.round(RUNS / 3)), seed: SEED },
    );
  });

  it("A's own writes (MCP add and clear, /v1/memory/observe, chat extraction) touch only A (generated)", async () => {
    const before = bState();
    const extraction = t.ctx.queues.allQueues().find((q) => q.name === 'extraction')!;
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('add', 'clear', 'clear-type', 'observe', 'chat'), fc.constantFrom(...SHARED, ...B_ONLY), async (kind, word) => {
        if (kind === 'add') {
          const r = await callTool(mcpA, 'omniroute_memory_add', { type: 'factual', key: `w-${word}`, content: `A likes ${word}` });
          expect((r.json as { data: { memory: Memory } }).data.memory.apiKeyId).toBe(a.id);
        } else if (kind === 'clear' || kind === 'clear-type') {
          const r = await callTool(mcpA, 'omniroute_memory_clear', kind === 'clear' ? {} : { type: 'factual' });
          expect(r.isError).toBe(false);
          expect((t.ctx.db.db.prepare('SELECT count(*) AS n FROM memories WHERE api_key_id = ?').get(a.id) as { n: number }).n).toBe(0);
        } else {
          const path = kind === 'observe' ? '/v1/memory/observe' : '/v1/chat/completions';
          const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `I love ${word} and my name is A` }], ...(kind === 'observe' ? { assistantText: 'Noted.' } : {}) };
          const r = await request(t.app).post(path).set('authorization', `Bearer ${a.key}`).send(body);
          expect(r.status).toBeLessThan(300);
          // The extraction job that will write facts names A's key, never another.
          await new Promise((res) => setTimeout(res, 30));
          const jobs = await extraction.getJobs(['waiting', 'delayed', 'prioritized', 'paused'], 0, 1000);
          for (const j of jobs) expect([a.id]).toContain((j.data as { apiKeyId: string }).apiKeyId);
        }
        expect(bState()).toBe(before);
      }),
      { numRuns: Math.max(20, Math.round(RUNS / 3)), seed: SEED },
    );
  });
});
