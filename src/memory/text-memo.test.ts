import { duplicateKey, rowDuplicateKey, TextMemo } from './text-memo';

describe('TextMemo', () => {
  it('computes a text once, and starts over when the characters held would pass the bound', () => {
    const calls: string[] = [];
    const memo = new TextMemo((t) => (calls.push(t), t.toUpperCase()), 12, 5);
    expect(memo.get('abc')).toBe('ABC');
    expect(memo.get('abc')).toBe('ABC');
    expect(calls).toEqual(['abc']);
    expect(memo.get('de')).toBe('DE'); // 6 + 4 = 10 characters held
    expect(memo.size).toBe(2);
    expect(memo.get('fgh')).toBe('FGH'); // 10 + 6 > 12: starts over with only this one
    expect(memo.size).toBe(1);
    // Longer than maxText: computed per call, never held.
    expect(memo.get('toolong')).toBe('TOOLONG');
    expect(memo.get('toolong')).toBe('TOOLONG');
    expect(memo.size).toBe(1);
    expect(calls).toEqual(['abc', 'de', 'fgh', 'toolong', 'toolong']);
  });
});

describe('duplicateKey', () => {
  it('trims, collapses whitespace runs and lower-cases', () => {
    expect(duplicateKey('  Likes\tGreen \n\n TEA ')).toBe('likes green tea');
    expect(duplicateKey('likes green tea')).toBe('likes green tea');
    expect(duplicateKey('')).toBe('');
  });
});

describe('rowDuplicateKey', () => {
  it("is duplicateKey of the row's content, kept on the row out of sight, and recomputed when the content changes", () => {
    const row = { id: 'm1', content: '  Likes\tGreen TEA ' };
    expect(rowDuplicateKey(row)).toBe('likes green tea');
    expect(rowDuplicateKey(row)).toBe('likes green tea');
    // Not copied by spreads, not serialised, not an own enumerable key.
    expect(Object.keys(row)).toEqual(['id', 'content']);
    expect({ ...row }).toEqual({ id: 'm1', content: '  Likes\tGreen TEA ' });
    expect(Object.getOwnPropertySymbols({ ...row })).toEqual([]);
    expect(JSON.stringify(row)).toBe('{"id":"m1","content":"  Likes\\tGreen TEA "}');
    row.content = 'Black  Coffee';
    expect(rowDuplicateKey(row)).toBe('black coffee');
    // A frozen row cannot hold it: computed per call.
    const frozen = Object.freeze({ content: 'A  B' });
    expect(rowDuplicateKey(frozen)).toBe('a b');
    expect(rowDuplicateKey(frozen)).toBe('a b');
  });
});
