import fs from 'node:fs';
import path from 'node:path';
import { tempDir } from '../../test/helpers/env';
import { startFakeHubServer, type FakeHubServer } from '../../test/helpers/fake-hub-server';
import { operatorPolicy, type OutboundPolicy } from '../net/url-policy';
import { downloadHubFiles, hubRepoFolderName, isHubRepoId } from './hub-download';

describe('downloadHubFiles', () => {
  const repo = 'org/model';
  let hub: FakeHubServer;
  let policy: OutboundPolicy;

  beforeEach(() => {
    policy = operatorPolicy();
  });
  afterEach(async () => {
    await policy.close();
    await hub?.close();
  });

  it('writes each file whole, remembers an absent optional file, and asks nothing once complete', async () => {
    hub = await startFakeHubServer({ [`${repo}/a.json`]: '{"a":1}', [`${repo}/b.bin`]: Buffer.alloc(70_000, 7) });
    const dir = path.join(tempDir('hub'), hubRepoFolderName(repo));
    const req = { endpoint: hub.endpoint, repo, dir, required: ['a.json', 'b.bin'], optional: ['extra.json'], policy };
    const first = await downloadHubFiles(req);
    expect(first).toMatchObject({ downloaded: ['a.json', 'b.bin'], missing: ['extra.json'] });
    expect(fs.readFileSync(path.join(dir, 'b.bin')).length).toBe(70_000);
    expect(hub.requests).toHaveLength(3);

    const second = await downloadHubFiles(req);
    expect(second).toMatchObject({ downloaded: [], present: ['a.json', 'b.bin'], missing: ['extra.json'] });
    expect(hub.requests).toHaveLength(3);
  });

  it('re-fetches only what is missing', async () => {
    hub = await startFakeHubServer({ [`${repo}/a.json`]: '{}', [`${repo}/b.bin`]: 'bb' });
    const dir = tempDir('hub');
    await downloadHubFiles({ endpoint: hub.endpoint, repo, dir, required: ['a.json', 'b.bin'], policy });
    fs.rmSync(path.join(dir, 'b.bin'));
    await downloadHubFiles({ endpoint: hub.endpoint, repo, dir, required: ['a.json', 'b.bin'], policy });
    expect(hub.count(repo, 'a.json')).toBe(1);
    expect(hub.count(repo, 'b.bin')).toBe(2);
  });

  it('rejects a body shorter than its Content-Length and leaves neither the file nor a temp file', async () => {
    hub = await startFakeHubServer({ [`${repo}/b.bin`]: Buffer.alloc(200_000, 1) });
    hub.truncate(repo, 'b.bin', 50_000);
    const dir = tempDir('hub');
    const err = await downloadHubFiles({ endpoint: hub.endpoint, repo, dir, required: ['b.bin'], policy }).catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/b\.bin/);
    expect((err as Error).message).not.toContain(hub.endpoint);
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  it('leaves no temp file when the body is cut before the temp file has opened', async () => {
    // The temp file opens asynchronously; a cut that lands first must not leave it behind after the rejection.
    hub = await startFakeHubServer({ [`${repo}/b.bin`]: Buffer.alloc(1_000, 1) });
    hub.truncate(repo, 'b.bin', 0);
    const dir = tempDir('hub');
    for (let i = 0; i < 40; i++) {
      await expect(downloadHubFiles({ endpoint: hub.endpoint, repo, dir, required: ['b.bin'], policy })).rejects.toThrow(/b\.bin/);
      expect(fs.readdirSync(dir)).toEqual([]);
    }
  });

  it('fails on a missing required file and on a non-repo id', async () => {
    hub = await startFakeHubServer({});
    const dir = tempDir('hub');
    await expect(downloadHubFiles({ endpoint: hub.endpoint, repo, dir, required: ['x.json'], policy })).rejects.toThrow(/x\.json not found/);
    await expect(downloadHubFiles({ endpoint: hub.endpoint, repo: '../etc', dir, required: ['x'], policy })).rejects.toThrow(/invalid/);
  });

  it('accepts only owner/name repo ids', () => {
    expect(isHubRepoId('minishlab/potion-base-8M')).toBe(true);
    for (const bad of ['potion', 'a/b/c', '../x', 'a/..', '/abs/path', 'a b/c', 'org/..hidden']) expect(isHubRepoId(bad)).toBe(false);
    expect(hubRepoFolderName('minishlab/potion-base-8M')).toBe('minishlab--potion-base-8M');
  });
});
