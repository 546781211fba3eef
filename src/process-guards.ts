import type { Logger } from './logger';
import type { Metrics } from './metrics';
import type { Shutdown } from './shutdown';

export interface ProcessGuardOptions {
  log: Logger;
  metrics: Pick<Metrics, 'unhandledRejections' | 'uncaughtExceptions'>;
  /** The process' ordered shutdown; run once on the first uncaught exception. */
  shutdown: Pick<Shutdown, 'run'>;
  exit?: (code: number) => void;
  /** The emitter to listen on (tests pass their own); default `process`. */
  proc?: NodeJS.EventEmitter;
}

const MAX_MESSAGE_CHARS = 500;

/**
 * What is logged of a thrown value: an Error's name, code and message (never its other properties, which
 * can carry job payloads or memory text); for anything else only its type.
 */
function describeError(value: unknown, withStack = false): Record<string, unknown> {
  if (!(value instanceof Error)) return { name: value === null ? 'null' : typeof value };
  const code = (value as { code?: unknown }).code;
  const out: Record<string, unknown> = { name: value.name, message: value.message.slice(0, MAX_MESSAGE_CHARS) };
  if (typeof code === 'string' || typeof code === 'number') out.code = code;
  // Frames only: the first line of a stack repeats the message.
  if (withStack && value.stack) out.stack = value.stack.split('\n').slice(1, 16).join('\n');
  return out;
}

/**
 * Process-level handlers for the api and the workers: an unhandled rejection is logged (warn) and counted,
 * and the process keeps running; an uncaught exception is logged as fatal and counted, then the ordered
 * shutdown runs and the process exits 1. Returns a function that removes them.
 */
export function installProcessGuards(opts: ProcessGuardOptions): () => void {
  const proc = opts.proc ?? process;
  const exit = opts.exit ?? ((code: number) => process.exit(code));
  let fatal = false;

  const onRejection = (reason: unknown) => {
    opts.metrics.unhandledRejections.inc();
    opts.log.warn({ err: describeError(reason) }, 'unhandled promise rejection (the process keeps running)');
  };
  const onException = (err: unknown, origin?: unknown) => {
    opts.metrics.uncaughtExceptions.inc();
    opts.log.fatal({ err: describeError(err, true), origin }, 'uncaught exception; shutting down');
    // A second one while shutting down: the first shutdown (and its forced-exit timer) finishes the job.
    if (fatal) return;
    fatal = true;
    let run: Promise<void>;
    try {
      run = Promise.resolve(opts.shutdown.run('uncaughtException'));
    } catch {
      run = Promise.resolve();
    }
    void run.catch(() => undefined).then(() => exit(1));
  };

  proc.on('unhandledRejection', onRejection);
  proc.on('uncaughtException', onException);
  return () => {
    proc.off('unhandledRejection', onRejection);
    proc.off('uncaughtException', onException);
  };
}
