import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from '../logger';

/** How long a refused connection is drained before it is cut. */
const CLIENT_ERROR_LINGER_MS = 2000;

/** Status line and code for a request Node's parser refused before express saw it. */
function refusal(code: string | undefined): { status: number; line: string; code: string; message: string } {
  if (code === 'HPE_HEADER_OVERFLOW') return { status: 431, line: '431 Request Header Fields Too Large', code: 'headers_too_large', message: 'The request line or headers are too large' };
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return { status: 408, line: '408 Request Timeout', code: 'request_timeout', message: 'The request took too long to arrive' };
  return { status: 400, line: '400 Bad Request', code: 'bad_request', message: 'Malformed HTTP request' };
}

/**
 * A malformed request, a header overflow or a reset socket: answered (when nothing was written yet) with a JSON body
 * in the error shape, logged at debug (scanners send plenty), and the process keeps running. The path is not known
 * here, so the body is readable as both shapes: Engram's `{error:{code,message,details},requestId}` and OpenAI's
 * `{error:{message,type,param,code}}` (a /v1 client's SDK parses it too). Node adds a no-op 'error' listener on
 * the socket before this runs, so a later socket error cannot crash the process either.
 */
export function answerClientErrors(server: Server, log: Logger): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    log.debug({ code: err.code ?? err.name }, 'http client error');
    // Whether a response is being written on this socket now (as Node's own handler checks): bytesWritten would also
    // count the earlier responses of a keep-alive connection, and a second request's refusal would go unanswered.
    const current = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
    if (err.code !== 'ECONNRESET' && socket.writable && !current?.headersSent) {
      const r = refusal(err.code);
      const body = JSON.stringify({ error: { code: r.code, message: r.message, details: null, type: 'invalid_request_error', param: null }, requestId: null });
      // end, not destroy: closing with the client's unread bytes in the buffer sends a reset, and the client's kernel
      // may drop this answer before the client reads it. What the client still sends is read and discarded, for a bounded time.
      socket.end(`HTTP/1.1 ${r.line}\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      socket.resume();
      setTimeout(() => socket.destroy(), CLIENT_ERROR_LINGER_MS).unref();
      return;
    }
    socket.destroy();
  });
}
