import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { TEST_TOKEN, tempDir, testEnv } from '../helpers/env';
import { childEnv, spawnEngram, type Child } from '../helpers/processes';
import { startFakeUpstream } from '../helpers/fake-upstream';
import { freePort } from '../helpers/redis-server';
import { waitUntil } from '../helpers/wait';

/**
 * Issue 15 §3, disk full: the api's DATA_DIR is a small filesystem of the test's own (tmpfs; a loop-mounted
 * ext4 image when tmpfs cannot be mounted). With the disk filled, writes answer 507 in the one error shape
 * (no stack, nothing half-written), reads and chats keep being served, the process stays up; when space
 * returns, writes succeed again and `PRAGMA integrity_check` is ok.
 */

const SIZE_MB = 48;

/** Mounts a small filesystem on a new dir; returns it and how to undo it, or why it cannot. */
function smallFilesystem(): { dir: string; kind: string; undo(): void } | { reason: string } {
  const dir = tempDir('diskfull');
  const errors: string[] = [];
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${SIZE_MB}m`, 'tmpfs', dir], { stdio: 'pipe' });
    return { dir, kind: `tmpfs ${SIZE_MB} MB`, undo: () => execFileSync('umount', ['-l', dir], { stdio: 'pipe' }) };
  } catch (err) {
    errors.push(`tmpfs: ${String((err as { stderr?: Buffer }).stderr ?? (err as Error).message).trim()}`);
  }
  try {
    const img = path.join(tempDir('diskimg'), 'fs.img');
    execFileSync('truncate', ['-s', `${SIZE_MB}M`, img]);
    execFileSync('mkfs.ext4', ['-q', '-F', img], { stdio: 'pipe' });
    execFileSync('mount', ['-o', 'loop', img, dir], { stdio: 'pipe' });
    return { dir, kind: `loop ext4 ${SIZE_MB} MB`, undo: () => execFileSync('umount', ['-l', dir], { stdio: 'pipe' }) };
  } catch (err) {
    errors.push(`loop: ${String((err as { stderr?: Buffer }).stderr ?? (err as Error).message).trim()}`);
  }
  return { reason: errors.join('; ') };
}

/** Fills the filesystem holding `dir` with a filler file until the kernel says ENOSPC. */
function fill(dir: string): string {
  const filler = path.join(dir, 'filler.bin');
  const fd = fs.openSync(filler, 'w');
  const block = Buffer.alloc(256 * 1024, 7);
  try {
    for (;;) {
      try {
        fs.writeSync(fd, block);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
        break;
      }
    }
    // The last few bytes too (a short write of the remainder).
    for (const size of [4096, 512, 1]) {
      const small = Buffer.alloc(size, 7);
      for (;;) {
        try {
          fs.writeSync(fd, small);
        } catch {
          break;
        }
      }
    }
  } finally {
    fs.closeSync(fd);
  }
  return filler;
}

const fsReady = smallFilesystem();
const cannot = 'reason' in fsReady ? fsReady.reason : null;
if (cannot) console.warn(`SKIPPED disk-full case: no small filesystem could be mounted (${cannot})`);
const itMounted = cannot ? it.skip : it;

describe('disk full on the data dir (real api process)', () => {
  jest.setTimeout(120_000);
  const children: Child[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of cleanups) await c();
    for (const c of children) if (c.proc.exitCode === null) c.proc.kill('SIGKILL');
    await Promise.all(children.map((c) => c.exited));
    if (!('reason' in fsReady)) fsReady.undo();
  });

  itMounted('writes answer 507 with the error shape, reads and the process live on, the database is intact when space returns', async () => {
    if ('reason' in fsReady) throw new Error('unreachable');
    const env = testEnv({ DATA_DIR: fsReady.dir });
    const port = await freePort();
    const upstream = await startFakeUpstream();
    cleanups.push(() => upstream.close());
    const api = spawnEngram('api', childEnv(env, { PORT: String(port), UPSTREAM_BASE_URL: `${upstream.url}/v1`, EXPIRE_EVERY_MS: '0', REPAIR_SWEEP_EVERY_MS: '0' }));
    children.push(api);
    const base = `http://127.0.0.1:${port}`;
    const mgmt = { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' };
    await waitUntil(async () => (await fetch(`${base}/readyz`).catch(() => null))?.status === 200, 30_000, `api ready: ${api.output()}`);

    const content = (i: number, size: number) => `fact ${i} ` + 'x'.repeat(size);
    const post = (i: number, size = 16_000) =>
      fetch(`${base}/api/memory`, { method: 'POST', headers: mgmt, body: JSON.stringify({ key: `k${i}`, content: content(i, size) }) });
    for (let i = 0; i < 20; i++) expect((await post(i)).status).toBe(201);
    expect((await fetch(`${base}/api/settings/memory`, { method: 'PUT', headers: mgmt, body: JSON.stringify({ enabled: true, strategy: 'hybrid' }) })).status).toBe(200);
    const key = (await (await fetch(`${base}/api/keys`, { method: 'POST', headers: mgmt, body: JSON.stringify({ name: 'full' }) })).json()) as { key: string };
    const chat = () =>
      fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'I prefer tea.' }] }),
      });

    const filler = fill(fsReady.dir);
    // Bounded: writes keep going until the WAL needs a page the disk does not have.
    const statuses: number[] = [];
    let refused: Response | null = null;
    for (let i = 20; i < 400 && !refused; i++) {
      const r = await post(i, 60_000);
      statuses.push(r.status);
      if (r.status !== 201) refused = r;
      else await r.arrayBuffer();
    }
    expect(refused).not.toBeNull();
    const refusedBody = (await refused!.json()) as { error: { code: string; message: string; details: unknown } };
    console.log(`disk full (${fsReady.kind}): ${statuses.length - 1} writes still fit after the filler, then ${refused!.status} ${refusedBody.error.code}`);
    expect(refused!.status).toBe(507);
    expect(refusedBody).toEqual({ error: { code: 'insufficient_storage', message: expect.any(String), details: null }, requestId: expect.any(String) });
    expect(JSON.stringify(refusedBody)).not.toMatch(/at .*\.js|SQLITE_FULL|ENOSPC/);
    const refusedKey = `k${statuses.length + 19}`;

    // More writes are refused the same way, never a 500; reads, health and the process live on.
    for (let i = 0; i < 5; i++) expect((await post(1000 + i, 60_000)).status).toBe(507);
    const list = await fetch(`${base}/api/memory?limit=1`, { headers: mgmt });
    expect(list.status).toBe(200);
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    // The proxy keeps answering: its memory phase reads, its extraction job goes to Redis.
    let chats = 0;
    for (let i = 0; i < 5; i++) if ((await chat()).status === 200) chats++;
    console.log(`disk full: chats answered while full: ${chats}/5`);
    expect(chats).toBe(5);
    expect(api.proc.exitCode).toBeNull();

    // Space returns: writes succeed without a restart.
    fs.rmSync(filler);
    const after = await post(5000);
    expect(after.status).toBe(201);
    const total = ((await (await fetch(`${base}/api/memory?limit=1`, { headers: mgmt })).json()) as { total: number }).total;
    expect(total).toBe(20 + statuses.length);
    api.proc.kill('SIGTERM');
    expect((await api.exited).code).toBe(0);

    const db = new Database(path.join(fsReady.dir, 'engram.db'), { readonly: true });
    try {
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      // The refused write left nothing behind.
      expect(db.prepare('SELECT COUNT(*) AS n FROM memories WHERE key = ?').get(refusedKey)).toEqual({ n: 0 });
      expect(db.prepare("SELECT COUNT(*) AS n FROM memories WHERE key LIKE 'k1___'").get()).toEqual({ n: 0 });
    } finally {
      db.close();
    }
  });
});
