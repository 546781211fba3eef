/** Polls until the check returns a truthy value (which is returned), or throws after the timeout. */
export async function waitUntil<T>(check: () => T | Promise<T>, timeoutMs = 10_000, what = 'condition', everyMs = 50): Promise<NonNullable<T>> {
  const until = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < until) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
}
