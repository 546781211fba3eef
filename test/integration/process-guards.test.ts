import { spawnSync } from 'node:child_process';
import { EventEmitter } from 'node:events';
import net from 'node:net';
import path from 'node:path';
import { Writable } from 'node:stream';
import { startApi } from '../../src/api';
import { createLogger } from '../../src/logger';
import { Metrics } from '../../src/metrics';
import { installProcessGuards } from '../../src/process-guards';
import { testEnv } from '../helpers/env';

const ROOT = path.resolve(__dirname, '..', '..');

/** A logger whose JSON lines are kept in memory. */
function capture(): { log: ReturnType<typeof createLogger>; lines: () => Record<string, unknown>[] } {
  const raw: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      raw.push(chunk.toString());
      cb();
    },
  });
  return { log: createLogger('trace', 'guards', sink), lines: () => raw.join('').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) };
}

const counterValue = async (metrics: Metrics, name: string) => (await metrics.registry.getSingleMetric(name)!.get()).values.reduce((s, v) => s + v.value, 0);

describe('process guards (unhandled rejections, uncaught exceptions)', () => {
  it('an unhandled rejection is logged (name and message only) and counted, and the process keeps running', async () => {
    const proc = new EventEmitter();
    const { log, lines } = capture();
    const metrics = new Metrics('api');
    const shutdown = { run: jest.fn(async () => undefined) };
    const exit = jest.fn();
    const uninstall = installProcessGuards({ log, metrics, shutdown, exit, proc });
    const err = Object.assign(new Error('fts5: syntax error'), { data: { content: 'SECRET MEMORY TEXT' } });
    proc.emit('unhandledRejection', err, Promise.resolve());
    proc.emit('unhandledRejection', { content: 'SECRET MEMORY TEXT in a plain object' }, Promise.resolve());
    expect(await counterValue(metrics, 'engram_unhandled_rejections_total')).toBe(2);
    const warned = lines().filter((l) => l.level === 40);
    expect(warned).toHaveLength(2);
    expect(warned[0]).toMatchObject({ err: { name: 'Error', message: 'fts5: syntax error' } });
    expect(JSON.stringify(lines())).not.toContain('SECRET MEMORY TEXT');
    expect(shutdown.run).not.toHaveBeenCalled();
    expect(exit).not.toHaveBeenCalled();
    uninstall();
    expect(proc.listenerCount('unhandledRejection')).toBe(0);
    expect(proc.listenerCount('uncaughtException')).toBe(0);
  });

  it('an uncaught exception is logged as fatal, counted, then the ordered shutdown runs and the process exits 1 (once)', async () => {
    const proc = new EventEmitter();
    const { log, lines } = capture();
    const metrics = new Metrics('worker');
    const order: string[] = [];
    let finishShutdown!: () => void;
    const shutdown = {
      run: jest.fn((reason: string) => {
        order.push(`shutdown:${reason}`);
        return new Promise<void>((r) => (finishShutdown = r));
      }),
    };
    const exit = jest.fn((code: number) => void order.push(`exit:${code}`));
    installProcessGuards({ log, metrics, shutdown, exit, proc });
    proc.emit('uncaughtException', new TypeError('cannot read x of undefined'), 'uncaughtException');
    // A second one while shutting down is logged and counted, never a second shutdown.
    proc.emit('uncaughtException', new Error('again'), 'uncaughtException');
    expect(await counterValue(metrics, 'engram_uncaught_exceptions_total')).toBe(2);
    expect(lines().filter((l) => l.level === 60).map((l) => (l.err as { message: string }).message)).toEqual(['cannot read x of undefined', 'again']);
    expect(exit).not.toHaveBeenCalled();
    finishShutdown();
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(['shutdown:uncaughtException', 'exit:1']);
  });

  it('in a real process: a rejection does not crash it; an uncaught exception runs the shutdown steps and exits 1', () => {
    const script = `
      const { installProcessGuards } = require('./dist/src/process-guards');
      const { Metrics } = require('./dist/src/metrics');
      const { Shutdown } = require('./dist/src/shutdown');
      const { createLogger } = require('./dist/src/logger');
      const log = createLogger('info', 'guard-test');
      const metrics = new Metrics('api');
      const shutdown = new Shutdown(log, 5000);
      shutdown.add('mark', () => { console.error('STEP-RAN'); });
      installProcessGuards({ log, metrics, shutdown });
      setInterval(() => {}, 1000);
      Promise.reject(new Error('boom-rejection'));
      setTimeout(async () => {
        const text = await metrics.registry.metrics();
        console.error('REJECTIONS ' + /engram_unhandled_rejections_total\\{[^}]*\\} (\\d+)/.exec(text)[1]);
        setTimeout(() => { throw new Error('boom-exception'); }, 10);
      }, 100);
    `;
    const r = spawnSync(process.execPath, ['-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 15_000 });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('REJECTIONS 1');
    expect(r.stderr).toContain('STEP-RAN');
    const logs = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { level: number; msg: string; err?: { message: string } });
    expect(logs.find((l) => l.level === 40 && l.err?.message === 'boom-rejection')).toBeDefined();
    expect(logs.find((l) => l.level === 60 && l.err?.message === 'boom-exception')).toBeDefined();
  });

  it("the api's Metrics carry the counters, and its server answers a malformed request with 400 and keeps serving", async () => {
    const { log, lines } = capture();
    const api = await startApi(testEnv({ PORT: '0', LOG_LEVEL: 'debug' }), log, { exit: jest.fn() });
    try {
      expect(api.metrics.registry.getSingleMetric('engram_unhandled_rejections_total')).toBeDefined();
      expect(api.metrics.registry.getSingleMetric('engram_uncaught_exceptions_total')).toBeDefined();
      const answer = await new Promise<string>((resolve, reject) => {
        const sock = net.connect(api.port, '127.0.0.1');
        let got = '';
        sock.on('data', (d) => (got += d.toString()));
        sock.on('close', () => resolve(got));
        sock.on('error', reject);
        sock.write('GARBAGE / NOT-HTTP\r\n\r\n');
      });
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
      expect(lines().some((l) => l.msg === 'http client error' && typeof l.code === 'string')).toBe(true);
      const health = await fetch(`http://127.0.0.1:${api.port}/healthz`);
      expect(health.status).toBe(200);
      expect(api.server.listenerCount('error')).toBeGreaterThan(0);
    } finally {
      await api.stop();
    }
  });
});
