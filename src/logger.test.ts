import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { tempDir } from '../test/helpers/env';

const ROOT = path.resolve(__dirname, '..');

/** Runs a script in its own node process (stdout is the process logger's destination); needs `dist/` (npm test builds it). */
function run(script: string): { status: number | null; lines: Array<Record<string, unknown>> } {
  const r = spawnSync(process.execPath, ['-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 15_000 });
  return {
    status: r.status,
    lines: r.stdout
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

describe('processLogDestination (buffered stdout of the api and worker)', () => {
  it('loses no buffered line when the process exits, by process.exit or by an uncaught exception', () => {
    const head = `
      const { createLogger, processLogDestination } = require('./dist/src/logger');
      const log = createLogger('info', 'flush-test', processLogDestination(60_000));
      for (let i = 0; i < 5; i++) log.info({ i }, 'line');
    `;
    const exited = run(`${head} setTimeout(() => process.exit(3), 50);`);
    expect(exited.status).toBe(3);
    expect(exited.lines.map((l) => l.i)).toEqual([0, 1, 2, 3, 4]);

    const crashed = run(`${head} setTimeout(() => { throw new Error('boom'); }, 50);`);
    expect(crashed.status).toBe(1);
    expect(crashed.lines.map((l) => l.i)).toEqual([0, 1, 2, 3, 4]);
  });

  it('writes buffered lines within the flush interval while the process keeps running', () => {
    const out = path.join(tempDir('log-flush'), 'stdout.log');
    const fd = fs.openSync(out, 'w');
    try {
      const script = `
        const fs = require('node:fs');
        const { createLogger, processLogDestination } = require('./dist/src/logger');
        const log = createLogger('info', 'flush-test', processLogDestination(50));
        log.info('early');
        const now = fs.fstatSync(1).size;
        // Still running: only the flush interval can have written the line by then.
        setTimeout(() => { process.stderr.write(now + ' ' + fs.fstatSync(1).size); process.exit(0); }, 400);
      `;
      const r = spawnSync(process.execPath, ['-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 15_000, stdio: ['ignore', fd, 'pipe'] });
      const [atLog, later] = r.stderr.split(' ').map(Number);
      expect(atLog).toBe(0);
      expect(later).toBeGreaterThan(0);
      expect(fs.readFileSync(out, 'utf8')).toContain('"msg":"early"');
    } finally {
      fs.closeSync(fd);
    }
  });

  it('makes no write while nothing is logged (the flush is armed by a line, not by a clock)', () => {
    const script = `
      const fs = require('node:fs');
      let writes = 0;
      const real = fs.write;
      fs.write = function (...args) { writes++; return real.apply(this, args); };
      const { createLogger, processLogDestination } = require('./dist/src/logger');
      const log = createLogger('info', 'flush-test', processLogDestination(20));
      const counts = [];
      setTimeout(() => {
        counts.push(writes);
        log.info('one line');
        setTimeout(() => {
          counts.push(writes);
          setTimeout(() => { counts.push(writes); process.stderr.write(JSON.stringify(counts)); process.exit(0); }, 300);
        }, 150);
      }, 300);
    `;
    const r = spawnSync(process.execPath, ['-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 15_000 });
    const [idle, afterLine, idleAgain] = JSON.parse(r.stderr) as number[];
    // 300 ms idle at a 20 ms interval: a clock-driven flush would have written ~15 times by now.
    expect(idle).toBe(0);
    expect(afterLine).toBe(1);
    expect(idleAgain).toBe(afterLine);
    expect(r.stdout).toContain('"msg":"one line"');
  });

  it('writes a line logged while a write was held up, without another line to arm the flush', async () => {
    // A ~490 KB burst, then one line while stdout is full (this test does not read it for 300 ms): the flush that line
    // armed finds the burst's writes still in flight. Each burst line fills one of sonic-boom's 16 KB write chunks, so
    // the last line sits alone in a chunk under minLength, which sonic-boom never writes by itself. The process stays
    // up for 3 s, so only a flush can write the line.
    const script = `
      const { createLogger, processLogDestination } = require('./dist/src/logger');
      const log = createLogger('info', 'flush-test', processLogDestination(20));
      const pad = 'x'.repeat(16_300);
      for (let i = 0; i < 30; i++) log.info({ i, pad }, 'burst');
      setTimeout(() => log.info('tail'), 50);
      setTimeout(() => process.exit(0), 3000);
    `;
    const child = spawn(process.execPath, ['-e', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      let out = '';
      await new Promise((r) => setTimeout(r, 300));
      child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
      const deadline = Date.now() + 1_500;
      while (!out.includes('"msg":"tail"') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      // Still running: the exit path's synchronous flush has not happened.
      expect(child.exitCode).toBeNull();
      expect(out).toContain('"msg":"tail"');
    } finally {
      child.kill('SIGKILL');
    }
  });
});
