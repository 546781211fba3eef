import { maskBackendConfigs, restoreMaskedSecrets } from './factory';
import { safeFileSegment } from './safe-name';
import { parseRemoteMemory } from './types';

describe('remote memories are checked and completed, never trusted as-is', () => {
  it('fills defaults, revives dates, drops unknown types and fields', () => {
    const m = parseRemoteMemory('svc', { id: 42, content: 'x', type: 'weird', createdAt: 0, updatedAt: 'not a date', extra: 'dropped', metadata: 'not an object' });
    expect(m).toEqual({
      id: '42',
      apiKeyId: '',
      sessionId: '',
      type: 'factual',
      key: '',
      content: 'x',
      metadata: {},
      createdAt: '1970-01-01T00:00:00.000Z',
      updatedAt: '1970-01-01T00:00:00.000Z',
      expiresAt: null,
      accessCount: 0,
      lastAccessedAt: null,
    });
  });
  it('refuses what is not a memory, naming the backend and the path', () => {
    expect(() => parseRemoteMemory('svc', { id: 'a' })).toThrow(/backend svc answered with something that is not a memory \(content:/);
    expect(() => parseRemoteMemory('svc', 'text')).toThrow(/not a memory/);
  });
});

describe('safeFileSegment', () => {
  it.each([
    ['../../x', /^x-[0-9a-f]{8}$/],
    ['..\\..\\windows\\system32', /^windows_system32-[0-9a-f]{8}$/],
    ['a/b', /^a_b-[0-9a-f]{8}$/],
    ['', /^memory-[0-9a-f]{8}$/],
    ['...', /^memory-[0-9a-f]{8}$/],
    ['nul.txt', /^_nul\.txt-[0-9a-f]{8}$/],
    ['préférence éditeur', /^préférence éditeur$/],
    ['tab\there', /^tab_here-[0-9a-f]{8}$/],
  ])('%j → %s', (raw, re) => {
    const s = safeFileSegment(raw);
    expect(s).toMatch(re);
    expect(s).not.toMatch(/[/\\:*?"<>|]|^\.|\.\./);
  });
  it('different keys that clean up alike stay different; long keys are bounded', () => {
    expect(safeFileSegment('a/b')).not.toBe(safeFileSegment('a:b'));
    expect(safeFileSegment('k'.repeat(500)).length).toBeLessThanOrEqual(96 + 9);
  });
});

describe('backend secrets in settings responses', () => {
  const stored = { obsidian: { baseUrl: 'http://h', apiKey: 'abcdefghijklmnop', headers: { 'X-Token': 'hdr-secret' } } };
  it('are masked, and a masked round trip keeps the stored values; a new value replaces them', () => {
    const masked = maskBackendConfigs(stored);
    expect(masked.obsidian).toEqual({ baseUrl: 'http://h', apiKey: '***mnop', headers: { 'X-Token': '***' } });
    expect(restoreMaskedSecrets(masked, stored)).toEqual(stored);
    expect(restoreMaskedSecrets({ obsidian: { ...masked.obsidian, apiKey: 'new-key-value-123' } }, stored).obsidian.apiKey).toBe('new-key-value-123');
    expect(maskBackendConfigs({ x: { apiKey: 'short' } }).x.apiKey).toBe('***');
  });
});
