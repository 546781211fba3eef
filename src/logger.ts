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
  // Bytes handed to the destination and not yet written: a flush is due while there are any.
  let pending = 0;
  let armed: NodeJS.Timeout | null = null;
  const arm = (): void => {
    if (armed !== null) return;
    armed = setTimeout(flush, flushMs);
    armed.unref();
  };
  const flush = (): void => {
    armed = null;
    if (pending === 0) return;
    try {
      // A write in flight makes this a no-op; the 'drain' after that write arms the next flush.
      dest.flush();
    } catch {
      // Destroyed meanwhile (the exit path flushes synchronously before it closes): nothing left to write.
    }
  };
  dest.on('write', (n: number) => {
    pending = Math.max(0, pending - n);
  });
  // A run of writes stops with up to minLength bytes still buffered (sonic-boom writes on only above it).
  dest.on('drain', () => {
    if (pending > 0) arm();
  });
  const write = dest.write.bind(dest);
  dest.write = (line: string): boolean => {
    pending += Buffer.byteLength(line);
    const ok = write(line);
    arm();
    return ok;
  };
  return dest;
}

/** The process logger: JSON lines, secrets redacted, memory content never logged at info. */
export function createLogger(level: string, name = 'engram', destination?: DestinationStream): Logger {
  const opts = { name, level, redact: { paths: REDACT, censor: '[redacted]' }, base: { pid: process.pid } };
  return destination ? pino(opts, destination) : pino(opts);
}
