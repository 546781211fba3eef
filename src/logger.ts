import pino, { type DestinationStream, type Logger } from 'pino';

export type { Logger };

/** Paths that may carry secrets; pino replaces them before a line is written. */
const REDACT = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'res.headers["set-cookie"]',
  '*.apiKey',
  '*.token',
  '*.secret',
  '*.password',
];

/**
 * The process logger: JSON lines, secrets redacted, memory content never logged at info. Without a destination it
 * writes each line to stdout synchronously, as Node writes to stdout when it is a file or a pipe on Linux: pino's
 * default is an asynchronous sonic-boom, which hands every write to libuv's thread pool and back (the access line of
 * each proxied chat: a thread wake-up on the way out and an event-loop wake-up on the way back; bench/README.md,
 * "Seventh pass"). A line is on stdout when the call returns, so a crash loses none.
 */
export function createLogger(level: string, name = 'engram', destination?: DestinationStream): Logger {
  const opts = { name, level, redact: { paths: REDACT, censor: '[redacted]' }, base: { pid: process.pid } };
  return pino(opts, destination ?? pino.destination({ dest: 1, sync: true }));
}
