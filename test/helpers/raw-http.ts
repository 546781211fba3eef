import http from 'node:http';

/** One raw exchange: bytes in, status, headers and bytes out, or what went wrong on the wire. */
export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** Milliseconds until the whole answer (an event stream: until its headers) arrived. */
  ms: number;
  /** No (complete) answer within the deadline. */
  timedOut: boolean;
  /** The connection failed or was cut without an answer (status 0). */
  error: string | null;
}

/**
 * A request with exactly these bytes (path, headers and body as given; node:http sends latin-1 path characters as single
 * bytes, so a path can carry invalid UTF-8), answered within `deadlineMs` or reported as timed out. An event stream is
 * read up to its headers only. supertest cannot send invalid bytes or a wrong content-length; this can.
 */
export function rawRequest(
  port: number,
  req: { method: string; path: string; headers?: Record<string, string>; body?: Buffer | null },
  opts: { deadlineMs?: number; agent?: http.Agent } = {},
): Promise<RawResponse> {
  const deadline = opts.deadlineMs ?? 2000;
  const started = performance.now();
  return new Promise((resolve) => {
    let done = false;
    const finish = (r: Omit<RawResponse, 'ms'>) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ ...r, ms: performance.now() - started });
    };
    const headers: Record<string, string> = { ...(req.headers ?? {}) };
    if (req.body && headers['content-length'] === undefined) headers['content-length'] = String(req.body.length);
    let out: http.ClientRequest;
    try {
      out = http.request({ host: '127.0.0.1', port, method: req.method, path: req.path, headers, agent: opts.agent ?? false });
    } catch (err) {
      // node:http refuses some paths/headers itself (control characters): nothing reached the server.
      resolve({ status: 0, headers: {}, body: Buffer.alloc(0), ms: 0, timedOut: false, error: `client refused: ${(err as Error).message}` });
      return;
    }
    const timer = setTimeout(() => {
      out.destroy();
      finish({ status: 0, headers: {}, body: Buffer.alloc(0), timedOut: true, error: null });
    }, deadline);
    out.on('error', (err) => finish({ status: 0, headers: {}, body: Buffer.alloc(0), timedOut: false, error: err.message }));
    out.on('response', (res) => {
      res.on('error', () => undefined);
      if (String(res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
        finish({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.alloc(0), timedOut: false, error: null });
        res.destroy();
        return;
      }
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => finish({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), timedOut: false, error: null }));
      res.on('aborted', () => finish({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), timedOut: false, error: 'response aborted' }));
    });
    // The server may answer (413, 415) and close before reading the whole body: that is not our error.
    out.on('socket', (s) => {
      // Once per socket (a keep-alive socket serves many requests).
      if (s.listenerCount('error') === 0 || !(s as { rawErrorGuard?: boolean }).rawErrorGuard) {
        (s as { rawErrorGuard?: boolean }).rawErrorGuard = true;
        s.on('error', () => undefined);
      }
    });
    out.end(req.body ?? undefined);
  });
}
