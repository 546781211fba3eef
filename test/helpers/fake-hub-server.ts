import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeHubServer {
  /** What HF_HUB_ENDPOINT should be set to. */
  endpoint: string;
  /** Request paths in arrival order. */
  requests: string[];
  /** How many requests asked for a repo file (any revision). */
  count(repo: string, file: string): number;
  /** The next responses for this file send the full Content-Length but only `bytes` bytes, then drop the connection. */
  truncate(repo: string, file: string, bytes: number | null): void;
  close(): Promise<void>;
}

/** A Hugging Face hub stand-in on 127.0.0.1 serving `/<repo>/resolve/<rev>/<file>` with Content-Length. */
export async function startFakeHubServer(files: Record<string, Buffer | string>, opts: { delayMs?: number } = {}): Promise<FakeHubServer> {
  const requests: string[] = [];
  const truncated = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const url = req.url ?? '';
    requests.push(url);
    const m = /^\/([^/]+\/[^/]+)\/resolve\/[^/]+\/(.+)$/.exec(url);
    const key = m ? `${m[1]}/${decodeURIComponent(m[2])}` : '';
    const body = files[key];
    const reply = () => {
      if (body === undefined) {
        res.writeHead(404, { 'content-type': 'text/plain', 'content-length': 9 });
        res.end('not found');
        return;
      }
      const buf = Buffer.isBuffer(body) ? body : Buffer.from(body);
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': buf.length });
      const cut = truncated.get(key);
      if (cut !== undefined) {
        res.write(buf.subarray(0, cut), () => res.destroy());
        return;
      }
      res.end(buf);
    };
    if (opts.delayMs) setTimeout(reply, opts.delayMs).unref();
    else reply();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    requests,
    count: (repo, file) => requests.filter((p) => p.startsWith(`/${repo}/resolve/`) && p.endsWith(`/${file}`)).length,
    truncate: (repo, file, bytes) => {
      if (bytes === null) truncated.delete(`${repo}/${file}`);
      else truncated.set(`${repo}/${file}`, bytes);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
