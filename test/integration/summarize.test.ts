import request from 'supertest';
import type { Job } from 'bullmq';
import { estimateTokens } from '../../src/memory/tokens';
import type { MemoryType } from '../../src/memory/types';
import { startWorker, type RunningWorker } from '../../workers/main';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, testEnv } from '../helpers/env';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream';
import { waitUntil } from '../helpers/wait';

const DAY = 86_400_000;
let seq = 0;

/** Memories written through the store's import path with a creation time in the past. */
function seedAged(t: TestApi, apiKeyId: string, n: number, daysAgo: number, over: { content?: (i: number) => string; sessionId?: string; type?: MemoryType } = {}): string[] {
  const at = new Date(Date.now() - daysAgo * DAY).toISOString();
  const ids: string[] = [];
  t.ctx.memory.transaction(() => {
    for (let i = 0; i < n; i++) {
      seq++;
      const id = `00000000-0000-4000-8000-${String(seq).padStart(12, '0')}`;
      ids.push(id);
      t.ctx.memory.importInTx(
        {
          id,
          apiKeyId,
          sessionId: over.sessionId ?? '',
          type: over.type ?? 'factual',
          key: `${apiKeyId}-fact-${seq}`,
          content: over.content?.(i) ?? `${apiKeyId} fact number ${seq}. It was said long ago! Another sentence? A fourth one that is dropped.`,
          metadata: { n: seq },
          createdAt: at,
          updatedAt: at,
          expiresAt: null,
          accessCount: 0,
          lastAccessedAt: null,
        },
        { source: 'api' },
      );
    }
  });
  return ids;
}

const rows = (t: TestApi, apiKeyId: string) => t.ctx.memory.list({ apiKeyId }, 1000, 0).data;
const summaries = (t: TestApi, apiKeyId: string) => rows(t, apiKeyId).filter((m) => m.key.startsWith('summary:'));

async function finished(t: TestApi, jobId: string, queue: 'summarize' = 'summarize'): Promise<Job> {
  return waitUntil(
    async () => {
      const job = await t.ctx.queues.queue(queue).getJob(jobId);
      const state = await job?.getState();
      if (state === 'failed') throw new Error(`job failed: ${job?.failedReason}`);
      // Read again once completed: the object fetched before the state check may predate the result.
      return state === 'completed' ? t.ctx.queues.queue(queue).getJob(jobId) : null;
    },
    20_000,
    `job ${jobId}`,
  );
}

