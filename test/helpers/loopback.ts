import type http from 'node:http';
import type { AddressInfo } from 'node:net';

/** Listens on 127.0.0.1 on a free port; `close` also drops open keep-alive connections. */
export async function listenLoopback(server: http.Server): Promise<{ port: number; close: () => Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Reads a request's JSON body; malformed or empty bodies read as {} (fakes record what they got). */
export function onJsonBody<T>(req: http.IncomingMessage, then: (body: T) => void): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    let body = {} as T;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as T;
    } catch {
      // recorded as {}
    }
    then(body);
  });
}
