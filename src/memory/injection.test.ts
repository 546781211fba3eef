import {
  detectCacheControl,
  formatMemoryContext,
  injectMemory,
  isNoMemoryRequested,
  providerSupportsSystemMessage,
  requiresSystemFirst,
  sessionIdFromHeaders,
  shouldInjectMemory,
  type ChatMessage,
  type ChatRequest,
} from './injection';

const mem = (content: unknown) => ({ content });

function makeRequest(overrides: Partial<ChatRequest> = {}): ChatRequest {
  return { model: 'gpt-4', messages: [{ role: 'user', content: 'Hello' }], ...overrides };
}

/** Freezes every nested object so any mutation by the code under test throws in strict mode. */
function deepFreeze<T>(v: T): T {
  if (v && typeof v === 'object') {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}

function multiTurn(model = 'gpt-4'): ChatRequest {
  return {
    model,
    messages: [
      { role: 'system', content: 'You are helpful' },
      { role: 'user', content: 'turn 1' },
      { role: 'assistant', content: 'answer 1' },
      { role: 'user', content: 'turn 2' },
    ],
  };
}

describe('formatMemoryContext', () => {
  it('returns "" for an empty or missing list', () => {
    expect(formatMemoryContext([])).toBe('');
    expect(formatMemoryContext(null)).toBe('');
    expect(formatMemoryContext(undefined)).toBe('');
  });

  it('prefixes a single memory with "Memory context: "', () => {
    expect(formatMemoryContext([mem('User prefers dark mode')])).toBe('Memory context: User prefers dark mode');
  });

  it('joins several memories with a newline', () => {
    expect(formatMemoryContext([mem('fact one'), mem('fact two')])).toBe('Memory context: fact one\nfact two');
  });

  it('trims each memory', () => {
    expect(formatMemoryContext([mem('  padded content  ')])).toBe('Memory context: padded content');
  });

  it('skips blank and non-string contents; "" when none is left', () => {
    expect(formatMemoryContext([mem('real content'), mem('   '), mem(null), mem(5)])).toBe('Memory context: real content');
    expect(formatMemoryContext([mem(' '), mem('')])).toBe('');
  });

  it('drops a memory whose text is already in the block (case and whitespace aside), keeping the first', () => {
    // 114 memories injected as 58 distinct texts: the repeats only cost tokens.
    const block = formatMemoryContext([
      mem('Prefers Go'),
      mem('likes tea'),
      mem('  prefers   GO '),
      mem('prefers\tgo'),
      mem('likes tea'),
      mem('prefers Go for backend work'),
    ]);
    expect(block).toBe('Memory context: Prefers Go\nlikes tea\nprefers Go for backend work');
  });

  it('reduces 114 memories of 58 distinct texts to 58 lines', () => {
    const many = Array.from({ length: 114 }, (_, i) => mem(`fact ${i % 58}`));
    const lines = formatMemoryContext(many).replace('Memory context: ', '').split('\n');
    expect(lines).toHaveLength(58);
    expect(new Set(lines).size).toBe(58);
  });
});

describe('providerSupportsSystemMessage', () => {
  it('is true for null/undefined/blank and for standard providers', () => {
    expect(providerSupportsSystemMessage(null)).toBe(true);
    expect(providerSupportsSystemMessage(undefined)).toBe(true);
    expect(providerSupportsSystemMessage('  ')).toBe(true);
    for (const p of ['openai', 'anthropic', 'deepseek', 'google', 'openrouter', 'xiaomi-mimo']) {
      expect(providerSupportsSystemMessage(p)).toBe(true);
    }
  });

  it('is false for the o1 family and the GLM family providers (#1701)', () => {
    for (const p of ['o1', 'o1-mini', 'o1-preview', 'glm', 'glmt', 'glm-cn', 'zai', 'qianfan']) {
      expect(providerSupportsSystemMessage(p)).toBe(false);
    }
  });

  it('compares case-insensitively and trimmed', () => {
    expect(providerSupportsSystemMessage('O1')).toBe(false);
    expect(providerSupportsSystemMessage('O1-MINI')).toBe(false);
    expect(providerSupportsSystemMessage('  GLM-CN ')).toBe(false);
    expect(providerSupportsSystemMessage('QianFan')).toBe(false);
  });

  it('Engram: also matches o1/glm model family names, dated or behind a vendor/ prefix', () => {
    // The original only compared provider ids, so an o1 model under provider "openai" got a system message.
    for (const m of ['o1-mini-2024-09-12', 'o1-2024-12-17', 'openai/o1-preview', 'glm-4.5', 'GLM-4.6', 'z-ai/glm-4.5-air', 'zai-org/GLM-4.5', 'glm4-9b', 'glmt-x']) {
      expect(providerSupportsSystemMessage(m)).toBe(false);
    }
    for (const m of ['gpt-4o', 'o3-mini', 'o10', 'chatglm3-6b', 'claude-3-5-sonnet', 'deepseek/deepseek-r1', 'qwen3-235b']) {
      expect(providerSupportsSystemMessage(m)).toBe(true);
    }
  });
});

describe('requiresSystemFirst', () => {
  it('detects xiaomi-mimo / mimo providers and mimo models', () => {
    for (const v of ['xiaomi-mimo', 'MiMo', 'xiaomi-mimo/mimo-v2.5-pro', 'mimo-v2-flash', 'xiaomi/MiMo-7B-RL']) {
      expect(requiresSystemFirst(v)).toBe(true);
    }
    for (const v of ['openai', 'mimosa', null, undefined, '']) expect(requiresSystemFirst(v)).toBe(false);
  });
});

describe('injectMemory — system message at index 0', () => {
  it('injects a system message when the provider supports it', () => {
    const result = injectMemory(makeRequest(), [mem('User prefers concise answers')], { provider: 'openai' });
    expect(result.messages![0]).toEqual({ role: 'system', content: 'Memory context: User prefers concise answers' });
    expect(result.messages![1]).toEqual({ role: 'user', content: 'Hello' });
  });

  it('goes ahead of an existing system message (the original placement)', () => {
    const request = makeRequest({
      messages: [
        { role: 'system', content: 'You are helpful' },
        { role: 'user', content: 'Hello' },
      ],
    });
    const result = injectMemory(request, [mem('User is an expert developer')], { provider: 'anthropic' });
    expect(result.messages).toHaveLength(3);
    expect(result.messages![0].role).toBe('system');
    expect(result.messages![0].content).toContain('Memory context:');
    expect(result.messages![1]).toEqual({ role: 'system', content: 'You are helpful' });
    expect(result.messages![2]).toEqual({ role: 'user', content: 'Hello' });
  });

  it('never mutates the request (deep check, frozen input) and returns a new object', () => {
    const request = deepFreeze(multiTurn());
    const before = structuredClone(request);
    for (const opts of [{ provider: 'openai' }, { provider: 'o1' }, { provider: 'xiaomi-mimo' }, { cacheSafe: true }]) {
      const result = injectMemory(request, [mem('Some fact')], opts);
      expect(result).not.toBe(request);
      expect(result.messages).not.toBe(request.messages);
    }
    expect(request).toEqual(before);
  });

  it('preserves every other request field', () => {
    const request = makeRequest({ temperature: 0.7, max_tokens: 256, stream: true, tools: [{ type: 'function' }] });
    const result = injectMemory(request, [mem('fact')], { provider: 'openai' });
    expect(result.temperature).toBe(0.7);
    expect(result.max_tokens).toBe(256);
    expect(result.stream).toBe(true);
    expect(result.model).toBe('gpt-4');
    expect(result.tools).toBe(request.tools);
  });

  it('combines several memories into a single message', () => {
    const result = injectMemory(makeRequest(), [mem('fact A'), mem('fact B'), mem('fact C')], { provider: 'openai' });
    expect(result.messages![0]).toEqual({ role: 'system', content: 'Memory context: fact A\nfact B\nfact C' });
    expect(result.messages).toHaveLength(2);
  });
});

describe('injectMemory — user role for providers/models without system support', () => {
  it('uses the user role for the o1 provider', () => {
    const result = injectMemory(makeRequest(), [mem('User context detail')], { provider: 'o1' });
    expect(result.messages![0]).toEqual({ role: 'user', content: 'Memory context: User context detail' });
    expect(result.messages![1]).toEqual({ role: 'user', content: 'Hello' });
  });

  it('uses the user role for o1-mini', () => {
    const result = injectMemory(makeRequest(), [mem('Preference')], { provider: 'o1-mini' });
    expect(result.messages![0].role).toBe('user');
    expect(result.messages![0].content).toContain('Memory context:');
  });

  it.each(['glm', 'glmt', 'glm-cn', 'zai', 'qianfan', 'GLM'])('uses the user role for GLM-family provider %s (#1701)', (provider) => {
    const result = injectMemory(makeRequest(), [mem('fact')], { provider });
    expect(result.messages![0].role).toBe('user');
    expect(result.messages!.filter((m) => m.role === 'system')).toHaveLength(0);
  });

  it('Engram: uses the user role when the model (option or request body) is an o1/glm model', () => {
    expect(injectMemory(makeRequest({ model: 'o1-mini' }), [mem('f')], { provider: 'openai' }).messages![0].role).toBe('user');
    expect(injectMemory(makeRequest(), [mem('f')], { provider: 'openrouter', model: 'z-ai/glm-4.5' }).messages![0].role).toBe('user');
    // An explicit model option wins over the body's model.
    expect(injectMemory(makeRequest({ model: 'o1' }), [mem('f')], { model: 'gpt-4o' }).messages![0].role).toBe('system');
  });
});

describe('injectMemory — edge cases', () => {
  it('returns the original request when memories are empty, null or blank', () => {
    const request = makeRequest();
    expect(injectMemory(request, [], { provider: 'openai' })).toBe(request);
    expect(injectMemory(request, null, { provider: 'openai' })).toBe(request);
    expect(injectMemory(request, [mem('  ')], { provider: 'openai' })).toBe(request);
  });

  it('handles an empty messages array', () => {
    const result = injectMemory(makeRequest({ messages: [] }), [mem('fact')], { provider: 'openai' });
    expect(result.messages).toEqual([{ role: 'system', content: 'Memory context: fact' }]);
  });

  it('leaves bodies without a messages array alone (Responses-API `input` is not injected here)', () => {
    const body = { model: 'gpt-4.1', input: 'hi' } as ChatRequest;
    expect(injectMemory(body, [mem('fact')])).toBe(body);
    expect(injectMemory(null as unknown as ChatRequest, [mem('fact')])).toBeNull();
  });
});

describe('injectMemory — cache-safe placement (#3890)', () => {
  it('puts memory immediately before the last user message', () => {
    const result = injectMemory(multiTurn(), [mem('fact')], { provider: 'anthropic', cacheSafe: true });
    expect(result.messages!.map((m) => m.content)).toEqual(['You are helpful', 'turn 1', 'answer 1', 'Memory context: fact', 'turn 2']);
    expect(result.messages![3].role).toBe('system');
  });

  it('keeps the prefix byte-stable across turns', () => {
    const turn1 = multiTurn();
    const turn2: ChatRequest = {
      ...turn1,
      messages: [...turn1.messages!, { role: 'assistant', content: 'answer 2' }, { role: 'user', content: 'turn 3' }],
    };
    const a = injectMemory(turn1, [mem('fact X')], { cacheSafe: true });
    const b = injectMemory(turn2, [mem('fact Y')], { cacheSafe: true });
    // Everything the first request sent before its memory is sent unchanged, in the same place, by the second.
    const prefixA = JSON.stringify(a.messages!.slice(0, 3));
    expect(JSON.stringify(b.messages!.slice(0, 3))).toBe(prefixA);
    expect(JSON.stringify(turn1.messages!.slice(0, 3))).toBe(prefixA);
  });

  it('falls back to index 0 when there is no user message', () => {
    const request: ChatRequest = { messages: [{ role: 'system', content: 'sys' }, { role: 'assistant', content: 'a' }] };
    const result = injectMemory(request, [mem('fact')], { cacheSafe: true });
    expect(result.messages![0]).toEqual({ role: 'system', content: 'Memory context: fact' });
  });

  it('uses the user role before the last user turn for providers without system support', () => {
    const result = injectMemory(multiTurn(), [mem('fact')], { provider: 'glm', cacheSafe: true });
    expect(result.messages![3]).toEqual({ role: 'user', content: 'Memory context: fact' });
  });

  it('detects cache markers itself when cacheSafe is not given, and an explicit false wins', () => {
    const request = multiTurn();
    request.messages![0] = { role: 'system', content: [{ type: 'text', text: 'You are helpful', cache_control: { type: 'ephemeral' } }] };
    expect(injectMemory(request, [mem('fact')]).messages![3].content).toBe('Memory context: fact');
    expect(injectMemory(request, [mem('fact')], { cacheSafe: false }).messages![0].content).toBe('Memory context: fact');
    expect(injectMemory(multiTurn(), [mem('fact')]).messages![0].content).toBe('Memory context: fact');
  });
});

describe('injectMemory — system message must be first (#6135)', () => {
  const systemAfterZero = (messages: ChatMessage[]) => messages.slice(1).filter((m) => m.role === 'system');

  it('merges memory into an existing system[0], even when cache-safe', () => {
    const result = injectMemory(multiTurn('xiaomi-mimo/mimo-v2.5-pro'), [mem('fact')], { provider: 'xiaomi-mimo', cacheSafe: true });
    expect(result.messages).toHaveLength(4);
    expect(result.messages![0]).toEqual({ role: 'system', content: 'Memory context: fact\n\nYou are helpful' });
    expect(systemAfterZero(result.messages!)).toHaveLength(0);
  });

  it('inserts a system message at index 0 when there is none', () => {
    const request: ChatRequest = {
      messages: [
        { role: 'user', content: 'hello' },
        { role: 'assistant', content: 'hi' },
        { role: 'user', content: 'question' },
      ],
    };
    const result = injectMemory(request, [mem('ctx')], { provider: 'mimo', cacheSafe: true });
    expect(result.messages![0]).toEqual({ role: 'system', content: 'Memory context: ctx' });
    expect(result.messages![1].content).toBe('hello');
    expect(systemAfterZero(result.messages!)).toHaveLength(0);
  });

  it('is detected from the provider or the model, and can be forced or disabled by option', () => {
    expect(injectMemory(multiTurn(), [mem('f')], { provider: 'xiaomi-mimo', cacheSafe: true }).messages).toHaveLength(4);
    expect(injectMemory(multiTurn('mimo-v2-flash'), [mem('f')], { provider: 'openrouter', cacheSafe: true }).messages).toHaveLength(4);
    expect(injectMemory(multiTurn(), [mem('f')], { provider: 'anthropic', cacheSafe: true, systemMessageMustBeFirst: true }).messages).toHaveLength(4);
    const lenient = injectMemory(multiTurn(), [mem('f')], { provider: 'xiaomi-mimo', cacheSafe: true, systemMessageMustBeFirst: false });
    expect(lenient.messages![0].content).toBe('You are helpful');
    expect(lenient.messages![3].content).toBe('Memory context: f');
  });

  it('a lenient provider with cache markers places memory before the last user turn', () => {
    const result = injectMemory(multiTurn(), [mem('fact')], { provider: 'anthropic', cacheSafe: true });
    expect(result.messages![0].content).toBe('You are helpful');
    expect(result.messages![3].role).toBe('system');
    expect(result.messages![3].content).toContain('Memory context');
  });

  it('merges into a system message whose content is an array of parts', () => {
    const request: ChatRequest = { messages: [{ role: 'system', content: [{ type: 'text', text: 'sys' }] }, { role: 'user', content: 'q' }] };
    const result = injectMemory(request, [mem('fact')], { provider: 'mimo' });
    expect(result.messages![0].content).toEqual([{ type: 'text', text: 'Memory context: fact' }, { type: 'text', text: 'sys' }]);
  });
});

describe('shouldInjectMemory', () => {
  it('is true when messages are present and enabled is not false', () => {
    expect(shouldInjectMemory(makeRequest())).toBe(true);
    expect(shouldInjectMemory(makeRequest(), { enabled: true })).toBe(true);
    expect(shouldInjectMemory(makeRequest(), {})).toBe(true);
  });

  it('is false when disabled, for empty/missing messages and for non-objects', () => {
    expect(shouldInjectMemory(makeRequest(), { enabled: false })).toBe(false);
    expect(shouldInjectMemory(makeRequest({ messages: [] }))).toBe(false);
    expect(shouldInjectMemory({ input: 'hello' })).toBe(false);
    expect(shouldInjectMemory({ messages: 'hello' })).toBe(false);
    expect(shouldInjectMemory(null)).toBe(false);
    expect(shouldInjectMemory('x')).toBe(false);
  });
});

describe('detectCacheControl', () => {
  it('finds markers on messages, content parts and the top-level system', () => {
    expect(detectCacheControl({ messages: [{ role: 'user', content: 'x', cache_control: { type: 'ephemeral' } }] })).toBe(true);
    expect(
      detectCacheControl({ messages: [{ role: 'user', content: [{ type: 'text', text: 'x', cache_control: { type: 'ephemeral' } }] }] }),
    ).toBe(true);
    expect(detectCacheControl({ system: [{ type: 'text', text: 'sys', cache_control: { type: 'ephemeral', ttl: '1h' } }], messages: [] })).toBe(true);
  });

  it('is false without markers, for null markers, markers outside messages/system, and non-objects', () => {
    expect(detectCacheControl(makeRequest())).toBe(false);
    expect(detectCacheControl({ messages: [{ role: 'user', content: 'x', cache_control: null }] })).toBe(false);
    expect(detectCacheControl({ metadata: { cache_control: { type: 'ephemeral' } }, messages: [] })).toBe(false);
    expect(detectCacheControl({ messages: [{ role: 'user', content: 'mentions cache_control in text' }] })).toBe(false);
    for (const v of [null, undefined, 'cache_control', 3]) expect(detectCacheControl(v)).toBe(false);
  });

  it('stays bounded on pathologically deep bodies', () => {
    let deep: Record<string, unknown> = { cache_control: { type: 'ephemeral' } };
    for (let i = 0; i < 50_000; i++) deep = { next: deep };
    expect(() => detectCacheControl({ messages: [deep] })).not.toThrow();
    expect(detectCacheControl({ messages: [deep] })).toBe(false);
  });
});

describe('isNoMemoryRequested', () => {
  it.each(['true', '1', 'yes', 'TRUE', ' Yes ', 'True'])('is true for x-omniroute-no-memory: %j', (v) => {
    expect(isNoMemoryRequested({ 'x-omniroute-no-memory': v })).toBe(true);
  });

  it('accepts x-no-memory too', () => {
    expect(isNoMemoryRequested({ 'x-no-memory': '1' })).toBe(true);
  });

  it('matches header names case-insensitively on plain objects', () => {
    expect(isNoMemoryRequested({ 'X-OmniRoute-No-Memory': 'true' })).toBe(true);
    expect(isNoMemoryRequested({ 'X-NO-MEMORY': 'yes' })).toBe(true);
  });

  it('works with fetch Headers instances', () => {
    expect(isNoMemoryRequested(new Headers({ 'X-Omniroute-No-Memory': 'yes' }))).toBe(true);
    expect(isNoMemoryRequested(new Headers({ 'x-no-memory': 'TRUE' }))).toBe(true);
    expect(isNoMemoryRequested(new Headers({ 'x-no-memory': 'false' }))).toBe(false);
    expect(isNoMemoryRequested(new Headers())).toBe(false);
  });

  it('handles array-valued and comma-joined (repeated) headers: any truthy value opts out', () => {
    expect(isNoMemoryRequested({ 'x-no-memory': ['no', 'true'] })).toBe(true);
    expect(isNoMemoryRequested({ 'x-no-memory': ['0', 'false'] })).toBe(false);
    expect(isNoMemoryRequested({ 'x-omniroute-no-memory': 'false, 1' })).toBe(true);
  });

  it.each(['false', '0', 'no', '', 'maybe', 'truthy', 'on'])('is false for %j', (v) => {
    expect(isNoMemoryRequested({ 'x-omniroute-no-memory': v, 'x-no-memory': v })).toBe(false);
  });

  it('is false for missing headers or unrelated names', () => {
    expect(isNoMemoryRequested({})).toBe(false);
    expect(isNoMemoryRequested(null)).toBe(false);
    expect(isNoMemoryRequested(undefined)).toBe(false);
    expect(isNoMemoryRequested({ 'x-memory': 'true', 'x-no-memory-please': 'true' })).toBe(false);
  });
});

describe('sessionIdFromHeaders', () => {
  it('reads x-omniroute-session-id first, then x-session-id, trimmed', () => {
    expect(sessionIdFromHeaders({ 'x-omniroute-session-id': ' abc ', 'x-session-id': 'other' })).toBe('abc');
    expect(sessionIdFromHeaders({ 'X-Session-Id': 'sess-42' })).toBe('sess-42');
    expect(sessionIdFromHeaders(new Headers({ 'X-OmniRoute-Session-Id': 'h1' }))).toBe('h1');
    expect(sessionIdFromHeaders({ 'x-session-id': ['', 'first-real'] })).toBe('first-real');
  });

  it('is null when absent, blank or longer than 256 characters', () => {
    expect(sessionIdFromHeaders({})).toBeNull();
    expect(sessionIdFromHeaders(null)).toBeNull();
    expect(sessionIdFromHeaders({ 'x-session-id': '   ' })).toBeNull();
    expect(sessionIdFromHeaders({ 'x-session-id': 's'.repeat(257) })).toBeNull();
    expect(sessionIdFromHeaders({ 'x-session-id': 's'.repeat(256) })).toBe('s'.repeat(256));
  });
});

describe('formatMemoryContext with distinctContent (retrieval already removed repeats)', () => {
  it('keeps every non-blank text as given, trimmed, without the duplicate check', () => {
    const texts = [{ content: 'likes tea' }, { content: '  ' }, { content: ' Prefers Go ' }];
    expect(formatMemoryContext(texts, { distinctContent: true })).toBe('Memory context: likes tea\nPrefers Go');
    // The same list without the flag gives the same block: the flag only skips work.
    expect(formatMemoryContext(texts)).toBe(formatMemoryContext(texts, { distinctContent: true }));
  });
});
