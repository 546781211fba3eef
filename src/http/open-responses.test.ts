import { ServerResponse, IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import { OpenResponses } from './open-responses';

const response = () => new ServerResponse(new IncomingMessage(new Socket()));

describe('OpenResponses', () => {
  it('holds what was added and not removed, whatever the order of removal', () => {
    const open = new OpenResponses();
    const rs = Array.from({ length: 50 }, response);
    for (const r of rs) open.add(r);
    // Remove every third one, from the middle, the first and the last.
    const gone = new Set(rs.filter((_, i) => i % 3 === 0 || i === 49 || i === 1));
    for (const r of gone) open.delete(r);
    const left = open.list();
    expect(open.size).toBe(rs.length - gone.size);
    expect(new Set(left)).toEqual(new Set(rs.filter((r) => !gone.has(r))));
    for (const r of left) open.delete(r);
    expect(open.size).toBe(0);
    expect(open.list()).toEqual([]);
  });

  it('ignores a second add, a second delete and a response it never held', () => {
    const open = new OpenResponses();
    const [a, b, stranger] = [response(), response(), response()];
    open.add(a);
    open.add(a);
    open.add(b);
    expect(open.size).toBe(2);
    open.delete(stranger);
    open.delete(a);
    open.delete(a);
    expect(open.list()).toEqual([b]);
  });

  it("keeps each tracker's responses apart (a response's slot in another tracker is not this one's)", () => {
    const one = new OpenResponses();
    const two = new OpenResponses();
    const [a, b] = [response(), response()];
    one.add(a);
    two.add(b);
    two.delete(a);
    expect(one.list()).toEqual([a]);
    expect(two.list()).toEqual([b]);
    // One response in both: each removes it from its own list only.
    two.add(a);
    one.delete(a);
    expect(one.list()).toEqual([]);
    expect(two.list()).toEqual([b, a]);
    two.delete(a);
    expect(two.list()).toEqual([b]);
  });

  it('gives a copy: removing while walking it skips nothing', () => {
    const open = new OpenResponses();
    const rs = Array.from({ length: 5 }, response);
    for (const r of rs) open.add(r);
    const seen: ServerResponse[] = [];
    for (const r of open.list()) {
      seen.push(r);
      open.delete(r);
    }
    expect(seen).toHaveLength(5);
    expect(open.size).toBe(0);
  });
});
