import perfHooks from 'node:perf_hooks';
import { Metrics } from './metrics';

/*
 * The event-loop lag gauges are sampled every 100 ms (Metrics' constructor), not every 10 ms: an idle process no
 * longer wakes a hundred times a second for them. They must still be exported and still see a stall.
 */
describe('Metrics: event-loop lag', () => {
  it('still exports the lag gauges, and a 300 ms stall shows in their maximum', async () => {
    const m = new Metrics('api');
    // Let the sampling timer start, then block the loop.
    await new Promise((r) => setTimeout(r, 150));
    const until = Date.now() + 300;
    while (Date.now() < until) {
      // a stall, as a synchronous handler would make one
    }
    await new Promise((r) => setTimeout(r, 150));
    const text = await m.registry.metrics();
    const max = Number(/^engram_nodejs_eventloop_lag_max_seconds\{[^}]*\} (\S+)$/m.exec(text)?.[1]);
    expect(text).toMatch(/^engram_nodejs_eventloop_lag_p99_seconds\{/m);
    expect(max).toBeGreaterThan(0.2);
    m.registry.clear();
  });

  it('samples with a 100 ms timer (prom-client reads the histogram Node fills at that resolution)', () => {
    // The resolution is the option prom-client hands to monitorEventLoopDelay; checked through the call it makes.
    const seen: number[] = [];
    const real = perfHooks.monitorEventLoopDelay;
    const spy = jest.spyOn(perfHooks, 'monitorEventLoopDelay').mockImplementation((opts) => {
      seen.push(opts?.resolution ?? -1);
      return real(opts);
    });
    try {
      const m = new Metrics('worker');
      m.registry.clear();
    } finally {
      spy.mockRestore();
    }
    expect(seen).toEqual([100]);
  });
});
