import { duplicateKey, heldOnRow, rowDuplicateKey } from './row-memo';

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

describe('heldOnRow', () => {
  it('derives once per source, recomputes when the source changes (objects by identity), and holds nothing on a frozen row', () => {
    const slot = Symbol('test');
    const calls: unknown[] = [];
    const derive = (s: unknown) => (calls.push(s), JSON.stringify(s));
    const meta1 = { a: 1 };
    const row = { metadata: meta1 };
    expect(heldOnRow(row, slot, row.metadata, derive)).toBe('{"a":1}');
    expect(heldOnRow(row, slot, row.metadata, derive)).toBe('{"a":1}');
    expect(calls).toEqual([meta1]);
    // An equal but different object is another source.
    row.metadata = { a: 1 };
    heldOnRow(row, slot, row.metadata, derive);
    expect(calls).toHaveLength(2);
    const frozen = Object.freeze({ metadata: meta1 });
    heldOnRow(frozen, slot, frozen.metadata, derive);
    heldOnRow(frozen, slot, frozen.metadata, derive);
    expect(calls).toHaveLength(4);
    expect(Object.getOwnPropertySymbols(frozen)).toEqual([]);
  });
});
