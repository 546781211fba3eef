import { lastUserText, MAX_TEXT_CHARS, responseText, streamDeltaText, tailChars } from './chat-text';

describe('lastUserText', () => {
  it('returns the string content of the last user message', () => {
    const messages = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'first question' },
      { role: 'assistant', content: 'an answer' },
      { role: 'user', content: '  I prefer tabs  ' },
    ];
    expect(lastUserText(messages)).toBe('I prefer tabs');
  });

  it('skips trailing non-user messages (assistant, tool)', () => {
    const messages = [
      { role: 'user', content: 'what is the weather' },
      { role: 'assistant', content: null, tool_calls: [{ id: 't1' }] },
      { role: 'tool', content: '{"temp": 20}', tool_call_id: 't1' },
    ];
    expect(lastUserText(messages)).toBe('what is the weather');
  });

  it('joins text and input_text parts with a space and ignores other parts', () => {
    const messages = [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'describe' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
          { type: 'input_text', text: 'this picture' },
          { type: 'input_audio', input_audio: { data: 'xx' } },
        ],
      },
    ];
    expect(lastUserText(messages)).toBe('describe this picture');
  });

  it('returns "" when the last user message has no text (the query is not taken from older turns)', () => {
    const messages = [
      { role: 'user', content: 'older text' },
      { role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] },
    ];
    expect(lastUserText(messages)).toBe('');
  });

  it('is total: no user message, non-arrays and malformed entries give ""', () => {
    expect(lastUserText([{ role: 'assistant', content: 'hi' }])).toBe('');
    expect(lastUserText([])).toBe('');
    expect(lastUserText(undefined)).toBe('');
    expect(lastUserText('I like tea')).toBe('');
    expect(lastUserText({ role: 'user', content: 'x' })).toBe('');
    expect(lastUserText([null, 3, 'user', { role: 'user', content: 42 }])).toBe('');
    expect(lastUserText([{ role: 'user', content: [null, { type: 'text', text: 7 }, { type: 'text', text: 'ok' }] }])).toBe('ok');
  });

  it('keeps only the newest 64 KiB of a huge message (the extraction payload cap)', () => {
    const text = 'A'.repeat(MAX_TEXT_CHARS) + 'the end';
    const out = lastUserText([{ role: 'user', content: text }]);
    expect(out.length).toBe(MAX_TEXT_CHARS);
    expect(out.endsWith('the end')).toBe(true);
  });
});

describe('responseText', () => {
  it('reads an OpenAI chat completion (string content)', () => {
    const body = { id: 'x', choices: [{ index: 0, message: { role: 'assistant', content: ' Sure, noted. ' } }] };
    expect(responseText(body)).toBe('Sure, noted.');
  });

  it('reads an OpenAI completion whose content is an array of parts', () => {
    const body = {
      choices: [{ message: { role: 'assistant', content: [{ type: 'text', text: 'one' }, { type: 'output_text', text: 'two' }, { type: 'refusal', refusal: 'no' }] } }],
    };
    expect(responseText(body)).toBe('one\ntwo');
  });

  it('gives "" for a tool-call-only OpenAI reply', () => {
    expect(responseText({ choices: [{ message: { role: 'assistant', content: null, tool_calls: [{ id: 'c' }] } }] })).toBe('');
    expect(responseText({ choices: [] })).toBe('');
  });

  it('reads a Claude message: text blocks joined by a newline, tool_use and thinking skipped', () => {
    const body = {
      type: 'message',
      role: 'assistant',
      content: [
        { type: 'thinking', thinking: 'hmm' },
        { type: 'text', text: 'First.' },
        { type: 'tool_use', id: 't', name: 'f', input: {} },
        { type: 'text', text: 'Second.' },
      ],
    };
    expect(responseText(body)).toBe('First.\nSecond.');
  });

  it('reads a Responses API body: output_text, else the message items of output[]', () => {
    expect(responseText({ object: 'response', output_text: 'hello there' })).toBe('hello there');
    const raw = {
      object: 'response',
      output: [
        { type: 'reasoning', summary: [] },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'from output' }] },
        { type: 'function_call', name: 'f', arguments: '{}' },
      ],
    };
    expect(responseText(raw)).toBe('from output');
  });

  it('keeps only the newest 64 KiB', () => {
    const long = 'x'.repeat(MAX_TEXT_CHARS + 100) + 'TAIL';
    const out = responseText({ choices: [{ message: { content: long } }] });
    expect(out.length).toBeLessThanOrEqual(MAX_TEXT_CHARS);
    expect(out.endsWith('TAIL')).toBe(true);
  });

  it('is total for anything else', () => {
    for (const v of [null, undefined, 'text', 42, [], {}, { choices: 'x' }, { content: 'x' }, { output: [null, 1] }]) {
      expect(responseText(v)).toBe('');
    }
  });
});

describe('streamDeltaText', () => {
  const chunk = (delta: unknown, index = 0) => ({ id: 'c', object: 'chat.completion.chunk', choices: [{ index, delta }] });

  it('reads choices[0].delta.content from a parsed chunk, a JSON string or an SSE data line', () => {
    expect(streamDeltaText(chunk({ content: 'Hel' }))).toBe('Hel');
    expect(streamDeltaText(JSON.stringify(chunk({ content: 'lo' })))).toBe('lo');
    expect(streamDeltaText(`data: ${JSON.stringify(chunk({ content: '!' }))}`)).toBe('!');
  });

  it('gives "" for [DONE], role-only, tool-call, finish and malformed chunks', () => {
    expect(streamDeltaText('[DONE]')).toBe('');
    expect(streamDeltaText('data: [DONE]')).toBe('');
    expect(streamDeltaText(chunk({ role: 'assistant' }))).toBe('');
    expect(streamDeltaText(chunk({ tool_calls: [{ index: 0, function: { arguments: '{' } }] }))).toBe('');
    expect(streamDeltaText({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })).toBe('');
    expect(streamDeltaText('{not json')).toBe('');
    expect(streamDeltaText(null)).toBe('');
    expect(streamDeltaText({ choices: [] })).toBe('');
  });

  it('only captures choice 0 when a stream carries several choices (n > 1)', () => {
    expect(streamDeltaText(chunk({ content: 'other' }, 1))).toBe('');
    expect(streamDeltaText({ choices: [{ index: 1, delta: { content: 'b' } }, { index: 0, delta: { content: 'a' } }] })).toBe('a');
  });

  it('concatenated deltas reproduce the reply', () => {
    const parts = ['I ', 'always ', 'answer', ' briefly.'];
    const lines = [chunk({ role: 'assistant', content: '' }), ...parts.map((p) => chunk({ content: p }))].map((c) => `data: ${JSON.stringify(c)}`);
    lines.push('data: [DONE]');
    expect(lines.map(streamDeltaText).join('')).toBe('I always answer briefly.');
  });
});

describe('tailChars', () => {
  it('never starts on half of a surrogate pair', () => {
    const text = 'ab' + '😀'.repeat(10);
    for (let max = 1; max < text.length; max++) {
      const out = tailChars(text, max);
      expect(out.length).toBeLessThanOrEqual(max);
      const first = out.charCodeAt(0);
      expect(first >= 0xdc00 && first <= 0xdfff).toBe(false);
    }
  });

  it('returns short text unchanged', () => {
    expect(tailChars('short', 10)).toBe('short');
  });
});
