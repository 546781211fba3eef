import { Writable } from 'node:stream';
import { createLogger } from './logger';
import { Shutdown } from './shutdown';

function capture() {
  const raw: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      raw.push(chunk.toString());
      cb();
    },
  });
  const lines = () =>
    raw
      .join('')
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { log: createLogger('trace', 'shutdown', sink), lines };
}

describe('Shutdown', () => {
  afterEach(() => jest.useRealTimers());

  it('runs the steps once, in order, past a failing one, and reports none pending after', async () => {
    const { log, lines } = capture();
    const exit = jest.fn();
    const order: string[] = [];
    const s = new Shutdown(log, 1000, exit)
      .add('a', () => void order.push('a'))
      .add('b', () => {
        throw new Error('b broke');
      })
      .add('c', async () => void order.push(`c:${s.pending}`));
    const first = s.run('stop');
    expect(s.run('again')).toBe(first);
    await first;
    expect(order).toEqual(['a', 'c:c']);
    expect(s.pending).toBeNull();
    expect(lines().find((l) => l.msg === 'shutdown step failed')).toMatchObject({ step: 'b' });
    expect(exit).not.toHaveBeenCalled();
  });

  it('names the step that hung when the grace period runs out, then exits 1', async () => {
    jest.useFakeTimers();
    const { log, lines } = capture();
    const exit = jest.fn();
    const s = new Shutdown(log, 1000, exit).add('http', () => undefined).add('queues', () => new Promise<void>(() => undefined));
    void s.run('stop');
    await jest.advanceTimersByTimeAsync(5999);
    expect(exit).not.toHaveBeenCalled();
    expect(s.pending).toBe('queues');
    await jest.advanceTimersByTimeAsync(1);
    expect(exit).toHaveBeenCalledWith(1);
    expect(lines().find((l) => l.level === 50)).toMatchObject({ msg: 'shutdown grace period exceeded; forcing exit', step: 'queues', graceMs: 1000 });
  });
});
