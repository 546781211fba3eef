import { DEFAULT_MEMORY_SETTINGS } from '../memory/settings';
import { memoryPlan } from './memory-phase';

/** Request headers that count how often their names are listed (what a scan for the session header does). */
function countedHeaders(h: Record<string, string>) {
  let listed = 0;
  const headers = new Proxy(h, {
    ownKeys(target) {
      listed++;
      return Reflect.ownKeys(target);
    },
  });
  return { headers, listed: () => listed };
}

describe('memoryPlan', () => {
  const on = { ...DEFAULT_MEMORY_SETTINGS, enabled: true };

  it('memory on: the session id comes from the session header', () => {
    expect(memoryPlan(on, { 'x-session-id': ' s-1 ' })).toMatchObject({ on: true, offStatus: null, sessionId: 's-1' });
    expect(memoryPlan(on, { 'x-omniroute-session-id': 'a', 'x-session-id': 'b' }).sessionId).toBe('a');
  });

  it('memory off (disabled, no budget): the headers are not scanned, and no session id is reported', () => {
    for (const settings of [{ ...on, enabled: false }, { ...on, maxTokens: 0 }]) {
      const h = countedHeaders({ 'x-session-id': 's-1', 'content-type': 'application/json' });
      expect(memoryPlan(settings, h.headers)).toEqual({ settings, on: false, offStatus: 'disabled', sessionId: null });
      expect(h.listed()).toBe(0);
    }
  });

  it('opted out by header: off, and no session id either', () => {
    expect(memoryPlan(on, { 'x-no-memory': '1', 'x-session-id': 's-1' })).toMatchObject({ on: false, offStatus: 'opted-out', sessionId: null });
  });
});
