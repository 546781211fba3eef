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

/** The process logger: JSON lines, secrets redacted, memory content never logged at info. */
export function createLogger(level: string, name = 'engram', destination?: DestinationStream): Logger {
  const opts = { name, level, redact: { paths: REDACT, censor: '[redacted]' }, base: { pid: process.pid } };
  return destination ? pino(opts, destination) : pino(opts);
}
