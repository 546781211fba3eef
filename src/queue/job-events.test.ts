import type { Env } from '../config/env';
import type { Logger } from '../logger';
import { JobEventsHub, type QueueSource } from './job-events';

describe('JobEventsHub event streams at shutdown', () => {
  // No Redis is touched: only the streams' registry.
  const hub = () => new JobEventsHub({} as Env, {} as Logger, {} as QueueSource);

  it('endStreams ends each open stream once; an unregistered one is not called', () => {
    const h = hub();
    const a = jest.fn();
    const b = jest.fn();
    h.trackStream(a);
    const untrackB = h.trackStream(b);
    untrackB();
    untrackB();
    expect(h.streamCount()).toBe(1);
    expect(h.endStreams()).toBe(1);
    expect(a).toHaveBeenCalledTimes(1);
    expect(b).not.toHaveBeenCalled();
    expect(h.streamCount()).toBe(0);
    expect(h.endStreams()).toBe(0);
    expect(a).toHaveBeenCalledTimes(1);
  });

  it('a stream opened after endStreams (a keep-alive socket that sent one more request) is told at once and not kept', () => {
    const h = hub();
    h.endStreams();
    const late = jest.fn();
    const untrack = h.trackStream(late);
    expect(late).toHaveBeenCalledTimes(1);
    expect(h.streamCount()).toBe(0);
    untrack();
  });
});
