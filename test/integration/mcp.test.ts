import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import request from 'supertest';
import { buildTestApi, type TestApi } from '../helpers/api';
import { TEST_TOKEN, testEnv } from '../helpers/env';
import { callTool, httpMcpClient, stdioMcpClient } from '../helpers/mcp-client';
import { childEnv } from '../helpers/processes';

type Memory = { id: string; apiKeyId: string; key: string; content: string; type: string };
type Ok<T> = { success: true; data: T };

describe('MCP over streamable HTTP (/mcp), with the official SDK client', () => {
  let t: TestApi;
  let server: Server;
  let url: string;
  let a: { id: string; key: string };
  let b: { id: string; key: string };
  const clients: Client[] = [];
  const client = async (token: string | null) => {
    const c = await httpMcpClient(url, token);
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    t = buildTestApi();
    server = await new Promise<Server>((resolve) => {
      const s = t.app.listen(0, '127.0.0.1', () => resolve(s));
    });
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
    a = t.ctx.apiKeys.create('a');
    b = t.ctx.apiKeys.create('b');
  });
  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await new Promise<void>((r) => server.close(() => r()));
    await t.close();
  });

  it('lists the three tools, the memory resource template and the remember-context prompt', async () => {
    const c = await client(a.key);
    const tools = await c.listTools();
    expect(tools.tools.map((x) => x.name).sort()).toEqual(['omniroute_memory_add', 'omniroute_memory_clear', 'omniroute_memory_search']);
    const search = tools.tools.find((x) => x.name === 'omniroute_memory_search')!;
    expect(Object.keys(search.inputSchema.properties ?? {}).sort()).toEqual(['apiKeyId', 'limit', 'maxTokens', 'query', 'type']);
    const add = tools.tools.find((x) => x.name === 'omniroute_memory_add')!;
    expect(add.inputSchema.required?.sort()).toEqual(['content', 'key', 'type']);
    expect((await c.listResourceTemplates()).resourceTemplates.map((r) => r.uriTemplate)).toEqual(['memory://{id}']);
    expect((await c.listPrompts()).prompts.map((p) => p.name)).toEqual(['remember-context']);
  });

  it('add, search and clear answer with the original shapes (pretty-printed JSON), search works with injection off', async () => {
    expect(t.ctx.settings.memory().enabled).toBe(false);
    const c = await client(a.key);
    const added = await callTool(c, 'omniroute_memory_add', { type: 'factual', key: 'editor', content: 'The user edits code in Helix', metadata: { via: 'test' } });
    expect(added.isError).toBe(false);
    expect(added.text).toBe(JSON.stringify(added.json, null, 2));
    const body = added.json as Ok<{ memory: Memory; message: string }>;
    expect(body).toMatchObject({ success: true, data: { message: 'Memory created successfully', memory: { apiKeyId: a.id, key: 'editor', type: 'factual', content: 'The user edits code in Helix' } } });
    // The change went through the service: it has its history row, source mcp.
    const events = t.ctx.memory.history(body.data.memory.id);
    expect(events.map((e) => [e.op, e.source])).toEqual([['create', 'mcp']]);

    await callTool(c, 'omniroute_memory_add', { type: 'procedural', key: 'deploy', content: 'Deploys go through the staging cluster first' });
    const found = await callTool(c, 'omniroute_memory_search', { query: 'Helix editor' });
    expect(found.isError).toBe(false);
    const data = (found.json as Ok<{ memories: Memory[]; count: number; totalTokens: number }>).data;
    expect(data.memories.map((m) => m.key)).toContain('editor');
    expect(data.count).toBe(data.memories.length);
    expect(data.totalTokens).toBe(data.memories.reduce((n, m) => n + Math.ceil(m.content.length / 4), 0));

    // type and limit apply after retrieval.
    const typed = (await callTool(c, 'omniroute_memory_search', { query: '', type: 'procedural' })).json as Ok<{ memories: Memory[] }>;
    expect(typed.data.memories.map((m) => m.key)).toEqual(['deploy']);
    const limited = (await callTool(c, 'omniroute_memory_search', { limit: 1 })).json as Ok<{ memories: Memory[]; count: number }>;
    expect(limited.data.count).toBe(1);

    const cleared = await callTool(c, 'omniroute_memory_clear', { type: 'procedural' });
    expect(cleared.json).toEqual({ success: true, data: { deletedCount: 1, message: 'Cleared 1 memories' } });
    expect(t.ctx.memory.list({ apiKeyId: a.id }, 10, 0).data.map((m) => m.key)).toEqual(['editor']);
  });

  it('errors are isError results reading "Error: <message>"', async () => {
    const c = await client(a.key);
    const bad = await callTool(c, 'omniroute_memory_clear', { olderThan: 'not a date' });
    expect(bad).toMatchObject({ isError: true, text: 'Error: olderThan is not a valid date (expected ISO-8601)' });
  });

  it('a client key cannot read, add to or clear another key’s memories through any tool, resource or prompt', async () => {
    t.ctx.memory.create({ apiKeyId: b.id, type: 'factual', key: 'secret', content: 'B keeps its launch codes in the blue folder' }, { source: 'api' });
    const bMemory = t.ctx.memory.findByKey(b.id, 'secret')!;
    const c = await client(a.key);
    const refused = 'Error: apiKeyId names another API key; a client key can only use its own memories';
    expect(await callTool(c, 'omniroute_memory_search', { apiKeyId: b.id, query: 'launch codes' })).toMatchObject({ isError: true, text: refused });
    expect(await callTool(c, 'omniroute_memory_add', { apiKeyId: b.id, type: 'factual', key: 'x', content: 'planted' })).toMatchObject({ isError: true, text: refused });
    expect(await callTool(c, 'omniroute_memory_clear', { apiKeyId: b.id })).toMatchObject({ isError: true, text: refused });
    // Its own search never surfaces B's text.
    const own = (await callTool(c, 'omniroute_memory_search', { query: 'launch codes blue folder' })).json as Ok<{ memories: Memory[] }>;
    expect(own.data.memories.every((m) => m.apiKeyId === a.id)).toBe(true);
    await expect(c.readResource({ uri: `memory://${bMemory.id}` })).rejects.toThrow(/not found/);
    const listed = await c.listResources();
    expect(listed.resources.length).toBeGreaterThan(0);
    expect(listed.resources.map((r) => r.uri)).not.toContain(`memory://${bMemory.id}`);
    await expect(c.getPrompt({ name: 'remember-context', arguments: { query: 'launch codes', apiKeyId: b.id } })).rejects.toThrow(/another API key/);
    // B's memories are untouched.
    expect(t.ctx.memory.list({ apiKeyId: b.id }, 10, 0).data.map((m) => m.key)).toEqual(['secret']);
    expect(t.ctx.memory.findByKey(b.id, 'x')).toBeNull();
    // B reads its own memory as a resource, and gets it in its prompt.
    const cb = await client(b.key);
    const res = await cb.readResource({ uri: `memory://${bMemory.id}` });
    expect(JSON.parse((res.contents[0] as { text: string }).text)).toMatchObject({ id: bMemory.id, apiKeyId: b.id });
    const prompt = await cb.getPrompt({ name: 'remember-context', arguments: { query: 'launch codes' } });
    expect((prompt.messages[0].content as { text: string }).text).toContain('Memory context: B keeps its launch codes in the blue folder');
  });

  it('without credentials /mcp is a 401 (and the SDK client cannot connect); a wrong token is a 401 too', async () => {
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } };
    const none = await request(t.app).post('/mcp').set('accept', 'application/json, text/event-stream').send(init);
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toMatch(/^Bearer/);
    const wrong = await request(t.app).post('/mcp').set('authorization', 'Bearer not-a-key-not-a-key').set('accept', 'application/json, text/event-stream').send(init);
    expect(wrong.status).toBe(401);
    expect(JSON.stringify(wrong.body)).not.toContain('not-a-key');
    await expect(httpMcpClient(url, null)).rejects.toThrow();
  });

  it('with the management token apiKeyId is required, and any key may be named', async () => {
    const c = await client(TEST_TOKEN);
    expect(await callTool(c, 'omniroute_memory_add', { type: 'factual', key: 'k', content: 'c' })).toMatchObject({
      isError: true,
      text: 'Error: apiKeyId is required when authenticated with the management token',
    });
    const ok = await callTool(c, 'omniroute_memory_add', { apiKeyId: b.id, type: 'episodic', key: 'by-operator', content: 'Added by the operator' });
    expect((ok.json as Ok<{ memory: Memory }>).data.memory.apiKeyId).toBe(b.id);
  });

  it('clear removes every match — 500 memories, all 500 — through the service with a history row each', async () => {
    const k = t.ctx.apiKeys.create('bulk');
    t.ctx.memory.upsertMany(
      Array.from({ length: 500 }, (_, i) => ({ apiKeyId: k.id, type: 'factual' as const, key: `fact-${i}`, content: `Fact number ${i} about the bulk tenant` })),
      { source: 'api' },
    );
    t.ctx.memory.create({ apiKeyId: a.id, type: 'factual', key: 'survivor', content: 'Another key keeps this' }, { source: 'api' });
    expect(t.ctx.memory.list({ apiKeyId: k.id }, 1, 0).total).toBe(500);
    const some = t.ctx.memory.findByKey(k.id, 'fact-321')!;
    const c = await client(k.key);
    const r = await callTool(c, 'omniroute_memory_clear', {});
    expect(r.json).toEqual({ success: true, data: { deletedCount: 500, message: 'Cleared 500 memories' } });
    expect(t.ctx.memory.list({ apiKeyId: k.id }, 1, 0).total).toBe(0);
    expect(t.ctx.memory.history(some.id).map((e) => [e.op, e.source])).toEqual([
      ['create', 'api'],
      ['delete', 'mcp'],
    ]);
    expect(t.ctx.memory.findByKey(a.id, 'survivor')).not.toBeNull();
  });

  it('clear with olderThan keeps newer memories', async () => {
    const k = t.ctx.apiKeys.create('dated');
    t.ctx.memory.create({ apiKeyId: k.id, type: 'factual', key: 'old', content: 'old one' }, { source: 'api' });
    t.ctx.db.db.prepare("UPDATE memories SET created_at = '2020-01-01T00:00:00.000Z' WHERE api_key_id = ? AND key = 'old'").run(k.id);
    t.ctx.memory.cache.clear();
    t.ctx.memory.create({ apiKeyId: k.id, type: 'factual', key: 'new', content: 'new one' }, { source: 'api' });
    const c = await client(k.key);
    const r = await callTool(c, 'omniroute_memory_clear', { olderThan: '2021-01-01T00:00:00Z' });
    expect((r.json as Ok<{ deletedCount: number }>).data.deletedCount).toBe(1);
    expect(t.ctx.memory.list({ apiKeyId: k.id }, 10, 0).data.map((m) => m.key)).toEqual(['new']);
  });
});

