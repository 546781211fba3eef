import path from 'node:path';
import { freePort } from '../helpers/redis-server';
import { TEST_TOKEN, tempDir, testEnv } from '../helpers/env';
import { topicModelSpec, writeModel2VecFolder } from '../helpers/model-fixtures';
import { childEnv, spawnEngram, type Child } from '../helpers/processes';
import { waitUntil } from '../helpers/wait';

/** Drives the real api and worker processes, spawned from the built output, over HTTP only. */
describe('end to end: api + worker processes', () => {
  jest.setTimeout(90_000);
  const children: Child[] = [];
  afterAll(() => {
    for (const c of children) if (c.proc.exitCode === null) c.proc.kill('SIGKILL');
  });

  it('keys, memories, embeddings, expiry and job state across real processes; clean SIGTERM', async () => {
    const folder = writeModel2VecFolder(path.join(tempDir('models'), 'm'), topicModelSpec(16));
    const env = testEnv();
    const port = await freePort();
    const extra = { MEMORY_STATIC_MODEL: folder, EXPIRE_EVERY_MS: '1000', REPAIR_SWEEP_EVERY_MS: '2000', PORT: String(port) };
    const apiProc = spawnEngram('api', childEnv(env, extra));
    const workerProc = spawnEngram('worker', childEnv(env, extra));
    children.push(apiProc, workerProc);
    const base = `http://127.0.0.1:${port}`;
    const H = { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' };
    const call = async (method: string, p: string, body?: unknown) => {
      const r = await fetch(base + p, { method, headers: H, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: r.status, body: r.headers.get('content-type')?.includes('json') ? await r.json() : await r.text() };
    };

    await waitUntil(async () => (await fetch(`${base}/readyz`)).status === 200, 20_000, `api ready: ${apiProc.output()}`);

    const key = await call('POST', '/api/keys', { name: 'e2e' });
    expect(key.status).toBe(201);
    const apiKeyId = key.body.id;
    expect((await call('PUT', '/api/settings/memory', { enabled: true, embeddingSource: 'static', staticEnabled: true })).status).toBe(200);

    const created = await call('POST', '/api/memory', { apiKeyId, key: 'pet', content: 'my cat sleeps on the sofa' });
    expect(created.status).toBe(201);
    // The worker process builds the index and embeds the row.
    await waitUntil(async () => {
      const s = (await call('GET', '/api/memory/engine-status')).body;
      return s.vectorStore.rowCount === 1 && s.vectorStore.needsReindex === 0;
    }, 30_000, 'embedded by the worker');
    const preview = await call('POST', '/api/memory/retrieve-preview', { query: 'kitten', apiKeyId, strategy: 'hybrid' });
    expect(preview.body.memories[0]).toMatchObject({ key: 'pet', vecScore: expect.any(Number) });

    // Expiry runs on the worker's schedule.
    const doomed = await call('POST', '/api/memory', { apiKeyId, key: 'doomed', content: 'short lived', expiresAt: new Date(Date.now() + 500).toISOString() });
    await waitUntil(async () => (await call('GET', `/api/memory/${doomed.body.id}`)).status === 404, 20_000, 'expired by the worker');
    const history = await call('GET', `/api/memory/${doomed.body.id}/history`);
    expect(history.body.events.map((e: { op: string }) => e.op)).toEqual(['create', 'expire']);

    const jobs = await call('GET', '/api/jobs');
    expect(jobs.body.queues.embedding.completed).toBeGreaterThanOrEqual(1);
    expect(jobs.body.queues.maintenance.completed).toBeGreaterThanOrEqual(1);

    // Workers never serve HTTP: their metrics reach the api's /metrics through Redis.
    await waitUntil(
      async () => /engram_job_duration_seconds_count\{[^}]*job="embed-memory"[^}]*role="worker"/.test(await fetch(`${base}/metrics`, { headers: H }).then((r) => r.text())),
      10_000,
      'worker metrics on the api',
    );

    apiProc.proc.kill('SIGTERM');
    workerProc.proc.kill('SIGTERM');
    expect((await apiProc.exited).code).toBe(0);
    expect((await workerProc.exited).code).toBe(0);
  });
});
