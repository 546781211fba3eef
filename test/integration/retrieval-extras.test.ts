/**
 * Issue #10 item 4: the hybrid extras (keyword floor, vector floor, RM3 feedback, temporal boost)
 * change the ranking through the real RetrievalService and the real routes, each a validated
 * setting and a retrieve-preview override (keyword floor 0.1 and temporal boost 0.3 on by default).
 */
import path from 'node:path';
import request from 'supertest';
import { startWorker, type RunningWorker } from '../../workers/main';
import { memoryInput } from '../factories';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, tempDir, testEnv } from '../helpers/env';
import { topicModelSpec, writeModel2VecFolder } from '../helpers/model-fixtures';
import { waitUntil } from '../helpers/wait';

const api = { source: 'api' as const };

describe('retrieval extras (issue #10 item 4)', () => {
  let t: TestApi;
  let w: RunningWorker;
  const folder = writeModel2VecFolder(path.join(tempDir('models'), 'topics'), topicModelSpec(16, 40));
  const m = (apiKeyId: string, key: string, content: string, metadata: Record<string, unknown> = {}) =>
    t.ctx.memory.create(memoryInput({ apiKeyId, key, content, metadata }), api);

  beforeAll(async () => {
    const env = testEnv({ MEMORY_STATIC_MODEL: folder, REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0' });
    t = buildTestApi(env);
    w = await startWorker(env, silentLog());
    // F: the answer shares no word with the question (only meaning: puppy ~ dog); a few rows match only the
    // name, which is rare among F's rows (bm25's statistics are the key's own), so its idf is high.
    m('F', 'answer', 'the dog sleeps all day');
    for (let i = 0; i < 8; i++) m('F', `name${i}`, `Zora: ${['rain', 'snow', 'pizza', 'bread'][i % 4]} today ${i}`);
    // "get" is common in F (low idf, and left out of the MATCH), "Zora" rare (8 of 408 rows, under the 2% that
    // counts as common): a name-only row scores most of the query's idf mass.
    for (let i = 0; i < 400; i++) m('F', `pad${i}`, `unrelated padding note ${i}${i < 300 ? ' get' : ''}`);
    // Another key's rows never move F's statistics: X holds the query's words many times.
    for (let i = 0; i < 60; i++) m('X', `pad${i}`, `Zora puppy note ${i}`);
    // T: Maya's rows in several months; the December 2021 ones are long (weak bm25), 120 others short.
    m('T', 'skiing', 'Maya: spent whole week skiing up north, cousins came too, glorious fun', { date: '2021-12-10' });
    m('T', 'painting', 'Maya: finally painted our kitchen dark green over that long weekend at home');
    m('T', 'storm', 'the storm kept us inside');
    for (let i = 0; i < 120; i++) m('T', `other${i}`, `Maya: ok ${i}`, { date: '2021-03-01' });
    // P: the answer shares no word with the question but several with the rows that match it.
    m('P', 'plan', 'marathon plan: intervals every tuesday, long run sunday');
    m('P', 'plan2', 'marathon intervals again, legs heavy');
    m('P', 'target', 'intervals felt brutal on that track');
    // Enough other rows that the shared words are rare among P's (bm25's statistics are the key's own).
    for (let i = 0; i < 60; i++) m('P', `noise${i}`, `the storm ${i}`);
    t.ctx.db.db.prepare("UPDATE memories SET created_at = '2021-12-20T10:00:00.000Z' WHERE key = 'painting'").run();
    t.ctx.settings.updateMemory({ embeddingSource: 'static', staticEnabled: true });
    await t.ctx.queues.enqueue('reindex', { force: false, trigger: 'api' });
    await waitUntil(() => t.ctx.vectors.stats().needsReindex === 0 && t.ctx.vectors.stats().rowCount > 0, 20_000, 'index built');
  });
  afterAll(async () => {
    await w.stop();
    await t.close();
  });

  const preview = async (body: Record<string, unknown>) => {
    const r = await request(t.app).post('/api/memory/retrieve-preview').set(t.auth).send({ limit: 20, ...body });
    expect(r.status).toBe(200);
    return r.body as { memories: { key: string; vecScore: number | null; ftsScore: number | null }[] };
  };
  const keys = async (body: Record<string, unknown>) => (await preview(body)).memories.map((x) => x.key);

  it('keyword floor: name-only matches stop crowding out a vector-only answer (setting and override)', async () => {
    const q = { query: 'Did Zora get a puppy?', apiKeyId: 'F' };
    const def = await keys(q);
    // Default: every name-only row outranks the answer the vector tier found.
    expect(def.indexOf('answer')).toBeGreaterThan(5);
    expect(def.filter((k) => k.startsWith('name'))).toHaveLength(8);
    const floored = await keys({ ...q, keywordFloor: 0.6 });
    expect(floored[0]).toBe('answer');
    expect(floored.filter((k) => k.startsWith('name'))).toEqual([]);
    // The same through the setting; an override null switches it off for one call.
    expect((await request(t.app).put('/api/settings/memory').set(t.auth).send({ hybridKeywordFloor: 0.6 })).body).toMatchObject({ hybridKeywordFloor: 0.6 });
    expect((await keys(q))[0]).toBe('answer');
    expect(await keys({ ...q, keywordFloor: null })).toEqual(def);
    expect((await request(t.app).put('/api/settings/memory').set(t.auth).send({ hybridKeywordFloor: null })).status).toBe(200);
    expect(await keys(q)).toEqual(def);
  });

  it('vector floor: weak vector hits (min-max below the floor) drop out, strong ones stay', async () => {
    // No keyword matches: the vector tier alone, its best hit min-max 1, the others below.
    const q = { query: 'kitten with cheese', apiKeyId: 'F' };
    const def = (await preview(q)).memories;
    expect(def.length).toBeGreaterThan(1);
    expect(def.every((x) => x.ftsScore === null)).toBe(true);
    const floored = (await preview({ ...q, vectorFloor: 0.99 })).memories;
    expect(floored.map((x) => x.key)).toEqual(def.filter((x) => x.vecScore === def[0].vecScore).map((x) => x.key));
    expect(floored.length).toBeLessThan(def.length);
  });

  it('temporal boost: a question naming a month brings that month\'s memories up, even beyond the keyword top 100', async () => {
    const q = { query: 'What did Maya do with the family in December 2021?', apiKeyId: 'T' };
    const def = await keys({ ...q, temporalBoost: null });
    // 120 short "Maya: ok" rows (metadata dated March 2021: "2021" matches too) beat both long December rows on
    // bm25; neither is among the keyword tier's 100.
    expect(def).not.toContain('skiing');
    expect(def).not.toContain('painting');
    const boosted = await keys({ ...q, temporalBoost: 0.5 });
    // On by default (0.3).
    expect((await keys(q)).slice(0, 2).sort()).toEqual(['painting', 'skiing']);
    // metadata.date and (without one) created_at both place a memory in the window.
    expect(boosted.slice(0, 2).sort()).toEqual(['painting', 'skiing']);
    // No window in the question: the boost changes nothing.
    // A keyword floor does not drop the window's rows (their words are weak, their date is the evidence).
    expect((await keys({ ...q, temporalBoost: 0.5, keywordFloor: 0.9 })).slice(0, 2).sort()).toEqual(['painting', 'skiing']);
    const noDate = { query: 'What did Maya do with the family?', apiKeyId: 'T' };
    expect(await keys({ ...noDate, temporalBoost: 0.5 })).toEqual(await keys(noDate));
    expect((await request(t.app).put('/api/settings/memory').set(t.auth).send({ hybridTemporalBoost: 0.5 })).status).toBe(200);
    expect((await keys(q)).slice(0, 2).sort()).toEqual(['painting', 'skiing']);
    expect((await request(t.app).put('/api/settings/memory').set(t.auth).send({ hybridTemporalBoost: null })).status).toBe(200);
    expect(await keys(q)).toEqual(def);
  });

  it('PRF (RM3): expansion terms from the top keyword hits bring in a row that shares no word with the question', async () => {
    const q = { query: 'the marathon', apiKeyId: 'P' };
    const def = await keys(q);
    expect(def.slice(0, 2).sort()).toEqual(['plan', 'plan2']);
    expect(def).not.toContain('target');
    const prf = await keys({ ...q, prfWeight: 1 });
    expect(prf.slice(0, 2).sort()).toEqual(['plan', 'plan2']);
    expect(prf).toContain('target');
    expect(prf[2]).toBe('target');
    expect((await request(t.app).put('/api/settings/memory').set(t.auth).send({ hybridPrfWeight: 1 })).body).toMatchObject({ hybridPrfWeight: 1 });
    expect(await keys(q)).toEqual(prf);
    expect((await request(t.app).put('/api/settings/memory').set(t.auth).send({ hybridPrfWeight: null })).status).toBe(200);
    expect(await keys(q)).toEqual(def);
  });

  it('settings and preview overrides are validated: 400 with the zod path, nothing stored', async () => {
    const before = JSON.stringify(t.ctx.settings.raw());
    for (const [body, where] of [
      [{ hybridKeywordFloor: 1.5 }, 'body.hybridKeywordFloor'],
      [{ hybridVectorFloor: -0.1 }, 'body.hybridVectorFloor'],
      [{ hybridTemporalBoost: 'high' }, 'body.hybridTemporalBoost'],
      [{ hybridPrfWeight: 2 }, 'body.hybridPrfWeight'],
    ] as const) {
      const r = await request(t.app).put('/api/settings/memory').set(t.auth).send(body);
      expect({ body, status: r.status }).toEqual({ body, status: 400 });
      expect(r.body.error.details.map((d: { path: string }) => d.path)).toContain(where);
    }
    expect(JSON.stringify(t.ctx.settings.raw())).toBe(before);
    for (const [body, where] of [
      [{ keywordFloor: 2 }, 'body.keywordFloor'],
      [{ vectorFloor: '0.5' }, 'body.vectorFloor'],
      [{ temporalBoost: -1 }, 'body.temporalBoost'],
      [{ prfWeight: true }, 'body.prfWeight'],
    ] as const) {
      const r = await request(t.app).post('/api/memory/retrieve-preview').set(t.auth).send({ query: 'kitten', ...body });
      expect({ body, status: r.status }).toEqual({ body, status: 400 });
      expect(r.body.error.details.map((d: { path: string }) => d.path)).toContain(where);
    }
  });
});
