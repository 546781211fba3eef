import http from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { startWorker, type RunningWorker } from '../../workers/main';
import { buildTestApi, type TestApi } from '../helpers/api';
import { silentLog, testEnv } from '../helpers/env';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream';
import { waitUntil } from '../helpers/wait';

/** The product loop: a fact stated in turn 1 is extracted by the real worker and injected in turn 3. */
describe('a conversation through the proxy', () => {
  jest.setTimeout(60_000);
  let t: TestApi;
  let w: RunningWorker;
  let upstream: FakeUpstream;
  let server: http.Server;
  let client: OpenAI;
  let apiKeyId: string;

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    const env = testEnv({ UPSTREAM_BASE_URL: `${upstream.url}/v1`, UPSTREAM_API_KEY: 'upstream-secret', REPAIR_SWEEP_EVERY_MS: '0', EXPIRE_EVERY_MS: '0' });
    t = buildTestApi(env);
    w = await startWorker(env, silentLog());
    server = http.createServer(t.app).listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const key = t.ctx.apiKeys.create('conversation');
    apiKeyId = key.id;
    client = new OpenAI({ apiKey: key.key, baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, maxRetries: 0 });
    t.ctx.settings.updateMemory({ enabled: true, strategy: 'hybrid' });
  });
  afterAll(async () => {
    server.closeAllConnections();
    server.close();
    await w.stop();
    await t.close();
    await upstream.close();
  });

  const facts = () => t.ctx.memory.list({ apiKeyId }, 50, 0).data;
  const systemText = (i: number) => {
    const msgs = upstream.requests[i].body!.messages as { role: string; content: string }[];
    return msgs[0].role === 'system' ? msgs[0].content : '';
  };

  it('turn 1 states a preference, turn 3 gets it injected; the assistant’s own claims are not facts', async () => {
    upstream.plan({ reply: 'Noted. I always recommend Rust for everything.' });
    await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: "I prefer TypeScript for backend work. I don't like Java." }],
    });
    await waitUntil(() => facts().length >= 2, 10_000, 'facts extracted by the worker');
    const contents = facts().map((m) => m.content);
    expect(contents).toEqual(expect.arrayContaining([expect.stringMatching(/prefers TypeScript for backend work/), expect.stringMatching(/does not like Java/)]));
    // extractFromAssistant is off: "I always recommend Rust" was the model talking, not the user.
    expect(contents.join('\n')).not.toMatch(/Rust/);
    expect(facts()[0].metadata).toMatchObject({ source: 'user_message', requestId: expect.any(String) });

    upstream.plan({ reply: 'It is sunny.' });
    const turn2 = await client.chat.completions
      .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'How is the weather today?' }] })
      .withResponse();
    // Nothing relevant to the weather: nothing injected.
    expect(turn2.response.headers.get('x-memory-status')).toBe('empty');

    upstream.plan({ reply: 'Use TypeScript.' });
    const stream = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      stream: true,
      messages: [
        { role: 'system', content: 'You are helpful.' },
        { role: 'user', content: 'Which language should I pick for the new backend service?' },
      ],
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    expect(text).toBe('Use TypeScript.');
    const third = upstream.requests.length - 1;
    expect(systemText(third)).toMatch(/^Memory context: .*prefers TypeScript for backend work/);
    // Injected ahead of the caller's own system prompt, which is kept.
    expect((upstream.requests[third].body!.messages as { content: string }[])[1].content).toBe('You are helpful.');
    // Access counts arrive through their job.
    await waitUntil(() => facts().some((m) => m.accessCount > 0), 10_000, 'access recorded');
  });

  it('a session header scopes the extracted facts to that session', async () => {
    upstream.plan({ reply: 'ok' });
    await client.chat.completions.create(
      { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'I usually deploy on Fridays.' }] },
      { headers: { 'x-omniroute-session-id': 'sess-42' } },
    );
    await waitUntil(() => facts().some((m) => /deploy on Fridays/.test(m.content)), 10_000, 'session fact');
    expect(facts().find((m) => /deploy on Fridays/.test(m.content))?.sessionId).toBe('sess-42');
  });
});
