import { spawnSync } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..');

describe('createLogger', () => {
  it('writes each line to stdout before the call returns: a process killed right after three lines has all three on stdout', () => {
    // The built logger (as process-guards.test.ts runs it), in a child killed at once after the calls: SIGKILL runs
    // no exit handler, and the event loop never turns again, so a line held back for a later write is lost.
    const script =
      "const { createLogger } = require('./dist/src/logger'); const log = createLogger('info', 'sync-test'); for (let n = 1; n <= 3; n++) log.info({ n }, 'the line'); process.kill(process.pid, 'SIGKILL');";
    const r = spawnSync(process.execPath, ['-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 15_000 });
    expect(r.signal).toBe('SIGKILL');
    const lines = r.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toEqual([1, 2, 3].map((n) => expect.objectContaining({ level: 30, name: 'sync-test', n, msg: 'the line', pid: expect.any(Number) })));
  });
});
