/** A wait that ran out of time. */
export class TimeoutError extends Error {
  override readonly name = 'TimeoutError';
}

/**
 * Resolves or rejects with `p`, or rejects with a TimeoutError after `ms`. The timer never keeps
 * the process alive, and a `p` that loses the race and rejects later is not an unhandled rejection.
 */
export function withTimeout<T>(p: Promise<T>, ms: number, message = `did not finish within ${ms} ms`): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  p.catch(() => undefined);
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new TimeoutError(message)), ms);
      timer.unref();
    }),
  ]).finally(() => clearTimeout(timer));
}
