import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An OpenAI-compatible chat upstream on 127.0.0.1 for the load and soak benches: every
 * `POST /v1/chat/completions` is answered after the same fixed delay, and nothing is recorded
 * (test/helpers/fake-upstream.ts keeps every request, which would grow without bound under a
 * 10-minute soak and skew the RSS figures). Non-streaming and streaming (3 chunks + [DONE]).
 */
export interface FixedUpstream {
  url: string;
  served: () => number;
  close: () => Promise<void>;
}

export async function startFixedUpstream(delayMs: number, reply = 'Noted. I will remember that.'): Promise<FixedUpstream> {
  let served = 0;
  const server = http.createServer((req, res) => {
    req.on('error', () => res.destroy());
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'GET' && req.url === '/v1/models') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ object: 'list', data: [{ id: 'gpt-4o-mini', object: 'model', created: 1_700_000_000, owned_by: 'fake' }] }));
        return;
      }
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'Unknown path', type: 'invalid_request_error', code: 'not_found' } }));
        return;
      }
      let stream = false;
      try {
        stream = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { stream?: boolean }).stream === true;
      } catch {
        stream = false;
      }
      const id = `chatcmpl-fixed-${++served}`;
      const created = Math.floor(Date.now() / 1000);
      setTimeout(() => {
        if (res.destroyed) return;
        if (!stream) {
          const body = JSON.stringify({
            id,
            object: 'chat.completion',
            created,
            model: 'gpt-4o-mini',
            choices: [{ index: 0, message: { role: 'assistant', content: reply }, finish_reason: 'stop' }],
            usage: { prompt_tokens: 20, completion_tokens: 8, total_tokens: 28 },
          });
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) });
          res.end(body);
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        const ev = (delta: Record<string, unknown>, finish: string | null) =>
          `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: 'gpt-4o-mini', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
        res.write(ev({ role: 'assistant', content: '' }, null));
        for (const part of reply.split(' ')) res.write(ev({ content: `${part} ` }, null));
        res.end(`${ev({}, 'stop')}data: [DONE]\n\n`);
      }, delayMs);
    });
  });
  server.keepAliveTimeout = 60_000;
  server.on('clientError', (_err, socket) => socket.destroy());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    served: () => served,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