describe('MCP over stdio: a spawned `engram mcp`, with the official SDK client', () => {
  it('lists the tools and calls each (acting with the management token: apiKeyId required)', async () => {
    const env = testEnv();
    const { client, stderr } = await stdioMcpClient(childEnv(env) as NodeJS.ProcessEnv);
    try {
      const tools = await client.listTools();
      expect(tools.tools.map((x) => x.name).sort()).toEqual(['omniroute_memory_add', 'omniroute_memory_clear', 'omniroute_memory_search']);
      expect((await callTool(client, 'omniroute_memory_add', { type: 'factual', key: 'k', content: 'c' })).text).toBe(
        'Error: apiKeyId is required when authenticated with the management token',
      );
      const added = await callTool(client, 'omniroute_memory_add', { apiKeyId: 'tenant-1', type: 'factual', key: 'tea', content: 'Prefers green tea over coffee' });
      expect(added.json).toMatchObject({ success: true, data: { message: 'Memory created successfully', memory: { apiKeyId: 'tenant-1', key: 'tea' } } });
      expect(added.text).toBe(JSON.stringify(added.json, null, 2));
      const found = await callTool(client, 'omniroute_memory_search', { apiKeyId: 'tenant-1', query: 'green tea' });
      expect(found.json).toMatchObject({ success: true, data: { count: 1, memories: [{ key: 'tea' }] } });
      const other = await callTool(client, 'omniroute_memory_search', { apiKeyId: 'tenant-2', query: 'green tea' });
      expect(other.json).toMatchObject({ success: true, data: { count: 0, memories: [] } });
      const cleared = await callTool(client, 'omniroute_memory_clear', { apiKeyId: 'tenant-1' });
      expect(cleared.json).toEqual({ success: true, data: { deletedCount: 1, message: 'Cleared 1 memories' } });
      const after = await callTool(client, 'omniroute_memory_search', { apiKeyId: 'tenant-1', query: 'green tea' });
      expect((after.json as Ok<{ count: number }>).data.count).toBe(0);
    } catch (err) {
      throw new Error(`${(err as Error).message}\n--- engram mcp stderr ---\n${stderr()}`);
    } finally {
      await client.close();
    }
  });
});
