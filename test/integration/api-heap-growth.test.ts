import v8 from 'node:v8';
import { startApi } from '../../src/api';
import { silentLog, testEnv } from '../helpers/env';

describe('api process: V8 heap growth cap (API_HEAP_GROWING_PERCENT)', () => {
  afterEach(() => jest.restoreAllMocks());

  it('startApi caps the growth at 30% by default, at the configured value, and leaves V8 alone at 0', async () => {
    // Mocked: the test process's own heap keeps V8's defaults.
    const set = jest.spyOn(v8, 'setFlagsFromString').mockImplementation(() => undefined);
    // The shutdown's grace timer must never end jest's own process: a stop that hung past it (once, in CI) called
    // process.exit(1) and killed the whole run. Recorded instead, so a hang fails this test.
    // It records the step still running, so a failure names the one that hung.
    const hung: Array<string | null> = [];
    let api: Awaited<ReturnType<typeof startApi>> | undefined;
    const exit = jest.fn(() => void hung.push(api?.shutdown.pending ?? null));
    for (const [value, expected] of [[undefined, ['--heap-growing-percent=30']], ['45', ['--heap-growing-percent=45']], ['0', []]] as const) {
      set.mockClear();
      api = await startApi(testEnv({ PORT: '0', API_HEAP_GROWING_PERCENT: value }), silentLog(), { exit });
      try {
        expect(set.mock.calls.map((c) => c[0])).toEqual(expected);
      } finally {
        await api.stop();
      }
    }
    expect(hung).toEqual([]);
    expect(exit).not.toHaveBeenCalled();
  });
});
