import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { guardedFetch, type OutboundPolicy } from '../net/url-policy';

/** A Hugging Face repo id: `owner/name`, no path tricks. */
const REPO_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** True for `owner/name` strings that are safe to put in a hub URL and a folder name. */
export function isHubRepoId(value: string): boolean {
  return REPO_ID.test(value) && !value.includes('..');
}

/** The cache folder name of a repo (`owner/name` → `owner--name`). */
export function hubRepoFolderName(repo: string): string {
  return repo.replace('/', '--');
}

/** A failed hub download; the message names the file, never the URL. */
export class HubDownloadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HubDownloadError';
  }
}

export interface HubDownloadRequest {
  /** Hub base URL (HF_HUB_ENDPOINT). */
  endpoint: string;
  repo: string;
  /** Destination folder; created when missing. */
  dir: string;
  /** Files that must exist; a 404 fails the download. */
  required: string[];
  /** Files fetched when the repo has them; a 404 is remembered so it is not asked again. */
  optional?: string[];
  policy: OutboundPolicy;
  revision?: string;
}

export interface HubDownloadResult {
  dir: string;
  downloaded: string[];
  present: string[];
  missing: string[];
}

/** Remembers which optional files the repo lacks, so a complete folder needs no request at all. */
const MARKER = '.engram-hub.json';

interface Marker {
  repo: string;
  missing: string[];
}

function readMarker(dir: string, repo: string): Marker | null {
  try {
    const m = JSON.parse(fs.readFileSync(path.join(dir, MARKER), 'utf8')) as Marker;
    return m.repo === repo && Array.isArray(m.missing) ? m : null;
  } catch {
    return null;
  }
}

/** Downloads `url` to `dest` through a temp file renamed into place; returns false on 404. */
async function downloadFile(url: string, dest: string, file: string, policy: OutboundPolicy): Promise<boolean> {
  // identity encoding: Content-Length must describe the bytes we write, not a compressed body.
  const res = await guardedFetch(url, { headers: { 'accept-encoding': 'identity', 'user-agent': 'engram' } }, policy);
  if (res.status === 404) {
    await res.body?.cancel().catch(() => undefined);
    return false;
  }
  if (!res.ok || !res.body) {
    await res.body?.cancel().catch(() => undefined);
    throw new HubDownloadError(`download of ${file} failed: HTTP ${res.status}`);
  }
  const encoding = (res.headers.get('content-encoding') ?? 'identity').toLowerCase();
  const lengthHeader = res.headers.get('content-length');
  const expected = encoding === 'identity' && lengthHeader !== null && /^\d+$/.test(lengthHeader) ? Number(lengthHeader) : null;
  const tmp = `${dest}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.part`;
  let written = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      written += chunk.length;
      cb(null, chunk);
    },
  });
  const sink = fs.createWriteStream(tmp);
  try {
    try {
      await pipeline(Readable.fromWeb(res.body as unknown as WebReadableStream<Uint8Array>), counter, sink);
    } catch {
      throw new HubDownloadError(`download of ${file} was interrupted after ${written} bytes`);
    }
    if (expected !== null && written !== expected) {
      throw new HubDownloadError(`download of ${file} is truncated: ${written} of ${expected} bytes`);
    }
    // rename is atomic on one filesystem: readers see the old state or the whole file, never a part.
    fs.renameSync(tmp, dest);
    return true;
  } finally {
    // The write stream opens its file asynchronously: a download cut before that open completes would
    // otherwise create the .part file after this removal. Wait until the stream has closed its file.
    if (!sink.closed) await new Promise<void>((resolve) => sink.once('close', () => resolve()));
    fs.rmSync(tmp, { force: true });
  }
}

/** Fetches a repo's files from `<endpoint>/<repo>/resolve/<revision>/<file>` unless already complete on disk. */
export async function downloadHubFiles(req: HubDownloadRequest): Promise<HubDownloadResult> {
  if (!isHubRepoId(req.repo)) throw new HubDownloadError('invalid hub repo id');
  fs.mkdirSync(req.dir, { recursive: true });
  const marker = readMarker(req.dir, req.repo);
  const knownMissing = new Set(marker?.missing ?? []);
  const result: HubDownloadResult = { dir: req.dir, downloaded: [], present: [], missing: [] };
  const base = req.endpoint.replace(/\/+$/, '');
  const revision = req.revision ?? 'main';
  const files = [...req.required.map((f) => ({ f, required: true })), ...(req.optional ?? []).map((f) => ({ f, required: false }))];
  for (const { f, required } of files) {
    const dest = path.join(req.dir, f);
    // A file in place got there by rename, so it is complete.
    if (fs.existsSync(dest)) {
      result.present.push(f);
      continue;
    }
    if (!required && knownMissing.has(f)) {
      result.missing.push(f);
      continue;
    }
    const url = `${base}/${req.repo}/resolve/${encodeURIComponent(revision)}/${f.split('/').map(encodeURIComponent).join('/')}`;
    const ok = await downloadFile(url, dest, f, req.policy);
    if (ok) result.downloaded.push(f);
    else if (required) throw new HubDownloadError(`${f} not found in the hub repo`);
    else result.missing.push(f);
  }
  const m: Marker = { repo: req.repo, missing: result.missing };
  const tmp = path.join(req.dir, `${MARKER}.${process.pid}.tmp`);
  fs.writeFileSync(tmp, JSON.stringify(m));
  fs.renameSync(tmp, path.join(req.dir, MARKER));
  return result;
}