describe('summarisation jobs', () => {
  let t: TestApi;
  let w: RunningWorker;
  let upstream: FakeUpstream;

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    const env = testEnv({ REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0', COMPACT_EVERY_MS: '0', UPSTREAM_BASE_URL: `${upstream.url}/v1`, SUMMARY_LLM_TIMEOUT_MS: '2000' });
    t = buildTestApi(env);
    w = await startWorker(env, silentLog());
  });
  afterAll(async () => {
    await w.stop();
    await t.close();
    await upstream.close();
  });
  beforeEach(() => {
    t.ctx.settings.updateMemory({ maxTokens: 2000, summaryMode: 'rules', autoSummarize: false, compactFactor: 4 });
    w.ctx.settings.memoryFresh();
  });

  it('a dry run lists the candidates and changes nothing; the real run writes one summary and deletes them', async () => {
    const old = seedAged(t, 'dry-a', 5, 40);
    seedAged(t, 'dry-a', 2, 1);
    const before = t.ctx.memory.count();

    const dry = await request(t.app).post('/api/memory/summarize').set(t.auth).send({ apiKeyId: 'dry-a', olderThanDays: 30, dryRun: true });
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({ candidateCount: 5, deletedCount: 0, summaryIds: [], dryRun: true });
    expect(dry.body.candidates.map((m: { id: string }) => m.id).sort()).toEqual([...old].sort());
    expect(dry.body.totalTokens).toBe(old.reduce((n, id) => n + estimateTokens(t.ctx.memory.get(id)!.content), 0));
    expect(t.ctx.memory.count()).toBe(before);

    const real = await request(t.app).post('/api/memory/summarize').set(t.auth).send({ apiKeyId: 'dry-a', olderThanDays: 30 });
    expect(real.status).toBe(202);
    expect(real.body).toMatchObject({ jobId: expect.any(String), queue: 'summarize', dryRun: false });
    const job = await finished(t, real.body.jobId);
    expect(job.returnvalue).toMatchObject({ candidates: 5, totalTokens: dry.body.totalTokens, deletedCount: 5, mode: 'rules', dryRun: false });
    expect(job.returnvalue.summaryIds).toHaveLength(1);

    const left = rows(t, 'dry-a');
    expect(left).toHaveLength(3); // 2 recent + the summary
    const summary = t.ctx.memory.get(job.returnvalue.summaryIds[0])!;
    expect(summary).toMatchObject({ apiKeyId: 'dry-a', type: 'semantic' });
    expect(summary.content.split('\n')[0]).toBe('Summary of 5 memories older than 30 days:');
    // One line per candidate: `[type] key: first three sentences` (punctuation kept, the fourth dropped).
    const first = t.ctx.memory.findFresh(summary.id)!.content.split('\n')[1];
    expect(first).toMatch(/^\[factual\] dry-a-fact-\d+: dry-a fact number \d+\. It was said long ago! Another sentence\?$/);
    for (const id of old) expect(t.ctx.memory.get(id)).toBeNull();
    // The summary is embedded like any write.
    const rec = t.ctx.memory.findFresh(summary.id)!;
    expect(await t.ctx.queues.queue('embedding').getJob(`embed-${rec.id}-${rec.contentHash.slice(0, 8)}`)).toBeTruthy();
  });

  it('never merges tenants: a run over every key writes one summary per key, each with its own memories only', async () => {
    const a = seedAged(t, 'ten-a', 3, 50);
    const b = seedAged(t, 'ten-b', 4, 50);
    const res = await request(t.app).post('/api/memory/summarize').set(t.auth).send({ olderThanDays: 30 });
    const job = await finished(t, res.body.jobId);
    expect(job.returnvalue.apiKeys).toBeGreaterThanOrEqual(2);
    const [sa] = summaries(t, 'ten-a');
    const [sb] = summaries(t, 'ten-b');
    expect(summaries(t, 'ten-a')).toHaveLength(1);
    expect(summaries(t, 'ten-b')).toHaveLength(1);
    expect(sa.metadata.summarizedIds).toEqual(a);
    expect(sb.metadata.summarizedIds).toEqual(b);
    expect(sa.content).not.toMatch(/ten-b/);
    expect(sb.content).not.toMatch(/ten-a/);
    // No row without an owner, as the original's global variant wrote.
    expect(rows(t, '')).toHaveLength(0);
  });

  it('each summary fits the injection budget: several rows when one would not, covering every candidate', async () => {
    t.ctx.settings.updateMemory({ maxTokens: 120 });
    const ids = seedAged(t, 'budget', 30, 60, { content: (i) => `Budget memory ${i} talks about a rather long topic in some detail. Second sentence here. Third.` });
    const res = await request(t.app).post('/api/memory/summarize').set(t.auth).send({ apiKeyId: 'budget', olderThanDays: 30 });
    const job = await finished(t, res.body.jobId);
    const rowsNow = summaries(t, 'budget');
    expect(rowsNow.length).toBeGreaterThan(1);
    expect(rowsNow.length).toBe(job.returnvalue.summaryIds.length);
    for (const s of rowsNow) expect(estimateTokens(s.content)).toBeLessThanOrEqual(120);
    const covered = rowsNow.flatMap((s) => s.metadata.summarizedIds as string[]);
    expect(covered.sort()).toEqual([...ids].sort());
    expect(job.returnvalue.deletedCount).toBe(30);
  });

  it('originals come back from history: same id, same content; 409 when it exists, 404 without history', async () => {
    const [id] = seedAged(t, 'restore', 2, 90);
    const original = t.ctx.memory.get(id)!;
    const res = await request(t.app).post('/api/memory/summarize').set(t.auth).send({ apiKeyId: 'restore', olderThanDays: 30 });
    await finished(t, res.body.jobId);
    expect(t.ctx.memory.get(id)).toBeNull();

    const history = await request(t.app).get(`/api/memory/${id}/history`).set(t.auth);
    expect(history.body.events.at(-1)).toMatchObject({ op: 'summarize', source: 'summarize', before: { content: original.content } });

    const restored = await request(t.app).post(`/api/memory/${id}/restore`).set(t.auth);
    expect(restored.status).toBe(200);
    expect(restored.body.memory).toMatchObject({ id, content: original.content, key: original.key, type: original.type, createdAt: original.createdAt, metadata: original.metadata });
    expect(t.ctx.memory.get(id)?.content).toBe(original.content);

    expect((await request(t.app).post(`/api/memory/${id}/restore`).set(t.auth)).status).toBe(409);
    expect((await request(t.app).post('/api/memory/00000000-0000-4000-8000-ffffffffffff/restore').set(t.auth)).status).toBe(404);
  });

  it('a worker that dies between writing the summary and deleting the candidates leaves one summary after the retry', async () => {
    const ids = seedAged(t, 'crash', 6, 45);
    let crashes = 0;
    let seenSummary: string | null = null;
    w.ctx.summarize.failpoints.afterSummaryWrite = (summary) => {
      if (crashes > 0) return;
      crashes++;
      // The summary row is written at this point (in the same transaction as the deletes to come).
      seenSummary = w.ctx.memory.findFresh(summary.id)?.content ?? null;
      throw new Error('simulated crash after the summary write');
    };
    try {
      const res = await request(t.app).post('/api/memory/summarize').set(t.auth).send({ apiKeyId: 'crash', olderThanDays: 30 });
      const job = await finished(t, res.body.jobId);
      expect(crashes).toBe(1);
      expect(seenSummary).toMatch(/^Summary of 6 memories/);
      expect(job.attemptsMade).toBeGreaterThanOrEqual(1);
      expect(job.returnvalue).toMatchObject({ candidates: 6, deletedCount: 6 });
    } finally {
      delete w.ctx.summarize.failpoints.afterSummaryWrite;
    }
    expect(summaries(t, 'crash')).toHaveLength(1);
    expect(rows(t, 'crash')).toHaveLength(1);
    for (const id of ids) {
      const events = t.ctx.memory.history(id);
      expect(events.filter((e) => e.op === 'summarize')).toHaveLength(1);
    }
  });

  it('an earlier summary is not summarised again (it would only be truncated further)', async () => {
    const old = seedAged(t, 'resum', 2, 100);
    const first = await finished(t, (await request(t.app).post('/api/memory/summarize').set(t.auth).send({ apiKeyId: 'resum', olderThanDays: 30 })).body.jobId);
    const [summaryId] = first.returnvalue.summaryIds;
    // Age the summary through the store's import path (same id and key, older creation time).
    const s = t.ctx.memory.get(summaryId)!;
    const past = new Date(Date.now() - 90 * DAY).toISOString();
    t.ctx.memory.delete(summaryId, { source: 'api' });
    t.ctx.memory.transaction(() => t.ctx.memory.importInTx({ ...s, createdAt: past, updatedAt: past }, { source: 'api' }));
    seedAged(t, 'resum', 1, 100);
    const dry = await request(t.app).post('/api/memory/summarize').set(t.auth).send({ apiKeyId: 'resum', olderThanDays: 30, dryRun: true });
    expect(dry.body.candidateCount).toBe(1);
    expect(dry.body.candidates.map((m: { id: string }) => m.id)).not.toContain(summaryId);
    expect(old.every((id) => t.ctx.memory.get(id) === null)).toBe(true);
  });

  it('an empty run is a real run that found nothing (not reported as a dry run)', async () => {
    const res = await request(t.app).post('/api/memory/summarize').set(t.auth).send({ apiKeyId: 'nobody', olderThanDays: 30 });
    const job = await finished(t, res.body.jobId);
    expect(job.returnvalue).toMatchObject({ candidates: 0, deletedCount: 0, summaryIds: [], dryRun: false });
  });

  it('the settings take autoSummarize, compactFactor, summaryMode and summaryModel under the original-style keys', async () => {
    const put = await request(t.app).put('/api/settings/memory').set(t.auth).send({ autoSummarize: true, compactFactor: 3, summaryMode: 'llm', summaryModel: 'small-model' });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ autoSummarize: true, compactFactor: 3, summaryMode: 'llm', summaryModel: 'small-model' });
    expect(t.ctx.settings.raw()).toMatchObject({ memoryAutoSummarize: true, memoryCompactFactor: 3, memorySummaryMode: 'llm', memorySummaryModel: 'small-model' });
    const bad = await request(t.app).put('/api/settings/memory').set(t.auth).send({ compactFactor: 1 });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details[0].path).toBe('body.compactFactor');
  });

  it('rejects invalid input with the zod path and changes nothing', async () => {
    const res = await request(t.app).post('/api/memory/summarize').set(t.auth).send({ olderThanDays: 0 });
    expect(res.status).toBe(400);
    expect(res.body.error.details[0].path).toBe('body.olderThanDays');
    const extra = await request(t.app).post('/api/memory/summarize').set(t.auth).send({ olderThanDays: 3, bogus: 1 });
    expect(extra.status).toBe(400);
  });

  it('compact-memories folds the least useful memories of a tenant over N budgets; auto-compact schedules it when autoSummarize is on', async () => {
    t.ctx.settings.updateMemory({ maxTokens: 100, compactFactor: 2 });
    seedAged(t, 'compact', 40, 5, { content: (i) => `Compactable memory number ${i} with a few words in it.` });
    const keep = seedAged(t, 'compact', 1, 400)[0];
    t.ctx.memory.recordAccess([keep, keep, keep], new Date().toISOString());
    const before = t.ctx.memory.tokensUsedBy({ apiKeyId: 'compact' });
    expect(before).toBeGreaterThan(200);

    // autoSummarize off: the sweep does nothing.
    const off = await t.ctx.queues.enqueue('auto-compact', {});
    const offJob = await finished(t, off.jobId);
    expect(offJob.returnvalue).toEqual({ autoSummarize: false, enqueued: 0 });

    t.ctx.settings.updateMemory({ autoSummarize: true });
    const on = await t.ctx.queues.enqueue('auto-compact', {});
    expect((await finished(t, on.jobId)).returnvalue.enqueued).toBeGreaterThanOrEqual(1);
    await waitUntil(() => summaries(t, 'compact').length > 0, 20_000, 'compaction');
    // Under the threshold (compactFactor × budget) afterwards, with one summary of at most one budget.
    expect(t.ctx.memory.tokensUsedBy({ apiKeyId: 'compact' })).toBeLessThanOrEqual(200);
    expect(summaries(t, 'compact')).toHaveLength(1);
    const [s] = summaries(t, 'compact');
    expect(s.content).toMatch(/^Summary of \d+ older, less used memories/);
    const kept = rows(t, 'compact').length - 1;
    expect((s.metadata.summarizedIds as string[]).length).toBe(41 - kept);
    // The most accessed memory is kept even though it is the oldest; every summary fits the budget.
    expect(t.ctx.memory.get(keep)).not.toBeNull();
    for (const s of summaries(t, 'compact')) expect(estimateTokens(s.content)).toBeLessThanOrEqual(100);

    // Over the API, for one tenant.
    const res = await request(t.app).post('/api/memory/compact').set(t.auth).send({ apiKeyId: 'compact' });
    expect(res.status).toBe(202);
  });

  it('summaryMode llm asks the upstream (and says so); any upstream failure falls back to the rule-based text', async () => {
    seedAged(t, 'llm-ok', 3, 40);
    upstream.reset();
    upstream.plan({ reply: 'The user stated three facts long ago.' });
    const ok = await request(t.app).post('/api/memory/summarize').set(t.auth).send({ apiKeyId: 'llm-ok', olderThanDays: 30, mode: 'llm' });
    const okJob = await finished(t, ok.body.jobId);
    expect(okJob.returnvalue.mode).toBe('llm');
    expect(t.ctx.memory.get(okJob.returnvalue.summaryIds[0])!.content).toBe('Summary of 3 memories older than 30 days:\nThe user stated three facts long ago.');
    const sent = upstream.requests.find((r) => r.path === '/v1/chat/completions')!;
    expect(JSON.stringify(sent.body)).toMatch(/llm-ok fact number/);

    seedAged(t, 'llm-fail', 2, 40);
    upstream.plan({ status: 500 });
    const bad = await request(t.app).post('/api/memory/summarize').set(t.auth).send({ apiKeyId: 'llm-fail', olderThanDays: 30, mode: 'llm' });
    const badJob = await finished(t, bad.body.jobId);
    expect(badJob.returnvalue.mode).toBe('rules');
    expect(badJob.returnvalue.llmFallbackReason).toMatch(/500/);
    expect(t.ctx.memory.get(badJob.returnvalue.summaryIds[0])!.content).toMatch(/^Summary of 2 memories older than 30 days:\n\[factual\] llm-fail-fact/);
  });
});
