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

/** Lines wait in memory until this many bytes are buffered, or the flush interval comes round. */
const LOG_BUFFER_BYTES = 4096;

/**
 * A long-running process's stdout: lines are buffered and written in one `write` per flushMs (or per 4 KB), instead of
 * one asynchronous write per line. pino flushes it synchronously on exit, so `process.exit` loses nothing; only a
 * kill that skips the exit handlers (SIGKILL, a crash of the runtime itself) loses the last flushMs of lines.
 *
 * The flush is armed by a line, not by a clock: sonic-boom's `periodicFlush` flushes every interval whether anything
 * is buffered or not, and its flush of an empty buffer is a zero-byte write through the thread pool, so an idle
 * process woke a pool thread and its own event loop ten times a second to write nothing.
 */
export function processLogDestination(flushMs: number): DestinationStream {
  if (flushMs <= 0) return pino.destination({ dest: 1, minLength: 0, sync: false });
  const dest = pino.destination({ dest: 1, minLength: LOG_BUFFER_BYTES, sync: false });
  let armed: NodeJS.Timeout | null = null;
  const flush = (): void => {
    armed = null;
    try {
      dest.flush();
    } catch {
      // Destroyed meanwhile (the exit path flushes synchronously before it closes): nothing left to write.
    }
  };
  const write = dest.write.bind(dest);
  dest.write = (line: string): boolean => {
    const ok = write(line);
    if (armed === null) {
      armed = setTimeout(flush, flushMs);
      armed.unref();
    }
    return ok;
  };
  return dest;
}

/** The process logger: JSON lines, secrets redacted, memory content never logged at info. */
export function createLogger(level: string, name = 'engram', destination?: DestinationStream): Logger {
  const opts = { name, level, redact: { paths: REDACT, censor: '[redacted]' }, base: { pid: process.pid } };
  return destination ? pino(opts, destination) : pino(opts);
}
