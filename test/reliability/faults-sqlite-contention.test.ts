import path from 'node:path';
import { QUEUE_NAMES } from '../../src/config/queue-names';
import { tempDir, testEnv } from '../helpers/env';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream';
import { topicModelSpec, writeModel2VecFolder } from '../helpers/model-fixtures';
import { mulberry32 } from '../helpers/prng';
import { waitUntil } from '../helpers/wait';
import { jobCounts, leftInQueues, startStack, type Stack } from './stack';

/**
 * Issue 15 §3, one SQLite file, three writers: a real api and two real worker processes share DATA_DIR while
 * chats (extraction + embedding in the workers), memory CRUD (the api) and forced reindexes (the workers) run at
 * once. No SQLITE_BUSY (503 database_busy) or 500 reaches a client, no job fails, and every fact lands once.
 */
describe('api and two workers writing one SQLite file under load', () => {
  jest.setTimeout(180_000);
  let upstream: FakeUpstream;
  let stack: Stack | null = null;
  beforeAll(async () => {
    upstream = await startFakeUpstream();
  });
  afterAll(async () => {
    await stack?.stop();
    await upstream.close();
  });

  it('no SQLITE_BUSY reaches a client, no job fails, every fact lands once', async () => {
    const folder = writeModel2VecFolder(path.join(tempDir('models'), 'm'), topicModelSpec(16));
    const env = testEnv();
    stack = await startStack(env, { upstreamUrl: upstream.url, workers: 2, extra: { MEMORY_STATIC_MODEL: folder } });
    const s = stack;
    const put = await fetch(`${s.base}/api/settings/memory`, { method: 'PUT', headers: s.mgmt, body: JSON.stringify({ embeddingSource: 'static', staticEnabled: true }) });
    expect(put.status).toBe(200);

    const rand = mulberry32(15_3);
    const CHATS = 120;
    const CRUD = 240;
    const statuses = new Map<string, number>();
    const bad: string[] = [];
    const note = (what: string, status: number, body = '') => {
      const k = `${what} ${status}`;
      statuses.set(k, (statuses.get(k) ?? 0) + 1);
      if (status === 0 || status >= 500 || /database_busy|SQLITE_BUSY|database is locked/i.test(body)) bad.push(`${what} ${status} ${body.slice(0, 200)}`);
    };

    const started = Date.now();
    let chatN = 0;
    const chatter = async () => {
      while (chatN < CHATS) {
        const i = chatN++;
        const r = await s.chat(`I prefer tool${i} for task${i}.`);
        note('chat', r.status);
      }
    };
    const ids: string[] = [];
    let crudN = 0;
    const crud = async () => {
      while (crudN < CRUD) {
        const i = crudN++;
        const roll = rand();
        let r: Response;
        if (roll < 0.5 || ids.length < 5) {
          r = await fetch(`${s.base}/api/memory`, { method: 'POST', headers: s.mgmt, body: JSON.stringify({ key: `crud${i}`, content: `crud fact ${i} about topic ${i % 7}` }) });
          const text = await r.text();
          if (r.status === 201) ids.push((JSON.parse(text) as { id: string }).id);
          note('create', r.status, text);
        } else if (roll < 0.8) {
          const id = ids[Math.floor(rand() * ids.length)];
          r = await fetch(`${s.base}/api/memory/${id}`, { method: 'PUT', headers: s.mgmt, body: JSON.stringify({ content: `crud fact updated ${i}` }) });
          const text = await r.text();
          note('update', r.status === 404 ? 200 : r.status, text);
        } else if (roll < 0.95) {
          const id = ids.splice(Math.floor(rand() * ids.length), 1)[0];
          r = await fetch(`${s.base}/api/memory/${id}`, { method: 'DELETE', headers: s.mgmt });
          note('delete', r.status, await r.text());
        } else {
          r = await fetch(`${s.base}/api/memory/reindex`, { method: 'POST', headers: s.mgmt, body: JSON.stringify({ force: true }) });
          // 409: one is already running — the answer a client gets, not a database failure.
          note('reindex', r.status, await r.text());
        }
      }
    };
    await Promise.all([chatter(), chatter(), chatter(), chatter(), crud(), crud(), crud()]);
    const loadMs = Date.now() - started;

    // Every fact of every chat lands exactly once (the workers' writes did not fail either).
    let landed = 0;
    await waitUntil(async () => {
      landed = (await s.memories()).total;
      return landed >= CHATS;
    }, 90_000, `all ${CHATS} chat facts landed`).catch((err: Error) => {
      throw new Error(`${err.message} (${landed}); ${s.logs()}`);
    });
    const { contents } = await s.memories();
    expect(new Set(contents).size).toBe(contents.length);
    expect(contents.length).toBe(CHATS);
    let left: string | null = null;
    await waitUntil(async () => (left = await leftInQueues(env, QUEUE_NAMES)) === null, 90_000, 'queues drained').catch((err: Error) => {
      throw new Error(`${err.message}: ${left}; ${s.logs()}`);
    });
    const failed: Record<string, number> = {};
    for (const q of QUEUE_NAMES) failed[q] = (await jobCounts(env, q)).failed;

    console.log(
      `sqlite contention: ${CHATS} chats + ${CRUD} CRUD/reindex requests in ${loadMs} ms against api + 2 workers; ` +
        `answers ${JSON.stringify(Object.fromEntries(statuses))}; facts landed ${landed}/${CHATS}; failed jobs ${JSON.stringify(failed)}`,
    );
    expect(bad).toEqual([]);
    expect(Object.values(failed).reduce((a, b) => a + b, 0)).toBe(0);
    const logs = s.logs(1_000_000);
    expect(logs).not.toMatch(/SQLITE_BUSY|database is locked/);
  });
});
